"""Guards the patches of SDK internals in ``dex_agents/_sdk_patches.py``.

They were written against dex-python-sdk 1.23.0. The first test fails when another SDK version is
installed, and the second when any SDK function the patches replace or rely on changed: review
``_sdk_patches.py`` against the new SDK source (does the pull module still look the version up per
stream? does a stream still retire itself in ``try_retire``? does Stop still drain idle streams by
cancelling them, and does a draining stream still half-close?), then update the pins here.
"""

import asyncio
import hashlib
import inspect
import subprocess
import sys
from importlib import metadata
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from dex import _async_value_hydrator, _pull_worker, _server_protocol
from dex.dexpb import dex_pb2 as pb

from dex_agents import _sdk_patches as sdk_patches
from dex_agents._sdk_patches import (
    BLOB_LOADS_IN_PIECES_PATCH,
    HALF_CLOSE_AT_STOP_PATCH,
    PATCHED_SDK_VERSION,
    SPARE_STREAM_PATCH,
    VERSION_LOOKUP_PATCH,
    applied_sdk_patches,
    apply_sdk_patches,
)

ALL_PATCHES = {VERSION_LOOKUP_PATCH, SPARE_STREAM_PATCH, BLOB_LOADS_IN_PIECES_PATCH, HALF_CLOSE_AT_STOP_PATCH}

# sha256 (first 16 hex digits) of each function's source in dex-python-sdk 1.23.0.
PINNED_SOURCES = {
    "_server_protocol.sdk_version": "4de8a65a53e7adaa",
    "PullStream._poll": "f20707682a6cba58",
    "PullStream.try_retire": "6172f939e26536f3",
    "PullStream.drain": "a0c8508191e7df21",
    "PullStream._send": "85e3374ac557971f",
    "PullStream._await_stream_eof": "19233947c9fa8784",
    "PullWorkerRuntime.stop": "bdd5c9b1843da46a",
    "PullWorkerRuntime.desired_idle_streams_per_queue": "24e5234355c44a07",
    "PullWorkerRuntime._reconcile": "f8974a7618f28945",
    "AsyncValueHydrator._load_misses": "ad4dfc6688212e42",
}


def _source_digest(function: Any) -> str:
    original = getattr(function, "__wrapped__", function)
    return hashlib.sha256(inspect.getsource(original).encode()).hexdigest()[:16]


def test_the_installed_sdk_is_the_one_the_patches_were_written_for() -> None:
    assert metadata.version("dex-python-sdk") == PATCHED_SDK_VERSION == "1.23.0", (
        "dex-python-sdk changed: review dex_agents/_sdk_patches.py against the new SDK, then update the pins"
    )


def test_the_sdk_functions_the_patches_rely_on_are_unchanged() -> None:
    current = {
        "_server_protocol.sdk_version": _source_digest(_server_protocol.sdk_version),
        "PullStream._poll": _source_digest(_pull_worker.PullStream._poll),  # pyright: ignore[reportPrivateUsage]
        "PullStream.try_retire": _source_digest(_pull_worker.PullStream.try_retire),
        "PullStream.drain": _source_digest(_pull_worker.PullStream.drain),
        "PullStream._send": _source_digest(_pull_worker.PullStream._send),  # pyright: ignore[reportPrivateUsage]
        "PullStream._await_stream_eof": _source_digest(
            _pull_worker.PullStream._await_stream_eof  # pyright: ignore[reportPrivateUsage]
        ),
        "PullWorkerRuntime.stop": _source_digest(_pull_worker.PullWorkerRuntime.stop),
        "PullWorkerRuntime.desired_idle_streams_per_queue": _source_digest(
            _pull_worker.PullWorkerRuntime.desired_idle_streams_per_queue
        ),
        "PullWorkerRuntime._reconcile": _source_digest(
            _pull_worker.PullWorkerRuntime._reconcile  # pyright: ignore[reportPrivateUsage]
        ),
        "AsyncValueHydrator._load_misses": _source_digest(
            _async_value_hydrator.AsyncValueHydrator._load_misses  # pyright: ignore[reportPrivateUsage]
        ),
    }
    assert current == PINNED_SOURCES, (
        "an SDK function that dex_agents/_sdk_patches.py patches or relies on changed; review the patches"
    )
    # The registration frame of every new pull stream is where the version is looked up.
    assert "sdk_version()" in inspect.getsource(_pull_worker.PullStream._poll)  # pyright: ignore[reportPrivateUsage]


def test_importing_dex_agents_patches_nothing() -> None:
    code = (
        "import dex_agents, dex_agents.testing, dex_agents.web, dex_agents_bench\n"
        "from dex_agents._sdk_patches import applied_sdk_patches\n"
        "print(sorted(applied_sdk_patches()))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_applying_keeps_the_version_text_and_is_idempotent() -> None:
    expected = metadata.version("dex-python-sdk")
    assert apply_sdk_patches() == ALL_PATCHES
    assert apply_sdk_patches() == applied_sdk_patches() == ALL_PATCHES
    lookup = getattr(_pull_worker, "sdk_version")  # noqa: B009 - a name the module does not export
    assert lookup() == expected == _server_protocol.sdk_version()


def _stream(queue: str, *, busy: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        queue=queue,
        is_busy=busy,
        is_draining=False,
        _is_registered=True,
        _is_retiring=False,
        _retirement_requested=asyncio.Event(),
    )


async def test_a_finished_stream_retires_only_beyond_one_spare() -> None:
    apply_sdk_patches()
    finished = _stream("flow")
    other_idle = _stream("flow")
    streams = [finished, other_idle, _stream("flow", busy=True), _stream("sticky")]

    def desired_idle_streams_per_queue(queue: str) -> int:
        del queue
        return 1

    runtime = SimpleNamespace(_streams=streams, desired_idle_streams_per_queue=desired_idle_streams_per_queue)
    for stream in streams:
        stream.runtime = runtime
    # One other idle stream on the queue is the wanted number: the SDK would retire the finished one, and
    # the patch keeps it as the spare.
    _pull_worker.PullStream.try_retire(finished)  # pyright: ignore[reportArgumentType]
    assert not finished.is_draining
    # A second idle one makes the finished stream surplus even with the spare: it retires, as the SDK does.
    streams.append(_stream("flow"))
    streams[-1].runtime = runtime
    _pull_worker.PullStream.try_retire(finished)  # pyright: ignore[reportArgumentType]
    assert finished.is_draining and finished._retirement_requested.is_set()


class _Call:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _draining_stream(*, stopping: bool, busy: bool = False, registered: bool = True) -> SimpleNamespace:
    call = _Call()
    return SimpleNamespace(
        runtime=SimpleNamespace(is_stopping=stopping),
        _is_registered=registered,
        is_busy=busy,
        is_draining=False,
        is_half_closing=False,
        _retirement_requested=asyncio.Event(),
        _call=call,
        close=call.cancel,
    )


async def test_an_idle_stream_half_closes_at_stop_and_drains_as_the_sdk_does_otherwise() -> None:
    apply_sdk_patches()
    idle_at_stop = _draining_stream(stopping=True)
    _pull_worker.PullStream.drain(idle_at_stop)  # pyright: ignore[reportArgumentType]
    # Its own loop half-closes it; Stop, seeing it half-closing, neither cancels nor closes it.
    assert idle_at_stop.is_draining and idle_at_stop.is_half_closing
    assert idle_at_stop._retirement_requested.is_set() and not idle_at_stop._call.cancelled
    # So does one whose registration the Worker has not read yet: the server may already have sent a task.
    registering = _draining_stream(stopping=True, registered=False)
    _pull_worker.PullStream.drain(registering)  # pyright: ignore[reportArgumentType]
    assert registering.is_half_closing and not registering._call.cancelled
    # Outside Stop (a reconnect frame), an idle stream is cancelled as before.
    outside_stop = _draining_stream(stopping=False)
    _pull_worker.PullStream.drain(outside_stop)  # pyright: ignore[reportArgumentType]
    assert outside_stop.is_draining and outside_stop._call.cancelled and not outside_stop.is_half_closing
    # A busy stream finishes its task first, as the SDK drains it.
    busy = _draining_stream(stopping=True, busy=True)
    _pull_worker.PullStream.drain(busy)  # pyright: ignore[reportArgumentType]
    assert busy.is_draining and not busy._call.cancelled and not busy._retirement_requested.is_set()


class _SentFrames:
    def __init__(self) -> None:
        self.frames: list[str] = []

    async def send(self, stream: Any, request: pb.PollWorkerTaskRequest) -> None:
        del stream
        self.frames.append(request.WhichOneof("frame") or "")


class _HalfClosableCall(_Call):
    def __init__(self) -> None:
        super().__init__()
        self.done_writing_calls = 0

    async def done_writing(self) -> None:
        self.done_writing_calls += 1


def _sending_stream(*, half_closing: bool, busy: bool = False, stopping: bool = True) -> SimpleNamespace:
    call = _HalfClosableCall()
    stream = SimpleNamespace(
        runtime=SimpleNamespace(is_stopping=stopping),
        is_half_closing=half_closing,
        is_busy=busy,
        _send_lock=asyncio.Lock(),
        _call=call,
        read_to_eof=0,
        keepalive_stopped=False,
    )

    async def await_eof(reader: object) -> None:
        del reader
        stream.read_to_eof += 1

    def stop_keepalive() -> None:
        stream.keepalive_stopped = True

    stream._await_stream_eof = await_eof
    stream._stop_keepalive = stop_keepalive
    return stream


async def test_an_idle_stream_sending_as_the_stop_comes_half_closes_instead_of_being_cancelled() -> None:
    apply_sdk_patches()
    sent = _SentFrames()
    send = sdk_patches._half_closing_after_a_send_at_stop(sent.send)  # pyright: ignore[reportPrivateUsage]
    register = pb.PollWorkerTaskRequest(register=pb.PollWorkerTaskRegister(queue="default"))
    pong = pb.PollWorkerTaskRequest(pong=pb.PollWorkerTaskPong())
    refusal = pb.PollWorkerTaskRequest(reject=pb.PollWorkerTaskReject(task_id="task-1"))
    # After any send the SDK's loop leaves on a stop and cancels the call, so each one half-closes first and
    # reads to the end: a task the server sent meanwhile goes back unused.
    for request in (register, pong, refusal):
        met_the_stop = _sending_stream(half_closing=True)
        await send(met_the_stop, request)
        assert met_the_stop._call.done_writing_calls == 1 and met_the_stop.read_to_eof == 1
        assert met_the_stop.keepalive_stopped and not met_the_stop._call.cancelled
    assert sent.frames == ["register", "pong", "reject"]
    # A busy stream, one stop did not mark, or any send with no stop under way is sent as the SDK sends it.
    for stream in (
        _sending_stream(half_closing=True, busy=True),
        _sending_stream(half_closing=False),
        _sending_stream(half_closing=True, stopping=False),
    ):
        await send(stream, refusal)
        assert stream._call.done_writing_calls == 0 and stream.read_to_eof == 0


class _TooLarge(grpc.aio.AioRpcError):
    def __init__(self, code: grpc.StatusCode = grpc.StatusCode.RESOURCE_EXHAUSTED) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="too large")


class _Blob:
    def __init__(self, size: int) -> None:
        self.size = size
        self.hydrated: object = None


class _LoadBlobsService:
    """Answers a call for at most ``limit`` bytes of blobs and refuses larger ones, as a server does."""

    def __init__(self, limit: int, code: grpc.StatusCode = grpc.StatusCode.RESOURCE_EXHAUSTED) -> None:
        self.limit = limit
        self.code = code
        self.calls: list[int] = []

    async def load(self, hydrator: object, misses: list[Any]) -> None:
        del hydrator
        total = sum(blob.size for blob in misses)
        self.calls.append(len(misses))
        if total > self.limit:
            raise _TooLarge(self.code)
        for blob in misses:
            blob.hydrated = blob.size


async def test_blob_loads_too_large_for_one_call_are_loaded_in_halves() -> None:
    from dex_agents._sdk_patches import _loading_in_pieces  # pyright: ignore[reportPrivateUsage]

    service = _LoadBlobsService(limit=4)
    load = _loading_in_pieces(service.load)
    blobs = [_Blob(1) for _ in range(10)]
    await load(None, blobs)
    assert all(blob.hydrated == 1 for blob in blobs)
    # 10 fail, each half of 5 fails, and its pieces of 2 and 3 fit.
    assert service.calls == [10, 5, 2, 3, 5, 2, 3]
    small = _LoadBlobsService(limit=100)
    await _loading_in_pieces(small.load)(None, [_Blob(1) for _ in range(10)])
    assert small.calls == [10]  # a load that fits one call makes exactly that call


async def test_a_single_blob_that_is_too_large_and_other_errors_are_not_split() -> None:
    from dex_agents._sdk_patches import _loading_in_pieces  # pyright: ignore[reportPrivateUsage]

    single = _LoadBlobsService(limit=4)
    with pytest.raises(grpc.aio.AioRpcError):
        await _loading_in_pieces(single.load)(None, [_Blob(5)])
    assert single.calls == [1]
    unavailable = _LoadBlobsService(limit=0, code=grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(grpc.aio.AioRpcError):
        await _loading_in_pieces(unavailable.load)(None, [_Blob(1), _Blob(1)])
    assert unavailable.calls == [2]
