"""The files a README spells out, read back from its text so a test can run exactly what users copy."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dex_agents.testing._server import DevServerProcess

__all__ = ["ReadmeRun", "readme_snippets", "run_readme_files"]

_SNIPPET = re.compile(
    r"^<!-- file: (?P<name>[^\s>]+) -->\n```[a-z]*\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL
)

# The address the READMEs tell users to start `dex-devserver serve` on.
_README_ADDRESS = "localhost:8801"
_CLIENT_TIMEOUT_SECONDS = 120.0
# A Worker that drains on SIGTERM returns well within this; one that does not is killed and reported.
_WORKER_STOP_SECONDS = 60.0


def readme_snippets(readme: Path) -> dict[str, str]:
    """Return the code blocks a README marks as files, by file name.

    A block is marked by an HTML comment on the line just before its fence, ``<!-- file: worker.py -->``,
    which Markdown renders as nothing. A test writes the blocks to a directory and runs them, so the README
    cannot drift from code that works.

    Args:
        readme: The README's path.

    Returns:
        Each marked block's code, by the name in its marker.

    Raises:
        ValueError: If two blocks carry the same name.
    """
    snippets: dict[str, str] = {}
    for match in _SNIPPET.finditer(readme.read_text(encoding="utf-8")):
        name = match.group("name")
        if name in snippets:
            raise ValueError(f"{readme} marks two code blocks as {name!r}")
        snippets[name] = match.group("code")
    return snippets


@dataclass(frozen=True)
class ReadmeRun:
    """What a README's Worker and client files did when run as a user runs them.

    Attributes:
        client_returncode: The client's exit status.
        client_stdout: What the client printed on standard output.
        client_stderr: What the client printed on standard error.
        worker_exit: The Worker's exit status after SIGTERM (negative if it had to be killed).
        worker_log: The Worker's standard output and standard error, together.
    """

    client_returncode: int
    client_stdout: str
    client_stderr: str
    worker_exit: int
    worker_log: str


def run_readme_files(
    directory: Path,
    files: Mapping[str, str],
    *,
    worker: str,
    client: str,
    env: Mapping[str, str] | None = None,
    timeout: float = _CLIENT_TIMEOUT_SECONDS,
) -> ReadmeRun:
    """Run a README's Worker and client files against a private devserver, as a user runs them.

    Starts ``dex-devserver serve`` on a free port, writes ``files`` into ``directory`` with
    ``localhost:8801`` replaced by that server's address (the one change to what the README says), starts
    ``python <worker>`` in the background (its output goes to ``worker.log``), runs ``python <client>`` to
    its end, then sends the Worker SIGTERM, waits for it to drain and stops the server. The server's
    SQLite file and log stay in ``directory`` too.

    Args:
        directory: An empty directory, such as pytest's ``tmp_path``; both files run with it as the working
            directory, so they import the other files in ``files`` as a user's would.
        files: Each file's text by its name, usually from :func:`readme_snippets`, plus any file the README
            leaves to the user.
        worker: The name in ``files`` of the file that serves the Worker until SIGTERM.
        client: The name in ``files`` of the file that drives a session and exits.
        env: Variables to set for both processes on top of this process's environment.
        timeout: Seconds the client may take.

    Returns:
        The client's exit status and output, and the Worker's exit status and log.

    Raises:
        ValueError: If ``worker`` or ``client`` is not in ``files``, or does not name ``localhost:8801``
            (it would then not reach the private server).
        subprocess.TimeoutExpired: If the client runs longer than ``timeout``.
    """
    for name in (worker, client):
        if _README_ADDRESS not in files.get(name, ""):
            raise ValueError(f"{name!r} is not among the files or does not connect to {_README_ADDRESS}")
    child_env = {**os.environ, **(env or {})}
    worker_log = directory / "worker.log"
    server = DevServerProcess(directory / "devserver.sqlite3", directory / "devserver.log")
    server.start()
    try:
        for name, text in files.items():
            (directory / name).write_text(text.replace(_README_ADDRESS, server.address), encoding="utf-8")
        with worker_log.open("wb") as log:
            worker_process = subprocess.Popen(
                [sys.executable, worker], cwd=directory, env=child_env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            completed = subprocess.run(
                [sys.executable, client],
                check=False,
                cwd=directory,
                env=child_env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        finally:
            worker_exit = _stop_worker(worker_process)
    finally:
        server.stop()
    return ReadmeRun(
        client_returncode=completed.returncode,
        client_stdout=completed.stdout,
        client_stderr=completed.stderr,
        worker_exit=worker_exit,
        worker_log=worker_log.read_text(encoding="utf-8", errors="replace"),
    )


def _stop_worker(process: subprocess.Popen[bytes]) -> int:
    # serve_agent_worker drains and returns on SIGTERM, as a user's Ctrl-C or service manager stops it.
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=_WORKER_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        # Kill it rather than leave it running past the test; the negative status fails the exit check.
        process.kill()
        return process.wait()
