"""Hosted MCP approval requests as durable approvals.

A `HostedMCPTool` runs at the provider, inside the model call. When its server requires approval, the
Responses API returns an ``mcp_approval_request`` item instead of running the tool, and runs it only after
the next request carries an ``mcp_approval_response``. Without an ``on_approval_request`` callback the SDK
surfaces the request as an interruption, which `RunState.approve` / `RunState.reject` answer; on resume the
SDK writes the response item and calls the model, and the provider's ``mcp_call`` item then holds the
tool's result.

The runner defers each request as a tool call whose tool Step only records the decision (the tool itself
runs at the provider, in the next model call): approved and recorded `succeeded`, the SDK approves; every
other final record (rejected, failed, outcome unknown) is a rejection whose reason the model sees.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from agents import TResponseInputItem
from dex_agents.runner import (
    DEFAULT_REJECTION_TOOL_RESULT,
    AgentTurnContext,
    ToolPolicy,
    describe_tool_call_outcome,
)
from dex_agents.values import AgentToolCall, ToolCallStatus

__all__ = [
    "HOSTED_MCP_APPROVED_RESULT",
    "approval_response_item",
    "approval_response_output",
    "hosted_mcp_policy",
    "hosted_mcp_source_reference",
    "is_hosted_mcp_reference",
]

HOSTED_MCP_APPROVED_RESULT = "Approved: the provider runs this hosted MCP call in the next model call."
"""What the tool Step of an approved hosted MCP request records (the stored ``tool`` message's output)."""

_HOSTED_KEY = "hosted_mcp_server"


def hosted_mcp_source_reference(agent_name: str, server_label: str) -> str:
    """Return the record's source reference for a hosted MCP request: the agent and the server label."""
    return json.dumps({"agent": agent_name, _HOSTED_KEY: server_label}, separators=(",", ":"))


def is_hosted_mcp_reference(reference: str | None) -> bool:
    """Whether a record's source reference names a hosted MCP approval request."""
    if not reference:
        return False
    try:
        loaded: object = json.loads(reference)
    except json.JSONDecodeError:
        return False
    return isinstance(loaded, dict) and _HOSTED_KEY in cast(dict[str, object], loaded)


def hosted_mcp_policy(turn: AgentTurnContext, tool_name: str) -> ToolPolicy:
    """Return a hosted request's policy: the session's for the tool, else one that waits for approval.

    The provider asks only because the server's ``require_approval`` says so; only an explicit
    `ToolPolicy` in the session may answer for the user.
    """
    policy = turn.resolve_tool_policy(tool_name)
    if tool_name in turn.tool_policies or policy.is_approval_required:
        return policy
    return ToolPolicy(policy.effect, requires_approval=True)


def approval_response_item(record: AgentToolCall) -> TResponseInputItem:
    """Return the ``mcp_approval_response`` the SDK would write for a final record of a hosted request."""
    item: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": record.tool_call_id,
        "approve": record.status is ToolCallStatus.SUCCEEDED,
    }
    if record.status is not ToolCallStatus.SUCCEEDED:
        item["reason"] = describe_tool_call_outcome(record)
    return cast(TResponseInputItem, item)


def approval_response_output(item: Mapping[str, Any]) -> str:
    """Return the stored ``tool_output`` of an ``mcp_approval_response`` item.

    It equals `describe_tool_call_outcome` of the record that decided it: the approved text, or the
    rejection's reason.
    """
    if item.get("approve") is True:
        return HOSTED_MCP_APPROVED_RESULT
    reason = item.get("reason")
    if isinstance(reason, str):
        return reason
    return DEFAULT_REJECTION_TOOL_RESULT
