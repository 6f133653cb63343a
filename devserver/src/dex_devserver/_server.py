"""The gRPC servicers (FlowService and WorkerTaskService) and the `DevServer` that hosts them on one port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg
from google.protobuf import empty_pb2

from . import _errors as errors
from . import _flows as flows
from . import _queries as queries
from . import _requests as requests
from . import _rpc as rpc
from . import _writes as writes
from ._blobs import DEFAULT_BLOB_CACHE_BYTES, DEFAULT_BLOB_THRESHOLD, DEFAULT_MAX_VALUE_BYTES, Blobs
from ._dispatch import GRPC_OPTIONS, Dispatcher, PullStream
from ._engine import Engine, EngineOptions
from ._history import event_json
from ._journal import CommitFailedError
from ._restore import restore
from ._retention import keep_expiring
from ._sizes import SizeRecord
from ._store import Store
from ._streams import Streams

__all__ = ["DevServer", "ServerOptions", "serve_forever"]

_LOG = logging.getLogger("dex_devserver")
SERVER_VERSION = "dex-devserver 0.1.0"
# How long the clean-close probe of a pull stream may take before the stream counts as broken.
_PROBE_SECONDS = 5.0

ResponseT = TypeVar("ResponseT")
Context = grpc.aio.ServicerContext[Any, Any]


async def _answer(context: Context, call: Callable[[], Awaitable[ResponseT]]) -> ResponseT:
    try:
        try:
            return await call()
        except CommitFailedError as failed:
            raise errors.unavailable(str(failed)) from failed
    except errors.ServiceError as error:
        status = error.to_status()
        await context.abort(
            error.code,
            error.detail,
            trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),),
        )
        raise AssertionError("abort returned") from error


async def _now(value: ResponseT) -> ResponseT:
    return value


@dataclass
class ServerOptions:
    """How to run a devserver.

    Attributes:
        host: The interface to bind.
        port: The port to bind; 0 picks a free one.
        db_path: The SQLite file, or None for memory.
        default_worker_target: Push address for Flows started without a worker target; None means pull.
        dispatch_wait: Seconds a task waits for a Worker before its attempt fails with NO_WORKER_AVAILABLE.
        max_value_bytes: The largest value accepted.
        blob_threshold: Values above this many bytes are offloaded to blobs.
        blob_cache_bytes: How many bytes of blob content to keep in memory.
        retain_closed: Seconds a closed run's data is kept before it is deleted; None keeps it forever.
        stop_grace: Seconds a stopping devserver waits for attempts that reached a Worker to finish.
        size_report: A JSON file that keeps the largest message sent and value accepted, per kind
            (see ``_sizes.py``); None keeps them in memory only.
    """

    host: str = "127.0.0.1"
    port: int = 8801
    db_path: str | None = None
    default_worker_target: str | None = None
    dispatch_wait: float = 10.0
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    blob_threshold: int = DEFAULT_BLOB_THRESHOLD
    blob_cache_bytes: int = DEFAULT_BLOB_CACHE_BYTES
    retain_closed: float | None = None
    stop_grace: float = 5.0
    size_report: str | None = None


class _FlowService(pbg.FlowServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def GetServerInfo(self, request: empty_pb2.Empty, context: Context) -> pb.ServerInfo:
        return pb.ServerInfo(
            server_version=SERVER_VERSION, minimum_supported_protocol_version=1, current_protocol_version=3
        )

    async def HealthCheck(self, request: empty_pb2.Empty, context: Context) -> pb.HealthInfo:
        return pb.HealthInfo(condition="OK", hostname=socket.gethostname(), duration=0)

    async def SyncAttributeIndexes(
        self, request: pb.SyncAttributeIndexRequest, context: Context
    ) -> pb.SyncAttributeIndexResponse:
        return pb.SyncAttributeIndexResponse()

    async def StartFlow(self, request: pb.StartFlowRequest, context: Context) -> pb.StartFlowResponse:
        async def call() -> pb.StartFlowResponse:
            run_id = flows.start_flow(self.engine, request)
            await self.engine.journal.durable()
            return pb.StartFlowResponse(run_id=run_id)

        return await _answer(context, call)

    async def InvokeRPC(self, request: pb.InvokeRPCRequest, context: Context) -> pb.InvokeRPCResponse:
        async def call() -> pb.InvokeRPCResponse:
            return pb.InvokeRPCResponse(output=await rpc.invoke_rpc(self.engine, request))

        return await _answer(context, call)

    async def WaitForFlow(self, request: pb.WaitForFlowRequest, context: Context) -> pb.FlowResult:
        return await _answer(context, lambda: queries.wait_for_flow(self.engine, request))

    async def StopFlow(self, request: pb.StopFlowRequest, context: Context) -> empty_pb2.Empty:
        async def call() -> empty_pb2.Empty:
            flows.stop_flow(self.engine, request)
            await self.engine.journal.durable()
            return empty_pb2.Empty()

        return await _answer(context, call)

    async def GetFlowSummary(
        self, request: pb.GetFlowSummaryRequest, context: Context
    ) -> pb.GetFlowSummaryResponse:
        return await _answer(context, lambda: queries.summary(self.engine, request.flow_id, request.run_id))

    async def PublishToChannel(
        self, request: pb.PublishToChannelRequest, context: Context
    ) -> empty_pb2.Empty:
        async def call() -> empty_pb2.Empty:
            writes.publish(self.engine, request)
            await self.engine.journal.durable()
            return empty_pb2.Empty()

        return await _answer(context, call)

    async def WriteStream(self, request: pb.WriteStreamRequest, context: Context) -> empty_pb2.Empty:
        async def call() -> empty_pb2.Empty:
            writes.write_stream(self.engine, request)
            await self.engine.journal.durable()
            return empty_pb2.Empty()

        return await _answer(context, call)

    async def ReadStream(self, request: pb.ReadStreamRequest, context: Context) -> pb.ReadStreamResponse:
        async def call() -> pb.ReadStreamResponse:
            after = requests.parse_token(request.resume_token, "resume_token") if request.resume_token else 0
            wait = 60.0 if request.wait_time_seconds <= 0 else min(float(request.wait_time_seconds), 60.0)
            key = (request.flow_type, request.flow_id, request.stream_name)
            message = await self.engine.streams.wait_for_message(key, after, wait)
            if message is None:
                raise errors.long_poll_timeout(
                    f"no message after the resume token in Stream {request.stream_name!r}"
                )
            return pb.ReadStreamResponse(message=message.to_proto())

        return await _answer(context, call)

    async def ListStreamMessages(
        self, request: pb.ListStreamMessagesRequest, context: Context
    ) -> pb.ListStreamMessagesResponse:
        def call() -> pb.ListStreamMessagesResponse:
            before = (
                requests.parse_token(request.before_page_token, "before_page_token")
                if request.before_page_token
                else None
            )
            key = (request.flow_type, request.flow_id, request.stream_name)
            page, token = self.engine.streams.page(key, request.page_size, before)
            return pb.ListStreamMessagesResponse(messages=[m.to_proto() for m in page], next_page_token=token)

        return await _answer(context, lambda: _now(call()))

    async def SkipTimer(self, request: pb.SkipTimerRequest, context: Context) -> empty_pb2.Empty:
        async def call() -> empty_pb2.Empty:
            flows.skip_timer(self.engine, request)
            await self.engine.journal.durable()
            return empty_pb2.Empty()

        return await _answer(context, call)

    async def LoadBlobs(self, request: pb.LoadBlobsRequest, context: Context) -> pb.LoadBlobsResponse:
        return await _answer(context, lambda: queries.load_blobs(self.engine, request))

    async def GetHistoryEvents(
        self, request: pb.GetHistoryEventsRequest, context: Context
    ) -> pb.GetHistoryEventsResponse:
        return await _answer(context, lambda: queries.history_page(self.engine, request))

    async def GetFlowState(
        self, request: pb.GetFlowStateRequest, context: Context
    ) -> pb.GetFlowStateResponse:
        return await _answer(
            context, lambda: queries.flow_state(self.engine, request.flow_id, request.run_id)
        )

    async def WaitForStepCompletion(
        self, request: pb.WaitForStepCompletionRequest, context: Context
    ) -> pb.WaitForStepCompletionResponse:
        async def call() -> pb.WaitForStepCompletionResponse:
            await queries.wait_for_step_completion(self.engine, request)
            return pb.WaitForStepCompletionResponse()

        return await _answer(context, call)

    async def WaitForAttribute(
        self, request: pb.WaitForAttributeRequest, context: Context
    ) -> pb.WaitForAttributeResponse:
        async def call() -> pb.WaitForAttributeResponse:
            return pb.WaitForAttributeResponse(
                matched_value=await queries.wait_for_attribute(self.engine, request)
            )

        return await _answer(context, call)

    async def GetAttributes(
        self, request: pb.GetAttributesRequest, context: Context
    ) -> pb.GetAttributesResponse:
        return await _answer(context, lambda: queries.attributes(self.engine, request))

    async def _unimplemented(self, feature: str, context: Context) -> Any:
        async def call() -> Any:
            raise errors.unimplemented(feature)

        return await _answer(context, call)

    async def SearchFlows(self, request: pb.SearchFlowsRequest, context: Context) -> pb.SearchFlowsResponse:
        return cast(pb.SearchFlowsResponse, await self._unimplemented("SearchFlows", context))

    async def ResetFlow(self, request: pb.ResetFlowRequest, context: Context) -> pb.ResetFlowResponse:
        return cast(pb.ResetFlowResponse, await self._unimplemented("ResetFlow (time travel)", context))

    async def UpdateFlowConfig(
        self, request: pb.UpdateFlowConfigRequest, context: Context
    ) -> empty_pb2.Empty:
        async def call() -> empty_pb2.Empty:
            flows.update_flow_config(self.engine, request)
            await self.engine.journal.durable()
            return empty_pb2.Empty()

        return await _answer(context, call)

    async def TriggerContinueAsNew(
        self, request: pb.TriggerContinueAsNewRequest, context: Context
    ) -> empty_pb2.Empty:
        return cast(empty_pb2.Empty, await self._unimplemented("TriggerContinueAsNew", context))

    async def SetAttributes(self, request: pb.SetAttributesRequest, context: Context) -> empty_pb2.Empty:
        async def call() -> empty_pb2.Empty:
            writes.set_attributes(self.engine, request)
            await self.engine.journal.durable()
            return empty_pb2.Empty()

        return await _answer(context, call)

    async def GetChannelMessages(
        self, request: pb.GetChannelMessagesRequest, context: Context
    ) -> pb.GetChannelMessagesResponse:
        return await _answer(context, lambda: queries.channel_messages(self.engine, request))

    async def DeleteChannelMessage(
        self, request: pb.DeleteChannelMessageRequest, context: Context
    ) -> empty_pb2.Empty:
        async def call() -> empty_pb2.Empty:
            writes.delete_channel_message(self.engine, request)
            await self.engine.journal.durable()
            return empty_pb2.Empty()

        return await _answer(context, call)

    async def WaitForHistoryEvent(
        self, request: pb.WaitForHistoryEventRequest, context: Context
    ) -> pb.WaitForHistoryEventResponse:
        return await _answer(context, lambda: queries.wait_for_history_event(self.engine, request))


class _WorkerTaskService(pbg.WorkerTaskServiceServicer):
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    async def PollWorkerTask(self, request_iterator: Any, context: Context) -> None:  # type: ignore[override]
        first = await context.read()
        if first is grpc.aio.EOF:
            return
        request = cast(pb.PollWorkerTaskRequest, first)
        if request.WhichOneof("frame") != "register":
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first PollWorkerTask frame must be register"
            )
            return
        register = request.register
        stream = PullStream(
            register.queue, register.app_worker_id, frozenset(register.flow_types), context.write
        )
        await stream.send(
            pb.PollWorkerTaskResponse(
                registered=pb.PollWorkerTaskRegistered(supports_unknown_name_rejection=True)
            )
        )
        pool = self.dispatcher.pull
        pool.add_stream(stream)
        half_closed = False
        try:
            while True:
                frame = await context.read()
                if frame is grpc.aio.EOF:
                    stream.closed = True
                    if stream.has_unanswered_task:
                        half_closed = await _closed_cleanly(stream)
                    return
                pool.on_frame(stream, cast(pb.PollWorkerTaskRequest, frame))
        finally:
            if stream.task is not None and not (half_closed and not stream.task.has_output):
                # Rare and worth an operator's eye: a Worker that drains hands back what it never started.
                _LOG.warning(
                    "a pull Worker stream (queue %s) ended with a %s task in flight (the Worker had %s it,"
                    " the call %s): its attempt counts as used",
                    stream.queue,
                    stream.task.kind,
                    "answered" if stream.task.has_output else "not answered",
                    "was cancelled" if context.cancelled() else "half-closed uncleanly or broke",
                )
            pool.remove_stream(stream, half_closed=half_closed)


async def _closed_cleanly(stream: PullStream) -> bool:
    """Tells a Worker's clean half-close of a stream from its death, both of which read as EOF.

    A retiring or draining SDK stream half-closes and keeps reading until the server ends the call, so a
    frame written to it still goes through. When the Worker process died, the read failed because the
    connection broke: the write fails, or the call is cancelled under it. Only a clean close lets a task
    the Worker never answered be sent elsewhere without using its attempt; taking a killed Worker's task
    for a clean close would run it twice.
    """
    try:
        await asyncio.wait_for(
            stream.send(pb.PollWorkerTaskResponse(ping=pb.PollWorkerTaskPing())), _PROBE_SECONDS
        )
    except Exception as error:
        _LOG.warning("the close probe of a pull stream failed: %s", type(error).__name__)
        return False
    return True


class DevServer:
    """A Dex-compatible development server, run in-process on the current event loop.

    Args:
        options: How to run it.

    Raises:
        StoreError: When another devserver uses the database file or its schema version is unknown.

    Example:
        ```python
        server = DevServer(ServerOptions(port=0, db_path=None))
        await server.start()
        print(server.address)
        await server.stop()
        ```
    """

    def __init__(self, options: ServerOptions | None = None) -> None:
        self.options = options or ServerOptions()
        self.store = Store(self.options.db_path)
        self.sizes = SizeRecord(self.options.size_report)
        self.blobs = Blobs(
            self.store,
            self.options.blob_threshold,
            self.options.max_value_bytes,
            self.options.blob_cache_bytes,
            self.sizes,
        )
        self.dispatcher = Dispatcher(self.options.dispatch_wait)
        self.streams = Streams(self.store)
        self.engine = Engine(
            self.store,
            self.blobs,
            self.dispatcher,
            self.streams,
            EngineOptions(
                default_worker_target=self.options.default_worker_target, stop_grace=self.options.stop_grace
            ),
        )
        self._server: grpc.aio.Server | None = None
        self._retention: asyncio.Task[None] | None = None
        self.port = 0
        self.restored = 0

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the bound server."""
        return f"{self.options.host}:{self.port}"

    async def start(self) -> None:
        """Restores the running Flows, binds the port and starts serving."""
        # Without SO_REUSEPORT a second devserver on a busy port fails instead of sharing it silently.
        server = grpc.aio.server(options=[*GRPC_OPTIONS, ("grpc.so_reuseport", 0)])
        pbg.add_FlowServiceServicer_to_server(_FlowService(self.engine), server)  # pyright: ignore[reportUnknownMemberType]
        pbg.add_WorkerTaskServiceServicer_to_server(  # pyright: ignore[reportUnknownMemberType]
            _WorkerTaskService(self.dispatcher), server
        )
        try:
            self.port = server.add_insecure_port(f"{self.options.host}:{self.options.port}")
        except RuntimeError:
            self.port = 0
        if self.port == 0:
            raise OSError(f"cannot bind {self.options.host}:{self.options.port} (is the port in use?)")
        self.restored = restore(self.engine)
        await server.start()
        self._server = server
        if self.options.retain_closed is not None:
            self._retention = asyncio.get_running_loop().create_task(
                keep_expiring(self.engine, self.options.retain_closed), name="dex-devserver retention"
            )

    async def stop(self) -> None:
        """Lets in-flight attempts finish (up to the stop grace), commits pending state and stops serving."""
        if self._retention is not None:
            self._retention.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retention
            self._retention = None
        # The engine stops first: ending the Worker streams first would fail the attempts in flight.
        await self.engine.close()
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None
        await self.dispatcher.close()
        self.store.close()

    async def wait(self) -> None:
        """Serves until the server stops."""
        if self._server is not None:
            await self._server.wait_for_termination()

    def history_json(self, flow_id: str, run_id: str = "") -> dict[str, Any]:
        """Returns a run's committed history in the ``dexcli flow history`` JSON shape."""
        run = self.engine.run_of(flow_id, run_id)
        return {
            "flowId": run.flow_id,
            "runId": run.run_id,
            "events": [event_json(event) for event in queries.history(self.engine, run.flow_id, run.run_id)],
        }


async def serve_forever(server: DevServer, ready: Callable[[str], None]) -> None:
    """Runs a server until SIGINT or SIGTERM, calling `ready` with its address once it serves."""
    await server.start()
    ready(server.address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.stop()
