"""Worker dispatch: push mode (a gRPC client to `WorkerService`) and pull mode (`PollWorkerTask` streams).

Both modes share one contract: `Dispatcher.invoke` sends one request for one attempt and returns the final
result message or a `WorkerFailure`. Progress frames (heartbeats, Stream writes) go to a callback as they
arrive; only they count as progress for the heartbeat timeout, whose clock starts when the task reaches a
Worker, not while it waits for one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg
from google.rpc import status_pb2

from ._pull import Kind, MethodRequest, MethodResult, ProgressFrame, PullPool, PullStream

__all__ = [
    "GRPC_OPTIONS",
    "INVALID_WORKER_RESPONSE",
    "NO_WORKER_AVAILABLE",
    "Dispatcher",
    "Kind",
    "MethodRequest",
    "MethodResult",
    "ProgressFrame",
    "PullStream",
    "WorkerFailure",
]

NO_WORKER_AVAILABLE = "NO_WORKER_AVAILABLE"
INVALID_WORKER_RESPONSE = "dex_devserver.InvalidWorkerResponse"
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

_STARTUP_GRACE_SECONDS = 6.0


@dataclass(frozen=True)
class WorkerFailure:
    """One failed attempt.

    Attributes:
        detail: What went wrong.
        error_type: The Worker's error type, or a devserver category such as ``NO_WORKER_AVAILABLE``.
        worker_error: The Worker's own error response, when it sent one.
        retry_after_seconds: The delay the Worker asked for before the next attempt (0 = policy backoff).
        is_final: True when another attempt cannot succeed (the retry policy is skipped).
    """

    detail: str
    error_type: str
    worker_error: pb.WorkerErrorResponse | None = None
    retry_after_seconds: int = 0
    is_final: bool = False


class _Clock:
    """When an attempt reached a Worker and when it last showed progress (None while it waits for one)."""

    def __init__(self) -> None:
        self.last_progress: float | None = None

    def sent(self) -> None:
        self.last_progress = time.monotonic()

    def waiting(self) -> None:
        self.last_progress = None


def _worker_error_from_status(code: grpc.StatusCode, message: str, trailers: object) -> WorkerFailure:
    worker_error: pb.WorkerErrorResponse | None = None
    for key, raw in cast("tuple[tuple[str, str | bytes], ...]", trailers or ()):
        if key != "grpc-status-details-bin" or not isinstance(raw, bytes):
            continue
        status = status_pb2.Status.FromString(raw)
        for packed in status.details:
            candidate = pb.WorkerErrorResponse()
            if packed.Is(candidate.DESCRIPTOR):  # pyright: ignore[reportUnknownMemberType]
                packed.Unpack(candidate)  # pyright: ignore[reportUnknownMemberType]
                worker_error = candidate
    if worker_error is not None:
        return WorkerFailure(
            worker_error.detail or message,
            worker_error.error_type,
            worker_error,
            worker_error.retry_after_seconds,
        )
    return WorkerFailure(f"Worker call failed with {code.name}: {message}", f"grpc.{code.name}")


def _no_worker(kind: Kind, flow_type: str, wait: float, where: str) -> WorkerFailure:
    return WorkerFailure(
        f"no Worker received the {kind} task of Flow type {flow_type!r}"
        f" within the dispatch wait of {wait:g} s ({where})",
        NO_WORKER_AVAILABLE,
    )


class Dispatcher:
    """Sends Worker tasks in push or pull mode.

    Args:
        dispatch_wait: Seconds a task may wait for a Worker before its attempt fails with
            ``NO_WORKER_AVAILABLE``.
    """

    def __init__(self, dispatch_wait: float) -> None:
        self.dispatch_wait = dispatch_wait
        self.pull = PullPool()
        self._started = time.monotonic()
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def invoke(
        self,
        target: pb.WorkerTarget,
        flow_type: str,
        kind: Kind,
        request: MethodRequest,
        *,
        attempt_timeout: float,
        heartbeat_timeout: float | None,
        on_sent: Callable[[], None],
        on_progress: Callable[[ProgressFrame], str | None],
    ) -> MethodResult | WorkerFailure:
        """Runs one attempt of a Worker method.

        Args:
            target: The Flow's worker target; pull mode when it is a pull target.
            flow_type: The Flow type, which names the pull queue.
            kind: Which method.
            request: The method request.
            attempt_timeout: Seconds one attempt may take.
            heartbeat_timeout: Seconds without progress frames (once the task reached a Worker) before the
                attempt fails, or None.
            on_sent: Called when the task reaches a Worker (it may run from then on).
            on_progress: Receives heartbeat and Stream-write frames; a problem it returns fails the attempt
                (the call is cancelled).

        Returns:
            The Worker's result, or the failure of this attempt.
        """
        clock = _Clock()

        def sent() -> None:
            clock.sent()
            on_sent()

        def progress(frame: ProgressFrame) -> str | None:
            clock.sent()
            return on_progress(frame)

        if target.is_pull_mode or not target.address:
            call = self._invoke_pull(flow_type, kind, request, attempt_timeout, clock, sent, progress)
        else:
            call = self._invoke_push(
                target.address, flow_type, kind, request, attempt_timeout, sent, progress
            )
        if heartbeat_timeout is None or kind == "rpc":
            return await call
        # A timer rather than a watchdog task: one less task and wait per attempt on the hot path.
        current = asyncio.current_task()
        assert current is not None
        loop = asyncio.get_running_loop()
        expired = False
        handle: asyncio.TimerHandle | None = None

        def check() -> None:
            nonlocal expired, handle
            last = clock.last_progress
            remaining = heartbeat_timeout if last is None else last + heartbeat_timeout - time.monotonic()
            if remaining > 0:
                handle = loop.call_later(remaining, check)
                return
            expired = True
            current.cancel()

        handle = loop.call_later(heartbeat_timeout, check)
        try:
            return await call
        except asyncio.CancelledError:
            if expired and current.uncancel() == 0:
                return WorkerFailure(
                    f"no heartbeat or Stream write within the heartbeat timeout of {heartbeat_timeout:g} s",
                    "HEARTBEAT_TIMEOUT",
                )
            raise
        finally:
            handle.cancel()

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
            self._channels[address] = channel
        return channel

    async def _invoke_push(
        self,
        address: str,
        flow_type: str,
        kind: Kind,
        request: MethodRequest,
        limit: float,
        sent: Callable[[], None],
        progress: Callable[[ProgressFrame], str | None],
    ) -> MethodResult | WorkerFailure:
        channel = self._channel(address)
        try:
            await asyncio.wait_for(channel.channel_ready(), self.dispatch_wait)
        except TimeoutError:
            return _no_worker(kind, flow_type, self.dispatch_wait, f"push target {address} is not reachable")
        # The generated stub is untyped; each call's result type is pinned by a cast.
        stub: Any = pbg.WorkerServiceStub(channel)
        if kind == "rpc":
            call: Any = stub.InvokeWorkerRPC(cast(pb.InvokeWorkerRPCRequest, request), timeout=limit)
        elif kind == "wait_for":
            call = stub.InvokeWaitForMethod(cast(pb.InvokeWaitForMethodRequest, request), timeout=limit)
        else:
            call = stub.InvokeExecuteMethod(cast(pb.InvokeExecuteMethodRequest, request), timeout=limit)
        sent()
        try:
            if kind == "rpc":
                return cast(pb.InvokeWorkerRPCResponse, await call)
            frames = cast("AsyncIterator[pb.InvokeWaitForMethodOutput | pb.InvokeExecuteMethodOutput]", call)
            async for frame in frames:
                which = frame.WhichOneof("output")
                if which == "result":
                    return frame.result
                problem = progress(frame.heartbeat if which == "heartbeat" else frame.stream_write)
                if problem is not None:
                    call.cancel()
                    return WorkerFailure(problem, INVALID_WORKER_RESPONSE)
        except asyncio.CancelledError:
            # Cancelling the call is what the Worker sees as cancellation (CancelledError in async handlers).
            call.cancel()
            raise
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return _timed_out(kind, limit)
            return _worker_error_from_status(error.code(), error.details() or "", error.trailing_metadata())
        return WorkerFailure(f"Worker ended the {kind} call without a result", "WORKER_PROTOCOL_ERROR")

    async def _invoke_pull(
        self,
        flow_type: str,
        kind: Kind,
        request: MethodRequest,
        limit: float,
        clock: _Clock,
        sent: Callable[[], None],
        progress: Callable[[ProgressFrame], str | None],
    ) -> MethodResult | WorkerFailure:
        loop = asyncio.get_running_loop()
        # Pull Workers reconnect with a backoff of up to 5 s after a devserver restart, so right after
        # startup a task may wait until they had the chance to come back.
        startup_grace = self._started + _STARTUP_GRACE_SECONDS - time.monotonic()
        dispatch_deadline = loop.time() + max(self.dispatch_wait, startup_grace)
        avoid: set[int] = set()
        unknown_to: set[str] = set()
        while True:
            remaining = dispatch_deadline - loop.time()
            # After declines, pause briefly before offering the task to the same streams again.
            wait = min(remaining, 0.05) if avoid else remaining
            stream = await self.pull.acquire(flow_type, avoid, max(wait, 0.0)) if remaining > 0 else None
            if stream is None:
                if avoid and remaining > 0:
                    avoid.clear()
                    continue
                return _no_worker(
                    kind, flow_type, self.dispatch_wait, self._why_unsent(flow_type, request, unknown_to)
                )
            outcome, problem = await self.pull.run_task(stream, kind, request, limit, sent, progress)
            if problem is not None:
                return WorkerFailure(problem, INVALID_WORKER_RESPONSE)
            if outcome in ("reassign", "unknown"):
                if outcome == "unknown":
                    unknown_to.add(stream.queue)
                avoid.add(id(stream))
                clock.waiting()
                continue
            if outcome == "timeout":
                return _timed_out(kind, limit)
            if outcome == "lost":
                return WorkerFailure(
                    f"the pull Worker disconnected during the {kind} task", "WORKER_DISCONNECTED"
                )
            if isinstance(outcome, pb.WorkerErrorResponse):
                return WorkerFailure(
                    outcome.detail or "Worker task failed",
                    outcome.error_type,
                    outcome,
                    outcome.retry_after_seconds,
                )
            return outcome

    def _why_unsent(self, flow_type: str, request: MethodRequest, unknown_to: set[str]) -> str:
        if not self.pull.serves(flow_type):
            return "no pull Worker is registered for it"
        if unknown_to:
            name = getattr(request, "rpc_name", "") or getattr(request, "step_type", "")
            return f"pull Workers rejected {name!r} as not registered"
        return "every pull Worker declined it or stayed busy"

    async def close(self) -> None:
        """Closes the push channels."""
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()


def _timed_out(kind: Kind, limit: float) -> WorkerFailure:
    return WorkerFailure(f"{kind} did not finish within its method timeout of {limit:g} s", "TIMEOUT")
