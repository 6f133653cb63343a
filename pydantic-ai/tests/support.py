"""Short builders for the scripted `ModelResponse`s of the framework tests."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic_ai.messages import ModelResponse, TextPart, ThinkingPart, ToolCallPart


def tool_call(name: str, arguments: Mapping[str, object], tool_call_id: str) -> ToolCallPart:
    return ToolCallPart(name, json.dumps(dict(arguments)), tool_call_id=tool_call_id)


def respond(*parts: TextPart | ThinkingPart | ToolCallPart) -> ModelResponse:
    return ModelResponse(parts=list(parts))
