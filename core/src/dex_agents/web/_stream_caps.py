"""Caps on open streams, so no client can hold the app's and the Workers' capacity.

Each open stream holds a long poll to Dex, and while it follows a turn one snapshot RPC per
empty poll, for as long as the browser keeps it open. Without a cap, one client could hold the app's and the
Workers' capacity with streams it never reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from dex_agents.web._requests import fail

__all__ = ["DEFAULT_MAX_STREAMS", "DEFAULT_MAX_STREAMS_PER_SESSION", "HeldStreamResponse", "StreamCaps"]

#: Open event streams (``/events`` and ``/chat``) one session may have at once, by default.
DEFAULT_MAX_STREAMS_PER_SESSION = 8
#: Open event streams the whole app may have at once, by default.
DEFAULT_MAX_STREAMS = 256


class StreamCaps:
    """Counts the open streams per session and in all; one past a cap is refused with 429."""

    def __init__(self, per_session: int, in_all: int) -> None:
        if per_session <= 0 or in_all <= 0:
            raise ValueError(
                f"max_streams_per_session and max_streams must be positive, got {per_session} and {in_all}"
            )
        self._per_session = per_session
        self._in_all = in_all
        self._open: Counter[str] = Counter()

    @property
    def open_streams(self) -> int:
        """The streams open now."""
        return self._open.total()

    def hold(self, session_id: str) -> StreamHold:
        """Count one more open stream of ``session_id``.

        Raises:
            BadRequestError: 429 when the session or the app is at its cap.
        """
        if self._open[session_id] >= self._per_session:
            fail(
                429,
                f"the session {session_id!r} already has {self._per_session} open streams, its limit; "
                "close one (another tab?) and try again",
            )
        if self.open_streams >= self._in_all:
            fail(429, f"the app already serves {self._in_all} open streams, its limit; try again later")
        self._open[session_id] += 1
        return StreamHold(lambda: self._release(session_id))

    def _release(self, session_id: str) -> None:
        self._open[session_id] -= 1
        if self._open[session_id] <= 0:
            del self._open[session_id]


class StreamHold:
    """One counted stream; `release` is safe to repeat."""

    def __init__(self, on_release: Callable[[], None]) -> None:
        self._on_release: Callable[[], None] | None = on_release

    def release(self) -> None:
        """Stop counting the stream."""
        on_release, self._on_release = self._on_release, None
        if on_release is not None:
            on_release()


class HeldStreamResponse(Response):
    """A streaming response that releases its hold once the stream ends, however it ends."""

    def __init__(self, inner: Response, hold: StreamHold) -> None:  # pyright: ignore[reportMissingSuperCall]
        # Only __call__ is used: Starlette sends a route's response by calling it.
        self._inner = inner
        self._hold = hold

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._inner(scope, receive, send)
        finally:
            self._hold.release()
