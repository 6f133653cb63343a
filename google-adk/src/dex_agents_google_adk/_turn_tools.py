"""ADK tools that exist only as a declaration: the session's built-ins and an `McpToolSource`'s tools.

The runner offers these tools to the model next to the application's own, as ADK tools whose declaration
is the tool's JSON Schema, so ADK (and the gate) treat their calls like any other: the gate defers every
call. None of them ever runs inside ADK: the session carries out a built-in's call itself, and an MCP
source's call runs in its tool Step through `McpToolSource.call_tool`.

A tool declared with no schema is a *stand-in*: ADK lists it among the agent's tools, so a paused
invocation can hand over the recorded result of an earlier call to it, but it is never offered to the
model (ADK sends only tools with a declaration). The runner adds one when a call of the turn named an MCP
tool that the source no longer lists, such as after a Worker restart while the server was down.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from google.adk.features import FeatureName, is_feature_enabled
from google.adk.tools._gemini_schema_util import _to_gemini_schema  # pyright: ignore[reportPrivateUsage]
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

__all__ = ["DeclaredTool", "DeclaredToolKind"]

DeclaredToolKind = Literal["built_in", "mcp"]
"""Who carries out a declared tool's calls: the session (a built-in) or the runner's `McpToolSource`."""


class DeclaredTool(BaseTool):
    """A tool the model is offered by its JSON Schema, whose calls the session routes.

    Args:
        name: The tool's name, as the model calls it.
        description: What the tool does, for the model.
        parameters_json_schema: The JSON Schema of its arguments; `None` for a stand-in that the model is
            not offered.
        kind: Whether the session (``built_in``) or the runner's MCP source (``mcp``) carries out its calls.
    """

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters_json_schema: Mapping[str, Any] | None,
        kind: DeclaredToolKind,
    ) -> None:
        super().__init__(name=name, description=description)
        self.kind: DeclaredToolKind = kind
        self._schema = None if parameters_json_schema is None else dict(parameters_json_schema)

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        if self._schema is None:
            return None
        # The declaration ADK's own McpTool builds for the same schema, so both MCP paths look alike to
        # the model.
        if is_feature_enabled(FeatureName.JSON_SCHEMA_FOR_FUNC_DECL):
            return types.FunctionDeclaration(
                name=self.name, description=self.description, parameters_json_schema=self._schema
            )
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters=_to_gemini_schema(self._schema)
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Refuse to run: the gate answers every call, and the session routes it.

        Raises:
            RuntimeError: Always.
        """
        del args, tool_context
        raise RuntimeError(
            f"{self.name!r} runs only through a Dex session: the session carries out its calls, never ADK"
        )
