"""What the model is offered for an MCP tool, and the reference a tool Step calls it by."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from dex_agents.runner import ToolPolicy
from dex_agents.values import ToolEffect

__all__ = [
    "McpToolDefinition",
    "McpToolReference",
    "TaskSupport",
    "agent_tool_name",
    "decode_json_object",
    "is_model_tool_name",
]

TaskSupport = Literal["forbidden", "optional", "required"]
_TASK_SUPPORT: frozenset[str] = frozenset({"forbidden", "optional", "required"})
_MODEL_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_REFERENCE_SOURCE = "mcp"


def agent_tool_name(server_name: str, mcp_name: str) -> str:
    """Return the name the model sees for tool ``mcp_name`` of server ``server_name``."""
    return f"{server_name}__{mcp_name}"


def decode_json_object(text: str | None) -> dict[str, Any] | None:
    """Return ``text`` as a JSON object, or `None` when it is empty, not JSON, or not an object."""
    if not text:
        return None
    try:
        value: object = json.loads(text)
    except ValueError:
        return None
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def is_model_tool_name(name: str) -> bool:
    """Whether OpenAI and Anthropic models accept ``name`` as a tool name (1 to 64 of ``A-Za-z0-9_-``)."""
    return _MODEL_TOOL_NAME.match(name) is not None


@dataclass(frozen=True)
class McpToolDefinition:
    """One MCP tool as an agent tool: what a runner offers its model, with the JSON schema of its arguments.

    Attributes:
        name: ``<server>__<tool>``, the name the model calls it by.
        description: What the tool does, for the model: the server's description, else its title.
        input_schema: The JSON schema of the arguments, as the server listed it.
        server_name: The server that has the tool.
        mcp_name: The tool's own name on that server.
        effect: The effect its annotations declare (`read` or `idempotent_write`), or `None` when they
            declare none or the server's annotations are not trusted.
        title: The tool's human-readable title, if the server gave one.
        task_support: The tool's ``execution.taskSupport`` (protocol 2025-11-25): ``forbidden``,
            ``optional`` or ``required``; `None` when the server declares none. A tool Step sends a
            ``required`` tool's call as a task on a connection that negotiated 2025-11-25.
        annotation_policy: The policy its annotations declare (`policy_from_mcp_annotations`: the effect,
            and an approval for a destructive tool), or `None` when they declare no effect or the server's
            annotations are not trusted.
    """

    name: str
    description: str
    input_schema: Mapping[str, object]
    server_name: str
    mcp_name: str
    effect: ToolEffect | None
    title: str | None = None
    task_support: TaskSupport | None = None
    annotation_policy: ToolPolicy | None = None


@dataclass(frozen=True)
class McpToolReference:
    """The server and MCP tool name a tool call record keeps, so the tool Step needs no listing.

    Attributes:
        server_name: The server's name in the Worker's configuration.
        mcp_name: The tool's name on that server.
        task_support: The tool's ``execution.taskSupport`` when the listing declared one, so the tool Step
            knows whether to send the call as a 2025-11-25 task without listing the tool.
    """

    server_name: str
    mcp_name: str
    task_support: TaskSupport | None = None

    def encode(self) -> str:
        """Return the reference as `DeferredToolCall.tool_source_reference` text."""
        value = {"source": _REFERENCE_SOURCE, "server": self.server_name, "tool": self.mcp_name}
        if self.task_support is not None:
            value["task_support"] = self.task_support
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, text: str | None) -> McpToolReference | None:
        """Read a reference this module wrote; any other text, or none, reads as `None`."""
        fields = decode_json_object(text)
        if fields is None:
            return None
        server, tool = fields.get("server"), fields.get("tool")
        if (
            fields.get("source") != _REFERENCE_SOURCE
            or not isinstance(server, str)
            or not isinstance(tool, str)
        ):
            return None
        if not server or not tool:
            return None
        support: object = fields.get("task_support")
        # A reference written before task support was recorded, or with a value this code does not know,
        # calls the tool plainly, as before.
        task_support = cast(TaskSupport, support) if support in _TASK_SUPPORT else None
        return cls(server, tool, task_support)
