"""A private ``dex-devserver`` subprocess for integration tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["DevServerProcess"]

_LISTENING_LINE = re.compile(r"^listening on (\S+:\d+)\s*$", re.MULTILINE)
_STARTUP_TIMEOUT_SECONDS = 30.0


# Starts the server through a single-threaded launcher that asks Linux to SIGKILL it when the thread that
# started it dies, then execs the server (the request survives exec). A test process killed without cleanup
# (a CI timeout) thus leaves no server holding its port. preexec_fn would do the same, but is unsafe in a
# process with threads.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "if sys.platform == 'linux':\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


class DevServerProcess:
    """One ``dex-devserver serve`` child process on a SQLite file.

    The server runs in its own process group, so :meth:`kill` also ends anything it started, and on Linux
    it dies with the thread that started it, so a killed test run leaves no server behind. It binds a
    free port on the first start (``--port 0``) and the same port on every restart, so Clients and pull
    Workers that already know the address reconnect to the restarted server.

    Args:
        database: The SQLite file; a restart reopens the same file.
        log_path: Where the server's stdout and stderr go (the ``listening on`` line is read from it).
        extra_args: More ``serve`` arguments, such as ``("--dispatch-wait", "2")``.
    """

    def __init__(self, database: Path, log_path: Path, extra_args: tuple[str, ...] = ()) -> None:
        self._database = database
        self._log_path = log_path
        self._extra_args = extra_args
        self._process: subprocess.Popen[bytes] | None = None
        self._address: str | None = None

    @property
    def address(self) -> str:
        """The ``host:port`` the server listens on.

        Raises:
            RuntimeError: If the server has never started.
        """
        if self._address is None:
            raise RuntimeError("the development server has not started")
        return self._address

    @property
    def is_running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> str:
        """Start the server and wait for its ``listening on`` line.

        Returns:
            The bound ``host:port``.

        Raises:
            RuntimeError: If the server exits or prints no address within 30 seconds.
        """
        if self.is_running:
            raise RuntimeError("the development server is already running")
        port = "0" if self._address is None else self._address.rsplit(":", 1)[1]
        command = [
            sys.executable,
            "-c",
            _LAUNCHER,
            "-m",
            "dex_devserver",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--db",
            str(self._database),
            *self._extra_args,
        ]
        # Each start appends to the log; remember where this start's output begins.
        offset = self._log_path.stat().st_size if self._log_path.exists() else 0
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._address = self._wait_for_address(offset)
        return self._address

    def _wait_for_address(self, offset: int) -> str:
        deadline = time.monotonic() + _STARTUP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            with self._log_path.open("rb") as log:
                log.seek(offset)
                output = log.read().decode("utf-8", errors="replace")
            match = _LISTENING_LINE.search(output)
            if match is not None:
                return match.group(1)
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"dex-devserver exited with code {self._process.returncode} before listening:\n{output}"
                )
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"dex-devserver printed no 'listening on' line within {_STARTUP_TIMEOUT_SECONDS} s"
        )

    def kill(self) -> None:
        """SIGKILL the server's process group and wait for the server to exit."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        self._process = None

    def stop(self) -> None:
        """Stop the server with SIGTERM, then SIGKILL if it lingers for five seconds."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()
