"""Reading a tool call's arguments, the JSON object text a model wrote, and JSON text shown as a value."""

from __future__ import annotations

import json
from typing import Any, cast

from dex_agents.runner import ToolExecutionError

__all__ = ["parse_json_text", "parse_tool_arguments"]


def parse_json_text(text: str | None) -> Any:
    """Return JSON text as a value, or the text itself when it is not JSON (``None`` stays ``None``)."""
    if text is None:
        return None
    try:
        return json.loads(text)
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
        ToolExecutionError: ``arguments must be a JSON object``, followed by what the text is instead.
            Raised from `execute_deferred_tool_call`, it records the call `failed` with that message.
    """
    if not arguments.strip():
        return {}
    try:
        parsed: object = json.loads(arguments, parse_constant=_refuse_constant)
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
