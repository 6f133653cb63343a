"""Size limits the session enforces itself.

SDK 1.23.0 has no error type for a value that is too large to store, so the session checks sizes before it
writes and fails with an error that names the value, instead of letting a commit fail with a generic
transport error that a retry would only repeat.
"""

from __future__ import annotations

from typing import cast

__all__ = [
    "DEFAULT_INLINE_TOOL_OUTPUT_BYTES",
    "DEFAULT_MESSAGE_WINDOW_MAX_BYTES",
    "MAX_CONTEXT_SUMMARY_BYTES",
    "MAX_JSON_NESTING_DEPTH",
    "MAX_MESSAGE_CHUNK_BYTES",
    "MAX_NOTE_TEXT_BYTES",
    "MAX_PLAN_TASKS",
    "MAX_PLAN_TASK_BYTES",
    "MAX_QUESTION_BYTES",
    "MAX_QUESTION_CHOICES",
    "MAX_RPC_OUTPUT_BYTES",
    "MAX_SESSION_SETTINGS_BYTES",
    "MAX_STORED_VALUE_BYTES",
    "MAX_TOOL_OUTPUT_BYTES",
    "MAX_TURN_FAILURE_NOTE_BYTES",
    "MAX_USER_MESSAGE_BYTES",
    "MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT",
    "MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT",
    "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
    "TURN_FAILURE_NOTE_CUT_MARKER",
    "bounded_text",
    "nests_deeper_than",
    "unencodable_index",
    "utf8_size",
]

#: The largest user message, in UTF-8 bytes, that `send_user_message` and `start_session` accept.
MAX_USER_MESSAGE_BYTES = 256 * 1024

#: The largest framework run state, stored message, or tool call record (with its output), in bytes of its
#: stored encoding. Servers refuse single values above their own limit (2 MiB on the development server), so
#: the session stays below it with room for the value's key. It is 1.5 MiB so that any user message of
#: `MAX_USER_MESSAGE_BYTES` of ordinary text (CJK text included, which JSON escapes to six bytes a character
#: in the text and seven in the runner's item) can be stored.
MAX_STORED_VALUE_BYTES = 1536 * 1024

#: The most bytes of an RPC's output, in its stored JSON: `get_agent_snapshot` and `list_agent_messages` end
#: their messages early to stay below it, and say where the next page starts. A server stores an RPC's
#: output like any other value, so it stays below the 2 MiB a development server (and a Dex Server on
#: Temporal's default payload limits) stores, with room for the output's own fields.
MAX_RPC_OUTPUT_BYTES = 1536 * 1024

#: The default of ``AgentSessionOptions.message_window_max_bytes``: the stored bytes of the messages the
#: `AgentMessages` window keeps before the oldest roll over into chunks. Every Step that stores a message
#: loads the whole window, so it is bounded by bytes as well as by count.
DEFAULT_MESSAGE_WINDOW_MAX_BYTES = 1024 * 1024

#: The default of ``AgentSessionOptions.max_inline_tool_output_bytes``: a tool output larger than this is
#: stored apart (`AgentToolOutputs`) and the model receives its first part with a note
#: (`tool_output_view`).
DEFAULT_INLINE_TOOL_OUTPUT_BYTES = 64 * 1024

#: The largest tool output the session keeps, in UTF-8 bytes: one stored value. A larger output records the
#: call ``failed`` with an error the model reads.
MAX_TOOL_OUTPUT_BYTES = MAX_STORED_VALUE_BYTES

#: How deep the arrays and objects of JSON that a model or tool wrote may nest where the session reads it
#: as a value: a tool call's arguments (deeper ones record the call ``failed`` before the tool runs), and
#: the JSON a trace or a UI shows as a value (deeper text is shown as text). It is about the limit of
#: pydantic's own JSON reader, and far below Python's recursion limit, which the standard decoder meets
#: near 1,000 levels (about 2 KB of brackets).
MAX_JSON_NESTING_DEPTH = 200

#: The largest context summary, in UTF-8 bytes. Every Step request and every snapshot carries the summary,
#: so a summary call that returns more fails its attempt with an error that names the size.
MAX_CONTEXT_SUMMARY_BYTES = 256 * 1024

#: The largest ``message_chunk_max_bytes`` a session accepts. A chunk is one stored value, and a commit that
#: rolls the window over writes at most `MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT` of them.
MAX_MESSAGE_CHUNK_BYTES = 8 * 1024 * 1024

#: The most message chunks one commit writes when it moves the oldest messages out of the window; a window
#: that is larger still (a session stored by dex-agents 0.1.0) drains over the following commits.
MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT = 4

#: The most bytes of message chunks one commit writes when it rolls the window over, unless its first chunk
#: alone is larger.
MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT = 8 * 1024 * 1024

#: The largest session settings, in UTF-8 bytes of their compact JSON text, that clients send.
MAX_SESSION_SETTINGS_BYTES = 16 * 1024

#: How many bytes above `MAX_SESSION_SETTINGS_BYTES` the session itself still accepts: session cores in
#: other languages write some floats and U+2028/U+2029 differently, so one settings object measures a little
#: differently in each.
SESSION_SETTINGS_SIZE_TOLERANCE_BYTES = 1024

#: The longest error or rejection text kept on a tool call record; longer text is cut with a marker, so a
#: runaway message cannot make the record too large to store.
MAX_NOTE_TEXT_BYTES = 16 * 1024

#: The longest question, or question choice, a tool or `ask_user` may ask, in UTF-8 bytes.
MAX_QUESTION_BYTES = 16 * 1024

#: The most choices one question may offer.
MAX_QUESTION_CHOICES = 50

#: The most tasks a plan may hold. Every Step request carries the plan, so it stays small.
MAX_PLAN_TASKS = 100

#: The longest content of one plan task, in UTF-8 bytes.
MAX_PLAN_TASK_BYTES = 2 * 1024

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


def nests_deeper_than(value: object, max_depth: int = MAX_JSON_NESTING_DEPTH) -> bool:
    """Whether ``value``'s dicts and lists nest deeper than ``max_depth`` levels.

    It walks level by level, without recursion, so a value nested past Python's recursion limit is measured
    too, and a long flat list costs one pass.

    Args:
        value: A decoded JSON value (or any dicts and lists).
        max_depth: The deepest nesting allowed.

    Returns:
        `True` when some container sits more than ``max_depth`` levels deep.
    """
    level: list[object] = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return True
        deeper: list[object] = []
        for item in level:
            members = (
                cast(dict[str, object], item).values() if isinstance(item, dict) else cast(list[object], item)
            )
            deeper.extend(member for member in members if isinstance(member, dict | list))  # pyright: ignore[reportUnknownArgumentType]
        level = deeper
    return False
