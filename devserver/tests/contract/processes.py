"""Start and kill the devserver and the Worker child, each in its own process group.

Both processes write their output to a log file rather than a pipe, so a chatty process can never
block on a full pipe, and readiness is a line the test polls for with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from .sandbox import SANDBOX_ENV

Mode = Literal["push", "pull"]

_TESTS_DIR = Path(__file__).resolve().parent.parent
_LISTENING = re.compile(r"^listening on (\S+):(\d+)$", re.MULTILINE)
WORKER_READY = "contract worker ready"
_WORKER_READY_LINE = re.compile(rf"^{WORKER_READY} on port (\d+)$", re.MULTILINE)


def ready_line(port: int) -> str:
    """The Worker child's readiness line, with the port it listens on (0 in pull mode)."""
    return f"{WORKER_READY} on port {port}"


def free_port() -> int:
    """Return a port that was free a moment ago.

    Another process may take it before the caller binds it, so use it only where an address must be
    known before the process that listens on it starts (a Flow started before its Worker, a devserver
    told its default Worker target). Otherwise let the process bind port 0 and report its port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def _kill_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


class DevServer:
    """One ``dex-devserver serve`` process; ``kill`` plus ``start`` restarts it on the same port and file."""

    def __init__(self, log_dir: Path, *, db: Path | None, extra_args: Sequence[str] = ()) -> None:
        self.log_dir = log_dir
        self.db = db
        self.extra_args = tuple(extra_args)
        self.port = 0
        self.host = "127.0.0.1"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        # Several servers may share a log directory; a readiness line must come from this one.
        self.tag = uuid.uuid4().hex[:8]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self.starts += 1
        log = self.log_dir / f"devserver-{self.tag}-{self.starts}.log"
        storage = ["--db", str(self.db)] if self.db is not None else ["--memory"]
        command = [
            sys.executable,
            "-m",
            "dex_devserver",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *storage,
            *self.extra_args,
        ]
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            match = _LISTENING.search(log.read_text(errors="replace"))
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"devserver did not print 'listening on HOST:PORT' ({' '.join(command)}):\n{_tail(log)}"
                )
            time.sleep(0.02)

    def terminate(self) -> None:
        """SIGTERM the devserver: a clean stop, which it may take its stop grace to finish."""
        if self.process is not None:
            _kill_group(self.process, signal.SIGTERM)

    def wait_stopped(self, timeout: float = 60.0) -> int:
        """Waits for the devserver to exit after `terminate` and returns its exit status."""
        assert self.process is not None
        status = self.process.wait(timeout=timeout)
        self.process = None
        return status

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown hook runs, exactly like a crash."""
        if self.process is not None:
            _kill_group(self.process, signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None

    def log_tail(self) -> str:
        return _tail(self.log_dir / f"devserver-{self.tag}-{self.starts}.log")


class WorkerProcess:
    """The Worker child (``contract.worker_main``); in push mode it keeps its port across restarts.

    A push Worker binds port 0 on its first start and reports the port it got; a restart binds that
    same port again, because the Flows' Worker target address points at it. Pass ``port`` (from
    ``free_port``) only when the address must be known before the first start.
    """

    def __init__(
        self,
        mode: Mode,
        server: DevServer,
        sandbox_dir: Path,
        log_dir: Path,
        *,
        role: str = "worker",
        extra_env: dict[str, str] | None = None,
        port: int = 0,
    ) -> None:
        self.mode: Mode = mode
        self.server = server
        self.sandbox_dir = sandbox_dir
        self.log_dir = log_dir
        self.role = role
        self.extra_env = dict(extra_env or {})
        self.port = port if mode == "push" else 0
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.tag = uuid.uuid4().hex[:8]
        self.log = log_dir / "worker-not-started.log"

    @property
    def push_address(self) -> str:
        if self.port == 0:
            raise RuntimeError("the push Worker's port is known once it started, or when passed as port=")
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self.starts += 1
        log = self.log_dir / f"worker-{self.mode}-{self.role}-{self.tag}-{self.starts}.log"
        command = [
            sys.executable,
            "-m",
            "contract.worker_main",
            "--mode",
            self.mode,
            "--server",
            self.server.address,
            "--port",
            str(self.port),
        ]
        env = dict(os.environ)
        env[SANDBOX_ENV] = str(self.sandbox_dir)
        env["DEX_CONTRACT_ROLE"] = self.role
        env.update(self.extra_env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_TESTS_DIR), env.get("PYTHONPATH", "")) if p)
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=_TESTS_DIR,
                start_new_session=True,
            )
        self.log = log
        deadline = time.monotonic() + timeout
        while not (ready := _WORKER_READY_LINE.search(log.read_text(errors="replace"))):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"Worker child did not become ready:\n{_tail(log)}")
            time.sleep(0.02)
        if self.mode == "push":
            self.port = int(ready.group(1))

    def kill(self) -> None:
        if self.process is not None:
            _kill_group(self.process, signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None

    def log_tail(self) -> str:
        return _tail(self.log)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None
