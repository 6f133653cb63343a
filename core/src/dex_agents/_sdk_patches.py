"""The patches of SDK internals dex-agents applies, and only for a Worker that `AgentWorker` builds.

The first lets a Worker serve a session of any size; ``dex-python-sdk`` 1.23.0 has no option for it:

- **Blob loads in pieces.** The SDK hydrates every blob reference of a request it lacks in its blob cache
  with one ``LoadBlobs`` call, and its gRPC channel receives at most 4 MiB per call, so a Worker with an
  empty cache could not serve a Step or RPC whose loads add up to more: the call failed with
  ``RESOURCE_EXHAUSTED`` on every retry, and the session stopped being servable by any fresh Worker. The
  patch splits such a call in halves, again and again, until each piece fits; a stored value is at most a
  server's value limit (2 MiB on the development server), so a single blob always does. Warm Workers, whose
  misses fit one call, make exactly the calls they made before.

The other two remove work the SDK repeats for every task a pull Worker runs, where no public option helps
(measured with the core's ``bench/turn_breakdown.py``; see the documentation's performance page):

- **The version lookup.** Every pull stream opens with a registration frame naming the SDK's version, and
  ``dex._pull_worker`` looks it up with ``importlib.metadata.version("dex-python-sdk")`` each time: a scan of
  ``sys.path`` for the package's metadata, 23% of a busy Worker's CPU. The version cannot change while the
  process runs, so the pull module's reference becomes a cached copy of the same function; the frames
  carry the same text.
- **Stream churn.** A pull stream carries one task at a time. When it takes a task the Worker opens a new
  idle stream, and when it finishes it retires itself as soon as enough other idle streams exist, so a
  Worker running one chain of Steps opened a new stream (a new gRPC call, a registration, a drain) for
  nearly every task; ``PullWorkerOptions.idle_streams_per_queue`` changes how many idle streams are
  wanted, not that. The patch keeps one spare: a stream that finished a task retires only when more than
  the wanted number of other idle streams exist. Streams opened per task fell from about 1 to under 0.1,
  and Worker CPU per turn by about a quarter.

One makes a graceful stop graceful for every stream:

- **Idle streams half-close at stop.** ``PullWorkerRuntime.stop`` drains each stream, and the SDK drains an
  idle one by cancelling its gRPC call. A server may have just sent a task on that stream; a cancelled call
  reads, on the server, like a Worker that died with the task, so the attempt counts as used, and a
  single-attempt write that never ran is reported ``outcome_unknown`` (found by the rolling-deploy chaos
  test). The SDK already has the right path, the one a retiring stream takes: refuse a task that arrived,
  half-close, and read until the server ends the call, which hands a task it sent in the meantime to another
  Worker without using its attempt. The patch sends a stream idle at stop down that path, whether or not
  the Worker has read its registration yet (the server counts a stream from the moment it answers, and
  with tasks queued it sends one at once: a 200-session rolling deploy lost a write that way), including
  one that is sending when the stop comes: its registration, the pong to a ping, or the refusal of a task
  that reached a full Worker. After such a send the SDK's loop leaves at once on a stop and cancels the
  call; a full Worker in a 200-session deploy lost a never-run write to each of a few such streams. Busy
  streams, and streams drained for any other reason, drain as the SDK does.

`apply_sdk_patches` applies them for the SDK version they were written against only; with any other
version it changes nothing and says so once in the log (and sessions whose loads exceed 4 MiB cannot be
served by a Worker with an empty blob cache). ``tests/test_unit_sdk_patches.py`` pins that
version and the source of every SDK function the patches rely on, so an SDK upgrade fails the test suite
loudly instead of silently dropping or breaking a patch. Importing dex-agents patches nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any, cast

import grpc

__all__ = [
    "BLOB_LOADS_IN_PIECES_PATCH",
    "HALF_CLOSE_AT_STOP_PATCH",
    "PATCHED_SDK_VERSION",
    "SPARE_STREAM_PATCH",
    "VERSION_LOOKUP_PATCH",
    "applied_sdk_patches",
    "apply_sdk_patches",
]

PATCHED_SDK_VERSION = "1.23.0"
"""The ``dex-python-sdk`` release the patches were written for."""

VERSION_LOOKUP_PATCH = "cached-version-lookup"
SPARE_STREAM_PATCH = "spare-idle-stream"
BLOB_LOADS_IN_PIECES_PATCH = "blob-loads-in-pieces"
HALF_CLOSE_AT_STOP_PATCH = "half-close-idle-streams-at-stop"

_PATCH_MARK = "__dex_agents_patch__"
_logger = logging.getLogger(__name__)
_lock = threading.Lock()


def _installed_sdk_version() -> str | None:
    try:
        return metadata.version("dex-python-sdk")
    except metadata.PackageNotFoundError:
        return None


def applied_sdk_patches() -> frozenset[str]:
    """The patches in force in this process."""
    from dex import _async_value_hydrator, _pull_worker  # noqa: PLC0415 - SDK internals, read only when asked

    applied: set[str] = set()
    hydrator_type = getattr(_async_value_hydrator, "AsyncValueHydrator", None)
    if getattr(getattr(hydrator_type, "_load_misses", None), _PATCH_MARK, False):
        applied.add(BLOB_LOADS_IN_PIECES_PATCH)
    if getattr(getattr(_pull_worker, "sdk_version", None), _PATCH_MARK, False):
        applied.add(VERSION_LOOKUP_PATCH)
    stream_type = getattr(_pull_worker, "PullStream", None)
    if getattr(getattr(stream_type, "try_retire", None), _PATCH_MARK, False):
        applied.add(SPARE_STREAM_PATCH)
    if getattr(getattr(stream_type, "drain", None), _PATCH_MARK, False) and getattr(
        getattr(stream_type, "_send", None), _PATCH_MARK, False
    ):
        applied.add(HALF_CLOSE_AT_STOP_PATCH)
    return frozenset(applied)


def _cached_version_lookup(original: Callable[[], str]) -> Callable[[], str]:
    cached = functools.cache(original)
    setattr(cached, _PATCH_MARK, True)
    return cached


def _retire_keeping_a_spare(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def try_retire(stream: Any) -> None:
        if stream.is_busy or stream.is_draining or not stream._is_registered:
            return
        runtime = stream.runtime
        idle_others = sum(
            other is not stream
            and other.queue == stream.queue
            and other._is_registered
            and not other.is_busy
            and not other.is_draining
            for other in runtime._streams
        )
        # The SDK retires once the other idle streams reach the wanted number; one more is kept, so the
        # stream a chained task needs next is already open and registered.
        if idle_others > runtime.desired_idle_streams_per_queue(stream.queue):
            original(stream)

    setattr(try_retire, _PATCH_MARK, True)
    return try_retire


def _half_closing_at_stop(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def drain(stream: Any) -> None:
        # Registered or not: the server may already count a stream whose registration the Worker has not
        # read yet, and with tasks queued it sends one there at once; cancelled, that task's attempt is lost.
        if not (
            stream.runtime.is_stopping
            and stream._call is not None
            and not stream.is_busy
            and not stream.is_half_closing
        ):
            original(stream)
            return
        stream.is_draining = True
        # Marked now, so Stop neither cancels the stream's task nor closes its call; the retirement wake
        # makes the stream's loop take its draining path: refuse a task that arrived, half-close, and read
        # until the server ends the call.
        stream.is_half_closing = True
        stream._retirement_requested.set()

    setattr(drain, _PATCH_MARK, True)
    return drain


_Send = Callable[[Any, Any], Awaitable[None]]


def _half_closing_after_a_send_at_stop(original: _Send) -> _Send:
    @functools.wraps(original)
    async def _send(stream: Any, request: Any) -> None:
        await original(stream, request)
        if stream.is_half_closing and stream.runtime.is_stopping and not stream.is_busy:
            # Stop came while this idle stream was sending (its registration, the pong to a ping, the refusal
            # of a task that arrived at a full Worker). After the send the stream's loop checks for a stop
            # before it looks at draining, so it would leave without half-closing, and the SDK would cancel a
            # call the server may already have sent a task on. Half-close here and read until the server
            # ends the call, as the loop's draining path does, so the server takes that task back unused.
            # Both steps do nothing more on a call that has ended, so the loop's own draining path, if it
            # comes next, finds nothing left to do.
            async with stream._send_lock:
                stream._stop_keepalive()
                await stream._call.done_writing()
            await stream._await_stream_eof(None)

    setattr(_send, _PATCH_MARK, True)
    return _send


_LoadMisses = Callable[[Any, list[Any]], Awaitable[None]]


def _is_response_too_large(error: grpc.aio.AioRpcError) -> bool:
    return error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def _loading_in_pieces(original: _LoadMisses) -> _LoadMisses:
    @functools.wraps(original)
    async def load_misses(hydrator: Any, misses: list[Any]) -> None:
        try:
            await original(hydrator, misses)
        except grpc.aio.AioRpcError as error:
            # The server refuses a response above the SDK's receive limit, or the channel refuses to
            # receive it; either way nothing was hydrated, and halves are smaller. One blob that is still
            # too large cannot be split, so its error stands.
            if not _is_response_too_large(error) or len(misses) < 2:
                raise
            middle = len(misses) // 2
            await load_misses(hydrator, misses[:middle])
            await load_misses(hydrator, misses[middle:])

    setattr(load_misses, _PATCH_MARK, True)
    return load_misses


def apply_sdk_patches() -> frozenset[str]:
    """Apply the patches to the installed SDK; safe to call any number of times.

    Returns:
        The patches in force: all four, or none when the installed SDK is not `PATCHED_SDK_VERSION` or
        lacks what they replace; the Worker then runs as the SDK ships it.
    """
    with _lock:
        from dex import (  # noqa: PLC0415 - SDK internals, touched only when patching
            _async_value_hydrator,
            _pull_worker,
        )

        applied = applied_sdk_patches()
        installed = _installed_sdk_version()
        lookup: Any = getattr(_pull_worker, "sdk_version", None)
        stream_type: Any = getattr(_pull_worker, "PullStream", None)
        retire: Any = getattr(stream_type, "try_retire", None)
        drain: Any = getattr(stream_type, "drain", None)
        send: Any = getattr(stream_type, "_send", None)
        hydrator_type: Any = getattr(_async_value_hydrator, "AsyncValueHydrator", None)
        load_misses: Any = getattr(hydrator_type, "_load_misses", None)
        if not (
            installed == PATCHED_SDK_VERSION
            and callable(lookup)
            and callable(retire)
            and callable(drain)
            and callable(send)
            and callable(load_misses)
        ):
            if not applied:
                _logger.info(
                    "dex-agents leaves the SDK unpatched: its patches are for dex-python-sdk %s, and %s is "
                    "installed",
                    PATCHED_SDK_VERSION,
                    installed,
                )
            return applied
        if VERSION_LOOKUP_PATCH not in applied:
            setattr(_pull_worker, "sdk_version", _cached_version_lookup(cast(Callable[[], str], lookup)))  # noqa: B010 - private
        if SPARE_STREAM_PATCH not in applied:
            setattr(stream_type, "try_retire", _retire_keeping_a_spare(cast(Callable[[Any], None], retire)))  # noqa: B010 - private
        if HALF_CLOSE_AT_STOP_PATCH not in applied:
            setattr(stream_type, "drain", _half_closing_at_stop(cast(Callable[[Any], None], drain)))  # noqa: B010 - private
            setattr(stream_type, "_send", _half_closing_after_a_send_at_stop(cast(_Send, send)))  # noqa: B010 - private
        if BLOB_LOADS_IN_PIECES_PATCH not in applied:
            setattr(hydrator_type, "_load_misses", _loading_in_pieces(cast(_LoadMisses, load_misses)))  # noqa: B010 - private
        return applied_sdk_patches()
