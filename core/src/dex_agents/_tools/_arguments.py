"""Reading a tool call's arguments, the JSON object text a model wrote, and JSON text shown as a value."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from dex_agents.limits import MAX_JSON_NESTING_DEPTH, nests_deeper_than
from dex_agents.runner import ToolExecutionError

__all__ = ["JsonNestingError", "load_json", "parse_json_text", "parse_tool_arguments"]


class JsonNestingError(ValueError):
    """JSON text whose arrays and objects nest deeper than `MAX_JSON_NESTING_DEPTH`."""


def load_json(
    text: str | bytes,
    *,
    max_depth: int = MAX_JSON_NESTING_DEPTH,
    parse_constant: Callable[[str], object] | None = None,
) -> Any:
    """Return JSON text as a value, refusing nesting deeper than ``max_depth``.

    The standard decoder recurses per level and raises `RecursionError`, which is no `ValueError` and so
    escapes the usual ``except ValueError``, near 1,000 levels; a value it does return can still be too
    deep for code that recurses over it later (a serializer, a validator, a tool). Both become one error.

    Args:
        text: The JSON text.
        max_depth: The deepest nesting of arrays and objects accepted.
        parse_constant: As `json.loads`'s.

    Returns:
        The value.

    Raises:
        JsonNestingError: ``arrays and objects nest more than <max_depth> levels deep``.
        ValueError: If the text is not JSON.
    """
    too_deep = f"arrays and objects nest more than {max_depth} levels deep"
    try:
        value: object = json.loads(text, parse_constant=parse_constant)
    except RecursionError:
        raise JsonNestingError(too_deep) from None
    # Text with no more brackets than levels allowed cannot nest deeper, which is nearly all of it.
    brackets = (
        text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    )
    if brackets > max_depth and nests_deeper_than(value, max_depth):
        raise JsonNestingError(too_deep)
    return value


def parse_json_text(text: str | None) -> Any:
    """Return JSON text as a value, or the text itself when it is not JSON (``None`` stays ``None``).

    JSON nested deeper than `MAX_JSON_NESTING_DEPTH` stays text too, so what shows it (a trace, a UI)
    never recurses through it.
    """
    if text is None:
        return None
    try:
        return load_json(text)
    except ValueError:
        return text


def parse_tool_arguments(arguments: str, *, tool_name: str) -> dict[str, Any]:
    """Return a tool call's arguments as a dict, or raise the error the model should see.

    The arguments must be strict JSON (``NaN`` and ``Infinity`` are not) holding an object. Blank text
    counts as no arguments, as some providers send it for a tool without parameters.

    Args:
        arguments: The call's arguments as the model wrote them (`AgentToolCall.arguments`).
        tool_name: The tool's name, for the error.

    Returns:
        The arguments.

    Raises:
        ToolExecutionError: ``arguments must be a JSON object``, followed by what the text is instead, or
            ``the arguments of '<tool>' nest too deeply`` when their arrays and objects nest deeper than
            `MAX_JSON_NESTING_DEPTH`. Raised from `execute_deferred_tool_call`, it records the call
            `failed` with that message, before the tool runs.
    """
    if not arguments.strip():
        return {}
    try:
        parsed: object = load_json(arguments, parse_constant=_refuse_constant)
    except JsonNestingError as error:
        raise ToolExecutionError(f"the arguments of {tool_name!r} nest too deeply: {error}") from None
    except ValueError as error:
        raise ToolExecutionError(
            f"arguments must be a JSON object; the arguments of {tool_name!r} are not strict JSON ({error})"
        ) from error
    if not isinstance(parsed, dict):
        kind = _JSON_KINDS.get(type(parsed), "null")
        raise ToolExecutionError(
            f"arguments must be a JSON object; the arguments of {tool_name!r} are a JSON {kind}"
        )
    return cast(dict[str, Any], parsed)


_JSON_KINDS: dict[type, str] = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")
