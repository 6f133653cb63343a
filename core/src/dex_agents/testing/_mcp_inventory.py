"""The adapters' shared MCP session scenario: an inventory server's tools with effects from annotations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dex_agents import AgentSessionClient, AgentSnapshot, AgentToolCall, ToolEffect
from dex_agents.testing._history import executed_step_types
from dex_agents.testing._matrix_spec import wait_for_turn_end
from dex_agents.testing._script import ScriptedResponse, ScriptedToolCall
from dex_agents.testing._waiting import wait_for_agent_snapshot

if TYPE_CHECKING:
    from pathlib import Path

    from dex_agents.testing._stack import AgentTestStack

__all__ = ["McpInventoryRun", "run_mcp_inventory_scenario"]

_TOOLS_LIST = "tools/list"
_EXPECTED_EFFECTS = {
    "count_items": ToolEffect.READ,
    "set_stock": ToolEffect.IDEMPOTENT_WRITE,
    "order_more": ToolEffect.UNCLASSIFIED,
}
_EXPECTED_CALLS = ["tools/call count_items", "tools/call order_more", "tools/call set_stock"]
_APPROVED_CALLS = ("set-1", "order-1")
# AwaitToolApproval is left out: it runs once or twice, depending on whether the second approval arrives
# before the Step woken by the first one ran.
_EXPECTED_STEP_TYPES = [
    "StartAgentSession",
    "RunModel",
    "CallTool",
    "CallTool",
    "CallSingleAttemptTool",
    "ResumeTurn",
    "RunModel",
]
_APPROVAL_STEP = "AwaitToolApproval"


@dataclass(frozen=True)
class McpInventoryRun:
    """What :func:`run_mcp_inventory_scenario` leaves for an adapter's own final assertions.

    Attributes:
        snapshot: The session's snapshot once the turn ended (without a turn error).
        requests: Every line of the server's request log at that point, in order, ``tools/list`` included.
    """

    snapshot: AgentSnapshot
    requests: tuple[str, ...]


def _log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def run_mcp_inventory_scenario(
    sessions: AgentSessionClient, stack: AgentTestStack, session_id: str, log: Path
) -> McpInventoryRun:
    """Run one turn of three MCP tool calls and check their effects, approvals, requests and Steps.

    The session's Flow exposes an MCP server's tools, with the server's annotations trusted and no explicit
    tool policies, so each effect comes from the tool's annotations or the session's default. The server
    must offer:

    - ``count_items(sku: str)`` annotated ``readOnlyHint=True`` (a ``read``, which runs at once),
    - ``set_stock(sku: str, count: int)`` annotated ``idempotentHint=True`` and ``destructiveHint=True`` (an
      ``idempotent_write`` that still waits for approval, as a trusted destructive tool does),
    - ``order_more(sku: str)`` without hints (``unclassified``, so it waits for approval),

    and append one line per request it serves to ``log``: ``tools/list``, or ``tools/call <tool>``. The
    Worker's requests alone should reach ``log``.

    The scripted model asks for all three calls at once (``count-1``, ``set-1``, ``order-1``, each with
    ``sku="A-1"``), then answers "Stock updated.". The scenario starts the session, waits until the
    approvals of ``set_stock`` and ``order_more`` are pending while ``count_items`` is final, asserts the
    three effects and that neither waiting call has reached the server, approves ``set-1`` and then
    ``order-1``, and waits for the turn's end. It then asserts that the turn has no error, that the log
    holds exactly one ``tools/call`` per tool beside any number of ``tools/list`` (a client may list the
    tools on each tool Step's connection), and the turn's Step shape: two ``CallTool`` Steps (the read, and
    ``set_stock`` after its approval) and one ``CallSingleAttemptTool``, with one or two
    ``AwaitToolApproval`` Steps (two when the second approval arrives after the Step the first one woke).

    Args:
        sessions: The session client of the MCP agent's Flow.
        stack: The stack whose Worker serves that Flow; its script store gets the session's script.
        session_id: A new session ID, such as ``stack.new_session_id("mcp")``.
        log: The server's request log.

    Returns:
        The ended turn's snapshot and the log's lines, for the adapter's own assertions.
    """
    calls = (
        ScriptedToolCall("count_items", {"sku": "A-1"}, "count-1"),
        ScriptedToolCall("set_stock", {"sku": "A-1", "count": 9}, "set-1"),
        ScriptedToolCall("order_more", {"sku": "A-1"}, "order-1"),
    )
    script = [ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Stock updated.")]
    stack.scripts.set_turns(session_id, [script])
    await sessions.start_session(session_id, "Check A-1, set it to 9, order more")

    # The read ran; the destructive write and the unclassified call both wait for a person.
    def waiting(snapshot: AgentSnapshot) -> dict[str, AgentToolCall] | None:
        records = {call.tool_name: call for call in snapshot.tool_calls}
        pending = {interrupt.tool_call_id for interrupt in snapshot.pending_interrupts}
        read = records.get("count_items")
        return records if read is not None and read.is_final and set(_APPROVED_CALLS) <= pending else None

    records = await wait_for_agent_snapshot(
        sessions, session_id, waiting, description="the approvals of set_stock and order_more"
    )
    effects = {name: record.effect for name, record in records.items()}
    assert effects == _EXPECTED_EFFECTS, f"effects from the tools' annotations: {effects}"
    early = [line for line in _log_lines(log) if line in ("tools/call set_stock", "tools/call order_more")]
    assert not early, f"a call reached the server before its approval: {early}"
    for tool_call_id in _APPROVED_CALLS:
        approved = await sessions.resolve_interrupt(session_id, tool_call_id, approved=True)
        assert approved, f"approving {tool_call_id} failed"
    snapshot = await wait_for_turn_end(sessions, session_id, 1)

    assert snapshot.state is not None, "the ended turn's snapshot has no state"
    assert snapshot.state.last_turn_error is None, f"the turn failed: {snapshot.state.last_turn_error}"
    requests = tuple(_log_lines(log))
    calls_made = sorted(line for line in requests if line != _TOOLS_LIST)
    assert calls_made == _EXPECTED_CALLS, f"expected one tools/call per tool Step; the log: {requests}"
    step_types = executed_step_types(await stack.read_step_history(session_id))
    approval_steps = step_types.count(_APPROVAL_STEP)
    others = sorted(step for step in step_types if step != _APPROVAL_STEP)
    assert others == sorted(_EXPECTED_STEP_TYPES), f"unexpected Step shape of the turn: {step_types}"
    assert approval_steps in (1, 2), f"expected one or two {_APPROVAL_STEP} Steps: {step_types}"
    return McpInventoryRun(snapshot, requests)
