"""Worker child processes: the handle a test holds, and the child's main."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import dex_agents
from dex_agents import AgentSessionFlow, AgentWorker, serve_agent_worker

__all__ = [
    "DEFAULT_MAX_CONCURRENT_TASKS",
    "SERVER_ADDRESS_ENV",
    "WORKER_DRAIN_TIMEOUT_ENV",
    "WORKER_DRAIN_TIMEOUT_SECONDS",
    "WORKER_MAX_CONCURRENT_TASKS_ENV",
    "WORKER_READY_FILE_ENV",
    "WORKER_READY_TIMEOUT_SECONDS",
    "WorkerProcess",
    "run_agent_worker",
    "spawn_worker",
]

SERVER_ADDRESS_ENV = "DEX_SERVER_ADDRESS"
"""The server address; the test stack sets it for every Worker child it starts."""
WORKER_READY_FILE_ENV = "DEX_AGENTS_WORKER_READY_FILE"
"""A file the Worker child creates once every pull queue has registered."""
WORKER_MAX_CONCURRENT_TASKS_ENV = "DEX_AGENTS_WORKER_MAX_CONCURRENT_TASKS"
"""The child's ``PullWorkerOptions.max_concurrent_tasks``."""

# The largest tool batch in these tests is a handful of calls; RunModel, ResumeTurn, approvals and RPCs run
# beside it. The SDK default (the CPU count, 2 here) would run one Step at a time and hide parallelism.
DEFAULT_MAX_CONCURRENT_TASKS = 16
WORKER_DRAIN_TIMEOUT_SECONDS = 5.0
"""How long a Worker child lets running Steps finish after SIGTERM before it cancels them and exits."""
WORKER_DRAIN_TIMEOUT_ENV = "DEX_AGENTS_WORKER_DRAIN_TIMEOUT_SECONDS"
"""Overrides `WORKER_DRAIN_TIMEOUT_SECONDS` in a Worker child (a deploy test sets the production one)."""
WORKER_READY_TIMEOUT_SECONDS = 30.0


class WorkerProcess:
    """A running Worker child in its own process group.

    Args:
        process: The child process.
        log_path: Where the child's stdout and stderr go.
    """

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self._process = process
        self._log_path = log_path
        self._was_killed = False

    @property
    def pid(self) -> int:
        """The child's process ID (also its process group ID)."""
        return self._process.pid

    @property
    def log_path(self) -> Path:
        """The child's combined stdout and stderr."""
        return self._log_path

    @property
    def is_running(self) -> bool:
        """Whether the child is alive."""
        return self._process.poll() is None

    @property
    def was_killed(self) -> bool:
        """Whether :meth:`kill` SIGKILLed the child while it was still running."""
        return self._was_killed

    def kill(self) -> None:
        """SIGKILL the child's whole process group and wait until the child is gone.

        The Worker gets no chance to finish, report or drain anything, as in a machine crash.
        """
        if self._process.poll() is None:
            self._was_killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()

    def begin_stop(self) -> None:
        """Send SIGTERM and return at once: the Worker declines new tasks and drains the running ones.

        A test uses it to leave a session without any Worker that takes new tasks while the Step that is
        running still finishes. :meth:`kill` or :meth:`stop` reaps the process afterwards.
        """
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to exit and return its exit code.

        Args:
            timeout: Seconds to wait; ``None`` waits for ever.

        Raises:
            subprocess.TimeoutExpired: If it is still running after ``timeout``.
        """
        return self._process.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the Worker to drain with SIGTERM; SIGKILL it when it does not exit within ``timeout``.

        Args:
            timeout: Seconds to wait for a graceful exit.
        """
        if self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGTERM)
                self._process.wait(timeout=timeout)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def read_log(self) -> str:
        """Return what the child printed so far."""
        return self._log_path.read_text(encoding="utf-8", errors="replace") if self._log_path.exists() else ""


async def spawn_worker(
    worker_module: str,
    *,
    server_address: str,
    log_path: Path,
    cwd: Path | None,
    env: Mapping[str, str],
    max_concurrent_tasks: int,
    ready_timeout: float = WORKER_READY_TIMEOUT_SECONDS,
) -> WorkerProcess:
    """Start ``python -m worker_module`` in a new process group and wait until it registered.

    Args:
        worker_module: The module whose ``__main__`` calls :func:`run_agent_worker`.
        server_address: The server the Worker connects to.
        log_path: Where the child's output goes.
        cwd: The child's working directory (so ``tests.my_worker`` imports), or ``None``.
        env: Extra environment variables for the child.
        max_concurrent_tasks: The Worker's task slots.
        ready_timeout: Seconds to wait for the registration.

    Returns:
        The running Worker.

    Raises:
        RuntimeError: If the child exits or does not register within ``ready_timeout``.
    """
    ready_file = log_path.with_suffix(".ready")
    ready_file.unlink(missing_ok=True)
    child_env = {
        **os.environ,
        **env,
        SERVER_ADDRESS_ENV: server_address,
        WORKER_READY_FILE_ENV: str(ready_file),
        WORKER_MAX_CONCURRENT_TASKS_ENV: str(max_concurrent_tasks),
        "PYTHONUNBUFFERED": "1",
    }
    if cwd is not None:
        # ``-m`` puts the working directory on sys.path; keep the parent's path too.
        child_env["PYTHONPATH"] = os.pathsep.join(
            part for part in (str(cwd), os.environ.get("PYTHONPATH", "")) if part
        )
    with log_path.open("ab") as log:
        # Popen returns at once; the wait for readiness below is async.
        process = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", worker_module],
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    worker = WorkerProcess(process, log_path)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ready_timeout
    while not ready_file.exists():
        if not worker.is_running:
            raise RuntimeError(f"Worker {worker_module} exited before it registered:\n{worker.read_log()}")
        if loop.time() > deadline:
            worker.kill()
            raise RuntimeError(
                f"Worker {worker_module} did not register within {ready_timeout} s:\n{worker.read_log()}"
            )
        await asyncio.sleep(0.05)
    return worker


async def _stop_when_orphaned(worker: AgentWorker) -> None:
    # A test process that dies without cleaning up (SIGKILL, a CI timeout) leaves its Workers in their own
    # process groups; a Worker whose parent is gone stops instead of serving for ever.
    parent = os.getppid()
    while os.getppid() == parent:  # noqa: ASYNC110 - no event tells a process its parent died
        await asyncio.sleep(1)
    await worker.stop()


def run_agent_worker(flows: Sequence[AgentSessionFlow], *, server_address: str | None = None) -> None:
    """Serve ``flows`` with `serve_agent_worker` until the process is killed or terminated.

    This is the main of a Worker child that :meth:`AgentTestStack.start_worker` starts: the documented
    entry point (`dex_agents.serve_agent_worker`, so the same sizing, codecs, blob cache and SDK patch as
    an application's Worker) with the test stack's task slots. It reads the server address from
    ``DEX_SERVER_ADDRESS``, which the stack sets, creates the ready file the stack waits for once every
    pull queue has registered, stops when the test process is gone, and drains on SIGTERM.

    Args:
        flows: The session Flows to register; build them exactly as the test process does.
        server_address: Overrides ``DEX_SERVER_ADDRESS``.

    Raises:
        RuntimeError: If no server address is known.
    """
    address = server_address or os.environ.get(SERVER_ADDRESS_ENV)
    if not address:
        raise RuntimeError(f"run_agent_worker needs {SERVER_ADDRESS_ENV} (AgentTestStack sets it)")
    max_tasks = int(os.environ.get(WORKER_MAX_CONCURRENT_TASKS_ENV, str(DEFAULT_MAX_CONCURRENT_TASKS)))
    ready_file = os.environ.get(WORKER_READY_FILE_ENV)
    background: set[asyncio.Task[None]] = set()

    def on_ready(worker: AgentWorker) -> None:
        if ready_file:
            Path(ready_file).write_text(str(os.getpid()), encoding="utf-8")
            watcher = asyncio.get_running_loop().create_task(_stop_when_orphaned(worker))
            background.add(watcher)
            watcher.add_done_callback(background.discard)
        release = dex_agents.__version__
        print(f"dex-agents {release} worker ready (pid {os.getpid()}, {max_tasks} task slots)", flush=True)

    serve_agent_worker(
        flows,
        server_address=address,
        on_ready=on_ready,
        max_concurrent_tasks=max_tasks,
        drain_timeout=timedelta(
            seconds=float(os.environ.get(WORKER_DRAIN_TIMEOUT_ENV, str(WORKER_DRAIN_TIMEOUT_SECONDS)))
        ),
    )
