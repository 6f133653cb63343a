"""Pull mode: registered `PollWorkerTask` streams, the tasks waiting for one, and one task's round trip.

A stream carries one task at a time. A task that finds no idle stream waits in a FIFO queue, and a stream
that becomes idle is handed to the oldest task that can use it, so a wide fan-out wakes one task per idle
stream rather than all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, cast

from dex.dexpb import dex_pb2 as pb
from google.protobuf import timestamp_pb2

__all__ = ["Kind", "MethodRequest", "MethodResult", "ProgressFrame", "PullOutcome", "PullPool", "PullStream"]

Kind = Literal["wait_for", "execute", "rpc"]
MethodRequest = pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest
MethodResult = pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse | pb.InvokeWorkerRPCResponse
ProgressFrame = pb.StepMethodHeartbeat | pb.StepStreamWrite
# What ended a task on a stream: a result frame, a Worker error, or how the stream let it go.
PullOutcome = MethodResult | pb.WorkerErrorResponse | Literal["reassign", "unknown", "lost", "timeout"]


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
        # Handed to a waiting task that has not resumed yet: not idle, though it carries no task.
        self.reserved = False
        self.closed = False
        self.idle_since = time.monotonic()

    @property
    def is_idle(self) -> bool:
        """Tells whether the stream can take a task now."""
        return self.task is None and not self.reserved and not self.closed

    @property
    def has_unanswered_task(self) -> bool:
        """Tells whether the stream carries a task the Worker sent no frame for yet."""
        return self.task is not None and not self.task.has_output

    async def send(self, response: pb.PollWorkerTaskResponse) -> None:
        """Writes one frame to the Worker; writes are serialized."""
        async with self._write_lock:
            await cast("asyncio.Future[None]", self._write(response))


@dataclass(eq=False)
class _Waiter:
    flow_type: str
    avoid: set[int]
    stream: asyncio.Future[PullStream]


class PullPool:
    """The registered pull streams and the tasks waiting for one."""

    def __init__(self) -> None:
        self._streams: list[PullStream] = []
        self._waiters: deque[_Waiter] = deque()

    # ----- streams (called by the WorkerTaskService servicer)

    def add_stream(self, stream: PullStream) -> None:
        """Registers a stream that has sent its registration frame."""
        self._streams.append(stream)
        self._offer(stream)

    def remove_stream(self, stream: PullStream, *, half_closed: bool) -> None:
        """Forgets a stream that ended.

        A task that got output from the stream fails its attempt. A task that got none is reassigned without
        using an attempt when the stream ended cleanly: the Worker was retiring the stream or draining, and
        it drops a task that reaches a stream it is closing. When the Worker process died, the stream ends
        with an error (see the servicer), and the attempt counts as used, as an in-flight attempt must.

        Args:
            stream: The stream.
            half_closed: True when the Worker closed the stream cleanly.
        """
        stream.closed = True
        with contextlib.suppress(ValueError):
            self._streams.remove(stream)
        task, stream.task = stream.task, None
        if task is not None:
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
            if (
                output in ("rpc", "worker_error")
                or (output == "wait_for" and frame.wait_for.WhichOneof("output") == "result")
                or (output == "execute" and frame.execute.WhichOneof("output") == "result")
            ):
                self._release(stream)
        elif kind == "reject" and task is not None and request.reject.task_id == task.task_id:
            unknown = request.reject.reason in (
                pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_STEP,
                pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_RPC,
            )
            task.frames.put_nowait("unknown" if unknown else "reject")
            self._release(stream)

    def serves(self, flow_type: str) -> bool:
        """Tells whether any registered stream serves a Flow type."""
        return any(flow_type in stream.flow_types for stream in self._streams)

    def _release(self, stream: PullStream) -> None:
        stream.task = None
        stream.idle_since = time.monotonic()
        self._offer(stream)

    def _offer(self, stream: PullStream) -> None:
        """Hands an idle stream to the oldest waiting task that can use it."""
        if not stream.is_idle:
            return
        for waiter in self._waiters:
            if (
                waiter.stream.done()
                or waiter.flow_type not in stream.flow_types
                or id(stream) in waiter.avoid
            ):
                continue
            self._waiters.remove(waiter)
            stream.reserved = True
            waiter.stream.set_result(stream)
            return

    def _idle_stream(self, flow_type: str, avoid: set[int]) -> PullStream | None:
        # The longest-idle stream first: the SDK retires a surplus stream right after it finishes a task,
        # and a task sent to a retiring stream is dropped.
        best: PullStream | None = None
        for stream in self._streams:
            if not stream.is_idle or flow_type not in stream.flow_types or id(stream) in avoid:
                continue
            if best is None or stream.idle_since < best.idle_since:
                best = stream
        return best

    async def acquire(self, flow_type: str, avoid: set[int], wait_seconds: float) -> PullStream | None:
        """Returns an idle stream for a Flow type (reserved for the caller), or None after `wait_seconds`."""
        stream = self._idle_stream(flow_type, avoid)
        if stream is not None:
            stream.reserved = True
            return stream
        waiter = _Waiter(flow_type, avoid, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await asyncio.wait({waiter.stream}, timeout=wait_seconds)
        except asyncio.CancelledError:
            if waiter.stream.done():
                # Cancelled right after being handed a stream: pass it on rather than leak it.
                self.unreserve(waiter.stream.result())
            else:
                self._forget(waiter)
            raise
        if waiter.stream.done():
            return waiter.stream.result()
        self._forget(waiter)
        return None

    def _forget(self, waiter: _Waiter) -> None:
        waiter.stream.cancel()
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)

    def unreserve(self, stream: PullStream) -> None:
        """Gives back a reserved stream that carries no task."""
        stream.reserved = False
        self._offer(stream)

    # ----- one task

    async def run_task(
        self,
        stream: PullStream,
        kind: Kind,
        request: MethodRequest,
        limit: float,
        on_sent: Callable[[], None],
        progress: Callable[[ProgressFrame], str | None],
    ) -> tuple[PullOutcome, str | None]:
        """Sends a task on a reserved stream and waits for its end.

        Returns:
            How the task ended, and the problem a progress frame reported (the task is then cancelled).
        """
        stream.reserved = False
        if stream.closed:
            # It ended while reserved for this task, which never reached it.
            return "reassign", None
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
            return "reassign", None
        on_sent()
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + limit
        try:
            while True:
                remaining = ends_at - loop.time()
                if remaining <= 0:
                    await self._cancel(stream, task)
                    return "timeout", None
                try:
                    frame = await asyncio.wait_for(task.frames.get(), remaining)
                except TimeoutError:
                    continue
                if isinstance(frame, str):
                    if frame == "reject":
                        return "reassign", None
                    if frame == "unknown":
                        return "unknown", None
                    return ("reassign" if frame == "eof" else "lost"), None
                output = frame.WhichOneof("output")
                if output == "worker_error":
                    return frame.worker_error, None
                if output == "rpc":
                    return frame.rpc, None
                method_output = frame.wait_for if output == "wait_for" else frame.execute
                which = method_output.WhichOneof("output")
                if which == "result":
                    return method_output.result, None
                problem = progress(
                    method_output.heartbeat if which == "heartbeat" else method_output.stream_write
                )
                if problem is not None:
                    await self._cancel(stream, task)
                    return "lost", problem
        except asyncio.CancelledError:
            await self._cancel(stream, task)
            raise

    async def _cancel(self, stream: PullStream, task: _PullTask) -> None:
        # The stream stays busy until the Worker's final (cancelled) frame arrives, so it is not reused early.
        if stream.task is task and not stream.closed:
            with contextlib.suppress(Exception):
                await stream.send(
                    pb.PollWorkerTaskResponse(cancel_task=pb.PollWorkerTaskCancelTask(task_id=task.task_id))
                )
