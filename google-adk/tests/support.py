"""Framework-level test helpers: the public scripted model, answering in call order and keeping what it saw.

The framework tests drive `GoogleAdkRunner` the way the session does with `dex_agents.testing`'s
`SessionSide` (stored messages in, outcomes out, final tool call records on resume), without a server, so
each framework behaviour is checked on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from dex_agents.testing import mcp_inventory_server_command
from google.adk.models.llm_request import LlmRequest
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from google.genai import types
from mcp import StdioServerParameters
from pydantic import Field

from dex_agents_google_adk.testing import ScriptedAnswer, ScriptedLlm


class CannedLlm(ScriptedLlm):
    """The public `ScriptedLlm` answering call ``n`` of this object with ``responses[n]``.

    Counting calls instead of the responses in the input lets a test check a model Step that ADK or a
    callback changed (a response from a cache, a structured answer), and keeps what every call saw.
    """

    model: str = "canned"
    seen: list[list[types.Content]] = Field(default_factory=list[list[types.Content]])
    offered_tools: list[list[str]] = Field(default_factory=list[list[str]])
    instructions_seen: list[str] = Field(default_factory=list[str])
    declarations: list[dict[str, object]] = Field(default_factory=list[dict[str, object]])
    """The JSON Schema of each declared function's arguments, by name, per call."""

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def choose_response(self, llm_request: LlmRequest) -> ScriptedAnswer:
        self.seen.append([content.model_copy(deep=True) for content in llm_request.contents])
        self.offered_tools.append(sorted(llm_request.tools_dict))
        self.declarations.append(
            {
                declaration.name or "": declaration.parameters_json_schema
                for tool in llm_request.config.tools or ()
                for declaration in getattr(tool, "function_declarations", None) or ()
            }
        )
        instruction = cast(object, llm_request.config.system_instruction)  # pyright: ignore[reportUnknownMemberType]
        self.instructions_seen.append(str(instruction or ""))
        responses = self.responses or []
        if len(self.seen) > len(responses):
            raise AssertionError(f"unexpected model call #{len(self.seen)}")
        return responses[len(self.seen) - 1]

    def responses_seen(self, call_number: int) -> list[dict[str, object]]:
        """The function responses in the input of model call ``call_number`` (one-based), in order."""
        return [
            dict(part.function_response.response or {})
            for content in self.seen[call_number - 1]
            for part in content.parts or ()
            if part.function_response is not None
        ]

    def texts_seen(self, call_number: int) -> list[str]:
        return [
            part.text for content in self.seen[call_number - 1] for part in content.parts or () if part.text
        ]


def call(name: str, arguments: Mapping[str, object], tool_call_id: str | None = None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=dict(arguments), id=tool_call_id))


def respond(*parts: types.Part | str) -> types.Content:
    return types.Content(
        role="model", parts=[types.Part(text=part) if isinstance(part, str) else part for part in parts]
    )


def inventory_toolset(log: Path) -> McpToolset:
    """An ADK toolset on the test kit's MCP inventory server, which logs every request to ``log``."""
    server = mcp_inventory_server_command(log)
    parameters = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env))
    return McpToolset(connection_params=StdioConnectionParams(server_params=parameters, timeout=30))
