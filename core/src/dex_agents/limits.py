"""Size limits the session enforces itself.

SDK 1.23.0 has no error type for a value that is too large to store, so the session checks sizes before it
writes and fails with an error that names the value, instead of letting a commit fail with a generic
transport error that a retry would only repeat.
"""

from __future__ import annotations

__all__ = [
    "MAX_NOTE_TEXT_BYTES",
    "MAX_STORED_VALUE_BYTES",
    "MAX_TURN_FAILURE_NOTE_BYTES",
    "MAX_USER_MESSAGE_BYTES",
    "TURN_FAILURE_NOTE_CUT_MARKER",
    "bounded_text",
    "unencodable_index",
    "utf8_size",
]

#: The largest user message, in UTF-8 bytes, that `send_user_message` and `start_session` accept.
MAX_USER_MESSAGE_BYTES = 256 * 1024

#: The largest framework run state, stored message, or tool call record (with its output), in bytes of its
#: stored encoding. Worker requests and results travel over gRPC with a 4 MiB message limit by default, a
#: result carries several values, and servers refuse single values above their own limit (2 MiB on the
#: development server), so the session stays well below both.
MAX_STORED_VALUE_BYTES = 1024 * 1024


#: The longest error or rejection text kept on a tool call record; longer text is cut with a marker, so a
#: runaway message cannot make the record too large to store.
MAX_NOTE_TEXT_BYTES = 16 * 1024

_CUT_MARKER = " [... cut by dex-agents]"

#: The longest turn-failure note, in UTF-8 bytes. A longer note has its longest results cut, each ending
#: with `TURN_FAILURE_NOTE_CUT_MARKER`, so a large tool output cannot make the note too large to store.
MAX_TURN_FAILURE_NOTE_BYTES = 64 * 1024

#: What ends a result (or, as a last resort, arguments) that the turn-failure note cut short.
TURN_FAILURE_NOTE_CUT_MARKER = _CUT_MARKER


def bounded_text(text: str, limit: int = MAX_NOTE_TEXT_BYTES) -> str:
    """Return ``text``, cut to at most ``limit`` UTF-8 bytes with a marker when it is longer."""
    if utf8_size(text) <= limit:
        return text
    budget = limit - len(_CUT_MARKER)
    cut = text.encode("utf-8", errors="surrogatepass")[:budget].decode("utf-8", errors="ignore")
    return cut + _CUT_MARKER


def utf8_size(text: str) -> int:
    """Return the size of ``text`` in UTF-8 bytes."""
    return len(text.encode("utf-8", errors="surrogatepass"))


def unencodable_index(text: str) -> int | None:
    """Return the index of the first character UTF-8 cannot encode (a lone surrogate), or `None`.

    Such text (bytes decoded with ``errors="surrogateescape"``, or a JSON escape of a lone surrogate) would
    be stored, then refused by every provider the transcript is sent to, so the session refuses it at once.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None
