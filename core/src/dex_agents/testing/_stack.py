"""``AgentTestStack``: a server, a Client and Worker children for one test module."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from dex import AsyncClient

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents._connection import ClientConnection
from dex_agents.session._durable_wait import DURABLE_WAIT_TIMER_ID
from dex_agents.testing._flow_state import skip_waiting_timer
from dex_agents.testing._gates import FileGate
from dex_agents.testing._history import StepHistoryEntry, read_step_history
from dex_agents.testing._invocations import InvocationLog
from dex_agents.testing._script import STATE_DIR_ENV, ScriptStore
from dex_agents.testing._server import DevServerProcess
from dex_agents.testing._worker import (
    DEFAULT_MAX_CONCURRENT_TASKS,
    SERVER_ADDRESS_ENV,
    WORKER_READY_TIMEOUT_SECONDS,
    WorkerProcess,
    spawn_worker,
)

__all__ = ["AgentTestStack"]


class AgentTestStack:
    """A Dex server, a Client and Worker child processes for integration tests.

    Use it as an async context manager. Without ``DEX_SERVER_ADDRESS`` it starts a private
    ``dex-devserver`` (``--port 0``, a SQLite file under ``tmp_path``); with it, it targets that already
    running server, such as a real Dex Server, and starts nothing. Workers are children started with
    ``sys.executable -m worker_module`` in their own process group, in pull mode, so a replacement needs
    no port and a test can SIGKILL one at an exact point. Leaving the block kills every Worker it started
    and stops its server.

    Args:
        tmp_path: A directory for the database, logs and caches (pytest's ``tmp_path``).
        flows: The session Flows the Client may call; the Worker module registers the same Flow types.
        worker_module: The module that :meth:`start_worker` runs; its ``__main__`` calls
            :func:`run_agent_worker`.
        worker_cwd: The Worker's working directory, usually the package directory so ``tests.x`` imports.
        worker_env: Extra environment variables for every Worker. ``DEX_AGENTS_TEST_STATE_DIR`` is set to
            ``tmp_path`` unless given here.
        server_args: Extra ``dex-devserver serve`` arguments, such as ``("--dispatch-wait", "2")``;
            ignored when ``DEX_SERVER_ADDRESS`` is set.
        max_concurrent_tasks: Task slots of each Worker: the largest tool batch plus headroom for the
            model Step, ``ResumeTurn``, approvals and RPCs.
    """

    def __init__(
        self,
        tmp_path: Path,
        flows: Sequence[AgentSessionFlow],
        worker_module: str,
        *,
        worker_cwd: Path | None = None,
        worker_env: Mapping[str, str] | None = None,
        server_args: Sequence[str] = (),
        max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
    ) -> None:
        self._tmp_path = Path(tmp_path)
        self._flows = tuple(flows)
        self._worker_module = worker_module
        self._worker_cwd = worker_cwd
        # Scripted models and tools in the Workers find scripts, gates and the log through this variable.
        self._worker_env = {STATE_DIR_ENV: str(self._tmp_path), **(worker_env or {})}
        self._max_concurrent_tasks = max_concurrent_tasks
        self._external_address = os.environ.get(SERVER_ADDRESS_ENV) or None
        self._server: DevServerProcess | None = None
        if self._external_address is None:
            self._server = DevServerProcess(
                self._tmp_path / "devserver.sqlite3",
                self._tmp_path / "devserver.log",
                ("--size-report", str(self._size_report_path), *server_args),
            )
        self._client: AsyncClient | None = None
        self._connection: ClientConnection | None = None
        self._workers: list[WorkerProcess] = []
        self._workers_started = 0
        self._run_token = secrets.token_hex(3)
        self._session_counter = 0

    async def __aenter__(self) -> AgentTestStack:
        self._tmp_path.mkdir(parents=True, exist_ok=True)
        try:
            if self._server is not None:
                await asyncio.to_thread(self._server.start)
            self._connection = ClientConnection.open(
                self.server_address, self._flows, self._tmp_path / "client-blob-cache", None
            )
            self._client = self._connection.client
        except BaseException:
            await self._shutdown()
            raise
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._shutdown()

    async def _shutdown(self) -> None:
        for worker in self._workers:
            worker.kill()
        self._workers.clear()
        if self._connection is not None:
            await self._connection.close()
            self._connection = None
            self._client = None
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)

    @property
    def server_address(self) -> str:
        """The ``host:port`` of the server the stack uses."""
        if self._external_address is not None:
            return self._external_address
        assert self._server is not None
        return self._server.address

    @property
    def _size_report_path(self) -> Path:
        return self._tmp_path / "devserver-sizes.json"

    def largest_sizes(self) -> dict[str, int] | None:
        """The largest message the development server sent and value it accepted so far, per kind.

        The kinds are ``worker_request`` (a Step or RPC request, blob references included),
        ``load_blobs_response`` (one ``LoadBlobs`` call), ``query_response``, ``rpc_output`` and
        ``stored_value``, each in bytes. `None` on an external server (``DEX_SERVER_ADDRESS``), which keeps
        no such report.
        """
        if self._server is None or not self._size_report_path.exists():
            return None
        report = json.loads(self._size_report_path.read_text(encoding="utf-8"))
        return {str(kind): int(size) for kind, size in report.items()}

    @property
    def uses_external_server(self) -> bool:
        """Whether ``DEX_SERVER_ADDRESS`` named the server (so it cannot be restarted)."""
        return self._external_address is not None

    @property
    def client(self) -> AsyncClient:
        """The stack's ``AsyncClient``, which starts Flows for pull Workers."""
        if self._client is None:
            raise RuntimeError("AgentTestStack is not entered")
        return self._client

    @property
    def state_dir(self) -> Path:
        """The stack's ``tmp_path``."""
        return self._tmp_path

    @property
    def scripts(self) -> ScriptStore:
        """Model scripts, gates and the invocation log in :attr:`state_dir`."""
        return ScriptStore(self._tmp_path)

    @property
    def invocations(self) -> InvocationLog:
        """The log of real model and tool calls that scripted models and tools write."""
        return self.scripts.invocations

    def gate(self, session_id: str, name: str) -> FileGate:
        """Return the gate a session's script names.

        Args:
            session_id: The session ID.
            name: The gate's name in the script.

        Returns:
            The gate.
        """
        return self.scripts.gate(session_id, name)

    def kill_workers(self) -> None:
        """SIGKILL every running Worker child."""
        for worker in self._workers:
            worker.kill()

    @property
    def killed_worker_pids(self) -> frozenset[int]:
        """The process IDs of the Worker children that were SIGKILLed while they ran."""
        return frozenset(worker.pid for worker in self._workers if worker.was_killed)

    @property
    def workers(self) -> tuple[WorkerProcess, ...]:
        """The Worker children started so far that are still running."""
        return tuple(worker for worker in self._workers if worker.is_running)

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        """Return a session client for one of the stack's Flows.

        Args:
            flow: One of the Flows passed to the stack (the SDK checks identity).

        Returns:
            An ``AgentSessionClient`` on the stack's Client.
        """
        return AgentSessionClient(self.client, flow)

    def new_session_id(self, prefix: str = "session") -> str:
        """Return a session ID unique to this stack, so reruns against one shared server never collide.

        Args:
            prefix: A readable prefix.

        Returns:
            ``"<prefix>-<random>-<n>"``.
        """
        self._session_counter += 1
        return f"{prefix}-{self._run_token}-{self._session_counter}"

    async def start_worker(
        self,
        env: Mapping[str, str] | None = None,
        *,
        worker_module: str | None = None,
        ready_timeout: float = WORKER_READY_TIMEOUT_SECONDS,
    ) -> WorkerProcess:
        """Start a Worker child and wait until all of its pull queues registered.

        Args:
            env: Environment variables for this Worker only, on top of ``worker_env``.
            worker_module: Run this module instead of the stack's, such as a Worker of another release
                that serves some of the stack's Flow types.
            ready_timeout: Seconds to wait until it registered (its imports may take long on a busy
                machine).

        Returns:
            The running Worker; ``kill()`` it to simulate a crash.
        """
        # Counted before the first await: Workers started at once must not share a log or a ready file.
        self._workers_started += 1
        number = self._workers_started
        worker = await spawn_worker(
            worker_module or self._worker_module,
            server_address=self.server_address,
            log_path=self._tmp_path / f"worker-{number}.log",
            cwd=self._worker_cwd,
            env={**self._worker_env, **(env or {})},
            max_concurrent_tasks=self._max_concurrent_tasks,
            ready_timeout=ready_timeout,
        )
        self._workers.append(worker)
        return worker

    async def restart_server(self) -> None:
        """SIGKILL the private devserver and start it again on the same SQLite file and port.

        Raises:
            RuntimeError: When the stack targets an external server (``DEX_SERVER_ADDRESS``).
        """
        if self._server is None:
            raise RuntimeError("restart_server needs the private devserver; DEX_SERVER_ADDRESS is set")
        await asyncio.to_thread(self._server.kill)
        await asyncio.to_thread(self._server.start)

    async def read_step_history(self, flow_id: str) -> list[StepHistoryEntry]:
        """Read a session's Step history from the stack's server.

        Args:
            flow_id: The session ID.

        Returns:
            The Step method events, oldest first.
        """
        return await read_step_history(self.server_address, flow_id)

    async def skip_durable_wait(self, session_id: str, tool_call_id: str | None = None) -> bool:
        """End a waiting ``durable_wait`` now, with ``SkipTimer`` on its `AwaitTimer` Step's Timer.

        The Timer is the authority of a durable wait, so the call then succeeds as if the wait had ended.

        Args:
            session_id: The session.
            tool_call_id: Only this call's wait; `None` skips the first one that waits.

        Returns:
            Whether a waiting Timer was found and skipped.
        """
        skipped = await skip_waiting_timer(
            self.client, self.server_address, session_id, "AwaitTimer", DURABLE_WAIT_TIMER_ID, tool_call_id
        )
        return skipped is not None
