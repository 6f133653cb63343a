"""`AgentWorker` and `serve_agent_worker`: a pull-mode Worker for session Flows, set up once.

A session's Steps are all `async`, and the Worker must hold enough task slots for the largest batch of
parallel tool calls of every turn it serves at once, plus slots that keep RPCs (snapshots, approvals)
answering while Steps run. The SDK's default is the CPU count, so each application used to size
``PullWorkerOptions.max_concurrent_tasks`` by hand; `AgentWorker` does it from two numbers an application
knows (turns at once, tool calls per model response), registers the Flows with `agent_codec_registry()`,
opens the blob cache, serves in pull mode, and drains on stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import tempfile
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType

from dex import (
    AsyncWorker,
    BlobCache,
    BlobCacheConfig,
    Credential,
    PullWorkerOptions,
    Registry,
    WorkerOptions,
    open_blob_cache,
)

from dex_agents._codecs import agent_codec_registry
from dex_agents._release import installed_version
from dex_agents._sdk_patches import apply_sdk_patches
from dex_agents.session import AgentSessionFlow

__all__ = [
    "DEFAULT_BLOB_CACHE_BYTES",
    "DEFAULT_MAX_CONCURRENT_TURNS",
    "DEFAULT_MAX_PARALLEL_TOOL_CALLS",
    "DEFAULT_RPC_TASK_SLOTS",
    "AgentWorker",
    "agent_worker_task_slots",
    "serve_agent_worker",
]

DEFAULT_MAX_CONCURRENT_TURNS = 4
"""Turns one Worker runs at the same time, by default."""
DEFAULT_MAX_PARALLEL_TOOL_CALLS = 8
"""The largest batch of tool calls one model response makes, by default."""
DEFAULT_RPC_TASK_SLOTS = 2
"""Task slots only RPCs may use, so snapshots and approvals answer while every other slot runs a Step."""
DEFAULT_BLOB_CACHE_BYTES = 64 * 1024 * 1024
"""The blob cache's size on disk."""

_logger = logging.getLogger(__name__)


def agent_worker_task_slots(
    *,
    max_concurrent_turns: int = DEFAULT_MAX_CONCURRENT_TURNS,
    max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    rpc_task_slots: int = DEFAULT_RPC_TASK_SLOTS,
) -> int:
    """The task slots a Worker needs: per turn, its tool calls plus one, then the RPC slots.

    While a turn's tool calls run (each its own Step, or its approval's wait), ``ResumeTurn`` waits beside
    them; `RunModel` runs alone. So a turn holds at most ``max_parallel_tool_calls + 1`` slots. Idle slots
    cost nothing: a slot is a permission to run a handler, not a thread.

    Args:
        max_concurrent_turns: Turns the Worker runs at the same time.
        max_parallel_tool_calls: The largest batch of tool calls one model response makes.
        rpc_task_slots: Slots kept for RPCs.

    Returns:
        ``max_concurrent_turns * (max_parallel_tool_calls + 1) + rpc_task_slots``.

    Raises:
        ValueError: If a number is below 1 (``rpc_task_slots`` below 0).
    """
    if max_concurrent_turns < 1 or max_parallel_tool_calls < 1 or rpc_task_slots < 0:
        raise ValueError(
            "max_concurrent_turns and max_parallel_tool_calls must be at least 1, and rpc_task_slots at "
            f"least 0; got {max_concurrent_turns}, {max_parallel_tool_calls} and {rpc_task_slots}"
        )
    return max_concurrent_turns * (max_parallel_tool_calls + 1) + rpc_task_slots


class AgentWorker:
    """Serves session Flows from one process: a pull-mode `AsyncWorker`, sized and set up for sessions.

    Lifecycle: `start` connects, registers every Flow type's pull queue and returns once the Worker takes
    tasks (serving goes on in the background); `stop` drains: it takes no new task, lets running Steps
    finish for up to ``drain_timeout``, cancels the rest (Dex retries them by their policies, or sends
    them to their failure routes), closes the connection and the blob cache. `wait_stopped` returns when
    the Worker stopped, whoever stopped it. As an async context manager it starts on entry and stops on
    exit. A Worker starts once; build a new one to serve again.

    ``async with AgentWorker([flow], server_address="localhost:8801"): await stop_requested.wait()``
    serves until the application decides; `serve_agent_worker` is the whole main of a Worker process.

    Starting applies `dex_agents`' patches of SDK internals (blob loads in pieces, so an empty blob cache
    can serve a session of any size; a cached version lookup; a spare pull stream; see
    ``dex_agents/_sdk_patches.py``) unless ``patch_sdk=False``.
    """

    def __init__(
        self,
        flows: Sequence[AgentSessionFlow],
        *,
        server_address: str = "localhost:8801",
        max_concurrent_turns: int = DEFAULT_MAX_CONCURRENT_TURNS,
        max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
        max_concurrent_tasks: int | None = None,
        rpc_task_slots: int = DEFAULT_RPC_TASK_SLOTS,
        drain_timeout: timedelta = timedelta(seconds=30),
        blob_cache_directory: str | Path | None = None,
        blob_cache_bytes: int = DEFAULT_BLOB_CACHE_BYTES,
        credential: Credential | None = None,
        app_worker_id: str = "",
        patch_sdk: bool = True,
    ) -> None:
        """Create a Worker; nothing connects until `start`.

        Args:
            flows: The session Flows to serve, built with their runners (the same definitions the
                application's Client registers).
            server_address: The Dex server, ``host:port``.
            max_concurrent_turns: Turns this Worker runs at the same time (see `agent_worker_task_slots`).
            max_parallel_tool_calls: The largest batch of tool calls one model response makes.
            max_concurrent_tasks: The task slots, overriding the two numbers above.
            rpc_task_slots: Slots kept for RPCs; it must be below the task slots.
            drain_timeout: How long `stop` lets running Steps finish before it cancels them.
            blob_cache_directory: Where large values are cached on disk; ``None`` for a temporary
                directory removed on stop.
            blob_cache_bytes: The blob cache's size.
            credential: The bearer credential for a server that requires one.
            app_worker_id: The Worker's identity for sticky routing; empty generates one.
            patch_sdk: Apply the patches of SDK internals (``dex_agents/_sdk_patches.py``). Without them a
                Worker whose blob cache lacks more than 4 MiB of a Step's loads cannot serve that Step.

        Raises:
            ValueError: If a Flow is not an `AgentSessionFlow` with a runner, two share a Flow type, or a
                size is invalid.
        """
        self._flows = tuple(flows)
        if not self._flows:
            raise ValueError("AgentWorker needs at least one AgentSessionFlow to serve")
        for flow in self._flows:
            if not isinstance(flow, AgentSessionFlow):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ValueError(f"AgentWorker serves AgentSessionFlow instances, got {type(flow).__name__}")
            if flow.is_client_only:
                raise ValueError(
                    f"the Flow {flow.flow_type!r} was built with AgentSessionFlow.for_client, which has no "
                    "runner and cannot run Steps; a Worker registers the Flow built with its runner"
                )
        slots = (
            max_concurrent_tasks
            if max_concurrent_tasks is not None
            else agent_worker_task_slots(
                max_concurrent_turns=max_concurrent_turns,
                max_parallel_tool_calls=max_parallel_tool_calls,
                rpc_task_slots=rpc_task_slots,
            )
        )
        if slots < 1 or not 0 <= rpc_task_slots < slots:
            raise ValueError(
                f"a Worker needs at least one task slot and fewer RPC slots ({rpc_task_slots}) than task "
                f"slots ({slots})"
            )
        self._registry = Registry(
            list(self._flows), codec_registry=agent_codec_registry(), allow_async_handlers=True
        )
        self._pull_options = PullWorkerOptions(
            max_concurrent_tasks=slots,
            reserved_rpc_tasks=rpc_task_slots,
            stop_drain_timeout=drain_timeout,
            app_worker_id=app_worker_id,
        )
        self._server_address = server_address
        self._credential = credential
        self._blob_cache_directory = None if blob_cache_directory is None else str(blob_cache_directory)
        self._blob_cache_bytes = blob_cache_bytes
        self._patch_sdk = patch_sdk
        self._worker: AsyncWorker | None = None
        self._cache: BlobCache | None = None
        self._temporary_cache: tempfile.TemporaryDirectory[str] | None = None
        self._serving: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._stopping: asyncio.Task[None] | None = None

    @property
    def flows(self) -> tuple[AgentSessionFlow, ...]:
        """The Flows this Worker serves."""
        return self._flows

    @property
    def server_address(self) -> str:
        """The Dex server this Worker serves."""
        return self._server_address

    @property
    def max_concurrent_tasks(self) -> int:
        """The Worker's task slots."""
        return self._pull_options.max_concurrent_tasks

    @property
    def is_serving(self) -> bool:
        """Whether the Worker started and has not stopped."""
        return self._serving is not None and not self._serving.done() and self._stopping is None

    @property
    def sdk_worker(self) -> AsyncWorker:
        """The SDK's `AsyncWorker` underneath, for its metrics (``pull_reserved_rpc_declines``).

        Raises:
            RuntimeError: Before `start`.
        """
        if self._worker is None:
            raise RuntimeError("the AgentWorker has not started")
        return self._worker

    async def start(self, *, ready_timeout: timedelta = timedelta(seconds=60)) -> None:
        """Connect, register every pull queue, and return once the Worker takes tasks.

        Args:
            ready_timeout: How long to wait for every queue to register.

        Raises:
            RuntimeError: If the Worker started already, or the server refused it (the SDK's error is the
                cause).
            TimeoutError: If the queues did not register in time; the Worker is stopped again.
        """
        if self._worker is not None:
            raise RuntimeError("an AgentWorker starts once; build a new one to serve again")
        if self._patch_sdk:
            apply_sdk_patches()
        directory = self._blob_cache_directory
        if directory is None:
            self._temporary_cache = tempfile.TemporaryDirectory(prefix="dex-agents-worker-cache-")
            directory = self._temporary_cache.name
        self._cache = open_blob_cache(BlobCacheConfig(directory, self._blob_cache_bytes))
        self._worker = AsyncWorker(
            self._registry,
            self._cache,
            WorkerOptions(
                server_address=self._server_address, pull=self._pull_options, credential=self._credential
            ),
        )
        self._serving = asyncio.create_task(self._serve(self._worker))
        registered = asyncio.create_task(self._worker.wait_pull_registered())
        done, _ = await asyncio.wait(
            {self._serving, registered},
            timeout=ready_timeout.total_seconds(),
            return_when=asyncio.FIRST_COMPLETED,
        )
        if registered in done:
            await registered  # raises a permanent registration failure
            return
        registered.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await registered
        if self._serving in done:
            await self.stop()
            await self._serving  # raises the start failure
            raise RuntimeError("the Worker stopped before its pull queues registered")
        await self.stop()
        raise TimeoutError(
            f"the Worker's pull queues did not register with {self._server_address} within "
            f"{ready_timeout.total_seconds():g} s; is the Dex server running there?"
        )

    async def _serve(self, worker: AsyncWorker) -> None:
        try:
            await worker.start()
        finally:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        """Return when the Worker has stopped, by `stop` or because serving failed.

        Raises:
            RuntimeError: Before `start`.
            Exception: What made serving fail, such as a permanent pull registration error.
        """
        if self._serving is None:
            raise RuntimeError("the AgentWorker has not started")
        await self._stopped.wait()
        if self._stopping is not None:
            await asyncio.shield(self._stopping)
        if self._serving.done() and not self._serving.cancelled():
            self._serving.result()

    async def stop(self) -> None:
        """Drain and stop: take no new task, let running Steps finish up to ``drain_timeout``, then close.

        Safe to call more than once and before `start`; concurrent calls wait for the same stop.
        """
        if self._stopping is None:
            self._stopping = asyncio.create_task(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        try:
            if self._worker is not None:
                await self._worker.close()
            if self._serving is not None:
                await asyncio.gather(self._serving, return_exceptions=True)
        finally:
            if self._cache is not None:
                self._cache.close()
            if self._temporary_cache is not None:
                self._temporary_cache.cleanup()
            self._stopped.set()

    async def __aenter__(self) -> AgentWorker:
        await self.start()
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


def serve_agent_worker(
    flows: Sequence[AgentSessionFlow],
    *,
    server_address: str = "localhost:8801",
    on_ready: Callable[[AgentWorker], object] | None = None,
    max_concurrent_turns: int = DEFAULT_MAX_CONCURRENT_TURNS,
    max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    max_concurrent_tasks: int | None = None,
    drain_timeout: timedelta = timedelta(seconds=30),
    blob_cache_directory: str | Path | None = None,
    credential: Credential | None = None,
) -> None:
    """Run a Worker process's main: serve ``flows`` until SIGTERM or SIGINT, then drain and return.

    It blocks (it runs its own event loop with `asyncio.run`), so call it from ``if __name__ ==
    "__main__":``. The arguments are `AgentWorker`'s. Once the Worker serves, it freezes the objects the
    process holds so far out of the garbage collector's reach (`gc.freeze`), as they live as long as it.

    Args:
        flows: The session Flows to serve.
        server_address: The Dex server, ``host:port``.
        on_ready: Called on the event loop once every pull queue registered, with the running Worker.
        max_concurrent_turns: Turns this Worker runs at the same time.
        max_parallel_tool_calls: The largest batch of tool calls one model response makes.
        max_concurrent_tasks: The task slots, overriding the two numbers above.
        drain_timeout: How long running Steps may finish after the signal.
        blob_cache_directory: Where large values are cached; ``None`` for a temporary directory.
        credential: The bearer credential for a server that requires one.
    """
    worker = AgentWorker(
        flows,
        server_address=server_address,
        max_concurrent_turns=max_concurrent_turns,
        max_parallel_tool_calls=max_parallel_tool_calls,
        max_concurrent_tasks=max_concurrent_tasks,
        drain_timeout=drain_timeout,
        blob_cache_directory=blob_cache_directory,
        credential=credential,
    )
    asyncio.run(_serve_until_signalled(worker, on_ready))


async def _serve_until_signalled(
    worker: AgentWorker, on_ready: Callable[[AgentWorker], object] | None
) -> None:
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stop_requested.set)
    async with worker:
        _logger.info(
            "dex-agents %s Worker serving %s on %s with %d task slots",
            installed_version(),
            ", ".join(flow.flow_type for flow in worker.flows),
            worker.server_address,
            worker.max_concurrent_tasks,
        )
        # Everything alive now (modules, the Flows, the framework's schemas) lives as long as the process:
        # frozen, the collector stops walking it on every full collection of the turns' garbage. No
        # collection first: it takes about 66 ms in a Pydantic AI Worker, and the garbage it would free
        # at this point is a few hundred objects, which stay.
        gc.freeze()
        if on_ready is not None:
            on_ready(worker)
        signalled = asyncio.create_task(stop_requested.wait())
        stopped = asyncio.create_task(worker.wait_stopped())
        await asyncio.wait({signalled, stopped}, return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        if stopped.done():
            await stopped  # raises what made serving fail
        else:
            stopped.cancel()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signal_number)
