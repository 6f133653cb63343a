"""The tools of an `McpToolSource` as tools of the runner's in-process MCP server, for one CLI run.

A server in `ClaudeAgentOptions.mcp_servers` is the CLI's own: its calls run inline, at least once, under
Claude Code's permission system. The tools of an `McpToolSource` given to the runner are the runner's
instead. Their calls go through the runner's hook like any tool of the user: a `read` runs inline here,
through `McpToolSource.call_tool` with the same idempotency key a tool Step would send, and every other call
becomes a Step whose `DeferredToolCall` the source builds (policy and `tool_source_reference`).

The source has no call outside a tool Step, so an inline read gets a `DeferredToolExecution` of its own:
the model's tool use ID, the turn's events and heartbeat, and no task polling by the session (a task the
server starts is polled inside the call, bounded by the source's `task_wait_timeout`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from claude_agent_sdk import SdkMcpTool
from dex_agents import AgentToolCall, ToolCallStatus
from dex_agents.mcp import McpToolCallInterruptedError, McpToolDefinition, McpToolSource
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
)

from dex_agents_claude_agent_sdk._shim_server import current_tool_use_id

__all__ = ["mcp_sdk_tool", "source_policy"]

# `deferred_tool_call` wants a call ID; the policy does not depend on it.
_POLICY_PROBE_ID = "policy"


def source_policy(source: McpToolSource, turn: AgentTurnContext, name: str) -> ToolPolicy:
    """The policy the source gives its tool ``name`` in ``turn``, as its deferred calls will carry it."""
    return source.deferred_tool_call(
        turn, tool_call_id=_POLICY_PROBE_ID, tool_name=name, arguments="{}"
    ).policy


def mcp_sdk_tool(
    source: McpToolSource, definition: McpToolDefinition, turn: AgentTurnContext
) -> SdkMcpTool[Any]:
    """Return the SDK tool the CLI is offered for one of the source's tools in ``turn``.

    Its handler is the inline run of a read: one ``tools/call`` through the source, with the key
    ``<flow>/<turn>/<tool use ID>`` in ``_meta``. A failure becomes an error result the model reads.
    """

    async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        tool_use_id = current_tool_use_id()
        if not tool_use_id:
            return _error(f"{definition.name} was not run: the Claude Code CLI did not name the tool use")
        call = source.deferred_tool_call(
            turn, tool_call_id=tool_use_id, tool_name=definition.name, arguments=json.dumps(arguments)
        )
        try:
            outcome = await source.call_tool(_inline_execution(turn, call))
        except ToolExecutionError as error:
            return _error(str(error))
        except McpToolCallInterruptedError as error:
            return _error(f"{definition.name} was sent but no result came back: {error}")
        if not isinstance(outcome, ToolExecutionResult):
            return _error(
                f"{definition.name} answered {type(outcome).__name__}, which an inline read cannot use"
            )
        return {"content": [{"type": "text", "text": outcome.output}]}

    return SdkMcpTool(
        name=definition.name,
        description=definition.description,
        input_schema=_object_schema(definition.input_schema),
        handler=handler,
    )


def _inline_execution(turn: AgentTurnContext, call: DeferredToolCall) -> DeferredToolExecution:
    record = AgentToolCall(
        tool_call_id=call.tool_call_id,
        turn_id=turn.turn_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        effect=call.policy.effect,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
        tool_source_reference=call.tool_source_reference,
    )
    return DeferredToolExecution(
        flow_id=turn.flow_id,
        tool_call=record,
        idempotency_key=f"{turn.flow_id}/{turn.turn_id}/{call.tool_call_id}",
        attempt=turn.attempt,
        events=turn.events,
        heartbeat_function=turn.heartbeat_function,
        checkpoint_function=_keep_no_checkpoint,
    )


async def _keep_no_checkpoint(checkpoint: str) -> None:
    # A retried RunModel runs the whole CLI run again, reads included, so a task handle has no later reader.
    del checkpoint


def _object_schema(schema: Mapping[str, object]) -> dict[str, Any]:
    # The SDK reads a schema as JSON Schema only when it has "type" and "properties"; else as {name: type}.
    fields = dict(schema)
    fields.setdefault("type", "object")
    fields.setdefault("properties", {})
    return cast(dict[str, Any], fields)


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "is_error": True}
