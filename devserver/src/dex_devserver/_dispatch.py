"""Worker dispatch: push mode (a gRPC client to `WorkerService`) and pull mode (`PollWorkerTask` streams).

Both modes share one contract: `Dispatcher.invoke` sends one request for one attempt and returns the final
result message or a `WorkerFailure`. Progress frames (heartbeats, Stream writes) go to a callback as they
arrive; only they count as progress for the heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg
from google.protobuf import timestamp_pb2
from google.rpc import status_pb2

__all__ = [
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
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

_STARTUP_GRACE_SECONDS = 6.0

Kind = Literal["wait_for", "execute", "rpc"]
MethodRequest = pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest
MethodResult = pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse | pb.InvokeWorkerRPCResponse
ProgressFrame = pb.StepMethodHeartbeat | pb.StepStreamWrite


@dataclass(frozen=True)
class WorkerFailure:
    """One failed attempt.

    Attributes:
        detail: What went wrong.
        error_type: The Worker's error type, or a devserver category such as ``NO_WORKER_AVAILABLE``.
        worker_error: The Worker's own error response, when it sent one.
        retry_after_seconds: The delay the Worker asked for before the next attempt (0 = policy backoff).
    """

    detail: str
    error_type: str
    worker_error: pb.WorkerErrorResponse | None = None
    retry_after_seconds: int = 0


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


@dataclass
class _PullTask:
    task_id: str
    kind: Kind
    frames: asyncio.Queue[pb.PollWorkerTaskFrame | str] = field(
        default_factory=lambda: asyncio.Queue[pb.PollWorkerTaskFrame | str]()
    )
    has_output: bool = False


class PullStream:
    """One registered `PollWorkerTask` stream; it carries at most one task at a time."""

    def __init__(
        self,
        queue: str,
        app_worker_id: str,
        flow_types: frozenset[str],
        write: Callable[[pb.PollWorkerTaskResponse], object],
    ):
        self.queue = queue
        self.app_worker_id = app_worker_id
        self.flow_types = flow_types
        self._write = write
        self._write_lock = asyncio.Lock()
        self.task: _PullTask | None = None
        self.closed = False
        self.idle_since = time.monotonic()

    async def send(self, response: pb.PollWorkerTaskResponse) -> None:
        """Writes one frame to the Worker; writes are serialized."""
        async with self._write_lock:
            await cast("asyncio.Future[None]", self._write(response))


class Dispatcher:
    """Sends Worker tasks in push or pull mode.

    Args:
        dispatch_wait: Seconds a task may wait for a Worker before its attempt fails with
            ``NO_WORKER_AVAILABLE``.
    """

    def __init__(self, dispatch_wait: float) -> None:
        self.dispatch_wait = dispatch_wait
        self._started = time.monotonic()
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._streams: list[PullStream] = []
        self._idle_waiters: list[asyncio.Future[None]] = []

    # ----- pull streams (called by the WorkerTaskService servicer) -----

    def add_stream(self, stream: PullStream) -> None:
        """Registers a stream that has sent its registration frame."""
        self._streams.append(stream)
        self._notify_idle()

    def remove_stream(self, stream: PullStream, *, half_closed: bool) -> None:
        """Forgets a stream that ended.

        A task that got output from the stream fails its attempt. A task that got none is reassigned without
        using an attempt when the stream ended cleanly: the Worker was retiring the stream or draining, and
        it drops a task that reaches a stream it is closing. When the Worker process died, the stream ends
        with an error (the servicer lets a clean end settle first to tell the two apart), and the attempt
        counts as used, as an in-flight attempt must.

        Args:
            stream: The stream.
            half_closed: True when the stream ended without an error.
        """
        stream.closed = True
        if stream in self._streams:
            self._streams.remove(stream)
        task = stream.task
        stream.task = None
        if task is None:
            return
        task.frames.put_nowait("eof" if half_closed and not task.has_output else "lost")

    def on_frame(self, stream: PullStream, request: pb.PollWorkerTaskRequest) -> None:
        """Routes one frame a Worker sent on a stream."""
        kind = request.WhichOneof("frame")
        task = stream.task
        if kind == "task_frame":
            frame = request.task_frame
            if task is None or frame.task_id != task.task_id:
                return
            task.has_output = True
            task.frames.put_nowait(frame)
            output = frame.WhichOneof("output")
            is_final = (
                output in ("rpc", "worker_error")
                or (output == "wait_for" and frame.wait_for.WhichOneof("output") == "result")
                or (output == "execute" and frame.execute.WhichOneof("output") == "result")
            )
            if is_final:
                stream.task = None
                stream.idle_since = time.monotonic()
                self._notify_idle()
        elif kind == "reject":
            if task is not None and request.reject.task_id == task.task_id:
                stream.task = None
                stream.idle_since = time.monotonic()
                unknown = request.reject.reason in (
                    pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_STEP,
                    pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_RPC,
                )
                task.frames.put_nowait("unknown" if unknown else "reject")
                self._notify_idle()

    def has_pull_worker(self, flow_type: str) -> bool:
        """Tells whether any registered stream serves a Flow type."""
        return any(flow_type in stream.flow_types for stream in self._streams)

    def _notify_idle(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _idle_stream(self, flow_type: str, avoid: set[int]) -> PullStream | None:
        # The longest-idle stream first: the SDK retires a surplus stream right after it finishes a task,
        # and a task sent to a retiring stream is dropped.
        best: PullStream | None = None
        for stream in self._streams:
            if stream.task is not None or stream.closed or flow_type not in stream.flow_types:
                continue
            if id(stream) in avoid:
                continue
            if best is None or stream.idle_since < best.idle_since:
                best = stream
        return best

    # ----- invocation -----

    async def invoke(
        self,
        target: pb.WorkerTarget,
        flow_type: str,
        kind: Kind,
        request: MethodRequest,
        *,
        attempt_timeout: float,
        heartbeat_timeout: float | None,
        on_progress: Callable[[ProgressFrame], None],
    ) -> MethodResult | WorkerFailure:
        """Runs one attempt of a Worker method.

        Args:
            target: The Flow's worker target; pull mode when it is a pull target.
            flow_type: The Flow type, which names the pull queue.
            kind: Which method.
            request: The method request.
            attempt_timeout: Seconds one attempt may take.
            heartbeat_timeout: Seconds without progress frames before the attempt fails, or None.
            on_progress: Receives heartbeat and Stream-write frames.

        Returns:
            The Worker's result, or the failure of this attempt.
        """
        last_progress = [time.monotonic()]

        def progress(frame: ProgressFrame) -> None:
            last_progress[0] = time.monotonic()
            on_progress(frame)

        if target.is_pull_mode or not target.address:
            call = self._invoke_pull(flow_type, kind, request, attempt_timeout, progress)
        else:
            call = self._invoke_push(target.address, flow_type, kind, request, attempt_timeout, progress)
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
            remaining = last_progress[0] + heartbeat_timeout - time.monotonic()
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
        progress: Callable[[ProgressFrame], None],
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
        try:
            if kind == "rpc":
                return cast(pb.InvokeWorkerRPCResponse, await call)
            frames = cast("AsyncIterator[pb.InvokeWaitForMethodOutput | pb.InvokeExecuteMethodOutput]", call)
            async for frame in frames:
                which = frame.WhichOneof("output")
                if which == "result":
                    return frame.result
                progress(frame.heartbeat if which == "heartbeat" else frame.stream_write)
        except asyncio.CancelledError:
            # Cancelling the call is what the Worker sees as cancellation (CancelledError in async handlers).
            call.cancel()
            raise
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return WorkerFailure(
                    f"{kind} did not finish within its method timeout of {limit:g} s", "TIMEOUT"
                )
            return _worker_error_from_status(error.code(), error.details() or "", error.trailing_metadata())
        return WorkerFailure(f"Worker ended the {kind} call without a result", "WORKER_PROTOCOL_ERROR")

    async def _invoke_pull(
        self,
        flow_type: str,
        kind: Kind,
        request: MethodRequest,
        limit: float,
        progress: Callable[[ProgressFrame], None],
    ) -> MethodResult | WorkerFailure:
        loop = asyncio.get_running_loop()
        # Pull Workers reconnect with a backoff of up to 5 s after a devserver restart, so right after
        # startup a task may wait until they had the chance to come back.
        startup_grace = self._started + _STARTUP_GRACE_SECONDS - time.monotonic()
        dispatch_deadline = loop.time() + max(self.dispatch_wait, startup_grace)
        avoid: set[int] = set()
        unknown_to: set[str] = set()
        while True:
            stream = self._idle_stream(flow_type, avoid)
            if stream is None:
                remaining = dispatch_deadline - loop.time()
                if remaining <= 0:
                    if not self.has_pull_worker(flow_type):
                        where = "no pull Worker is registered for it"
                    elif unknown_to:
                        name = getattr(request, "rpc_name", "") or getattr(request, "step_type", "")
                        where = f"pull Workers rejected {name!r} as not registered"
                    else:
                        where = "every pull Worker declined it or stayed busy"
                    return _no_worker(kind, flow_type, self.dispatch_wait, where)
                waiter: asyncio.Future[None] = loop.create_future()
                self._idle_waiters.append(waiter)
                # After declines, pause briefly before offering the task to the same streams again.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter, min(remaining, 0.05 if avoid else 0.25))
                avoid.clear()
                continue
            task = _PullTask(uuid.uuid4().hex, kind)
            stream.task = task
            deadline = timestamp_pb2.Timestamp()
            deadline.FromNanoseconds(int((time.time() + limit) * 1e9))
            poll_task = pb.PollWorkerTask(task_id=task.task_id, deadline=deadline)
            getattr(poll_task, kind).CopyFrom(request)
            try:
                await stream.send(pb.PollWorkerTaskResponse(task=poll_task))
            except Exception:
                if stream.task is task:
                    stream.task = None
                avoid.add(id(stream))
                continue
            outcome = await self._pull_outcome(stream, task, kind, limit, progress)
            if outcome == "unknown":
                unknown_to.add(stream.queue)
            if outcome in ("reassign", "unknown"):
                avoid.add(id(stream))
                continue
            return outcome

    async def _pull_outcome(
        self,
        stream: PullStream,
        task: _PullTask,
        kind: Kind,
        limit: float,
        progress: Callable[[ProgressFrame], None],
    ) -> MethodResult | WorkerFailure | Literal["reassign", "unknown"]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    await self._cancel_pull(stream, task)
                    return WorkerFailure(
                        f"{kind} did not finish within its method timeout of {limit:g} s", "TIMEOUT"
                    )
                try:
                    frame = await asyncio.wait_for(task.frames.get(), remaining)
                except TimeoutError:
                    continue
                if frame in ("reject", "unknown"):
                    return "unknown" if frame == "unknown" else "reassign"
                if isinstance(frame, str):
                    if frame == "eof" and not task.has_output:
                        return "reassign"
                    return WorkerFailure(
                        f"the pull Worker disconnected during the {kind} task", "WORKER_DISCONNECTED"
                    )
                output = frame.WhichOneof("output")
                if output == "worker_error":
                    error = frame.worker_error
                    return WorkerFailure(
                        error.detail or "Worker task failed",
                        error.error_type,
                        error,
                        error.retry_after_seconds,
                    )
                if output == "rpc":
                    return frame.rpc
                method_output = frame.wait_for if output == "wait_for" else frame.execute
                which = method_output.WhichOneof("output")
                if which == "result":
                    return method_output.result
                progress(method_output.heartbeat if which == "heartbeat" else method_output.stream_write)
        except asyncio.CancelledError:
            await self._cancel_pull(stream, task)
            raise

    async def _cancel_pull(self, stream: PullStream, task: _PullTask) -> None:
        # The stream stays busy until the Worker's final (cancelled) frame arrives, so it is not reused early.
        if stream.task is task and not stream.closed:
            with contextlib.suppress(Exception):
                await stream.send(
                    pb.PollWorkerTaskResponse(cancel_task=pb.PollWorkerTaskCancelTask(task_id=task.task_id))
                )

    async def close(self) -> None:
        """Closes the push channels."""
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
