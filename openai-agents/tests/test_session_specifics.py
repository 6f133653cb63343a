"""OpenAI Agents SDK specifics through a whole session: devserver, Worker child, real agent loop."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from dex_agents import (
    TURN_CANCELLED_NOTE_HEADER,
    AgentEventType,
    AgentSessionClient,
    MessageRole,
)
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    run_mcp_inventory_scenario,
    stored_calls_without_result,
    text_by_model_step,
    wait_until,
)
from dex_agents.testing.matrix import wait_for_turn_end

from dex_agents_openai_agents import HANDOFF_EVENT_TYPE, HOSTED_MCP_APPROVED_RESULT
from tests.matrix_spec import PACKAGE_DIR
from tests.specifics_agents import build_flows, mcp_log_path

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Session:
    stack: AgentTestStack
    plain: AgentSessionClient
    triage: AgentSessionClient
    guarded: AgentSessionClient
    mcp: AgentSessionClient
    hosted: AgentSessionClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    flows = build_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("specifics"), flows, "tests.specifics_worker", worker_cwd=PACKAGE_DIR
    ) as stack:
        await stack.start_worker()
        yield Session(stack, *(stack.sessions(flow) for flow in flows))


async def test_a_handoff_sums_both_model_calls_and_the_next_agent_finishes_the_turn(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("handoff")
    await session.triage.start_session(session_id, "Is order A-1 paid?")
    snapshot = await wait_for_turn_end(session.triage, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    # Triage and billing in the first RunModel, billing alone after the tool: three model calls.
    assert snapshot.usage.model_calls == 3
    assert snapshot.usage.input_tokens == 11 + 13 + 17
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "RunModel",
    ]
    assert snapshot.messages[-1].text == "Billing: order A-1 is paid."
    assert [m.tool_name for m in snapshot.messages if m.role is MessageRole.TOOL] == [
        "transfer_to_billing",
        "lookup_order",
    ]
    assert "Billing here, checking A-1." in [m.text for m in snapshot.messages]
    events = await read_agent_events(session.triage, session_id)
    [handoff] = [json.loads(event.payload) for event in events if event.type == HANDOFF_EVENT_TYPE]
    assert (handoff["source_agent"], handoff["target_agent"]) == ("triage", "billing")
    assert [(c["agent"], c["input_tokens"]) for c in handoff["model_calls"]] == [
        ("triage", 11),
        ("billing", 13),
    ]
    usage_events = [json.loads(e.payload) for e in events if e.type == AgentEventType.USAGE_RECORDED]
    assert [u["recorded"]["model_calls"] for u in usage_events] == [2, 1]


async def test_a_tripped_guardrail_ends_the_turn_with_a_clear_last_turn_error(session: Session) -> None:
    session_id = session.stack.new_session_id("guardrail")
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(text="The password is hunter2.")], [ScriptedResponse(text="Hello!")]]
    )
    await session.guarded.start_session(session_id, "Tell me the admin password")
    failed = await wait_for_turn_end(session.guarded, session_id, 1)

    assert failed.state is not None
    assert failed.state.last_turn_error == "input guardrail 'no_passwords' tripped"
    assert all("hunter2" not in (message.text or "") for message in failed.messages)
    # The session goes on: the next message starts a turn that completes.
    assert await session.guarded.send_user_message(session_id, "Hi")
    done = await wait_for_turn_end(session.guarded, session_id, 2)
    assert done.state is not None and done.state.last_turn_error is None
    assert done.messages[-1].text == "Hello!"


async def test_live_text_deltas_add_up_to_the_stored_answer_per_model_call(session: Session) -> None:
    session_id = session.stack.new_session_id("deltas")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me check.", tool_calls=(read,)),
                ScriptedResponse(text="It shipped today."),
            ]
        ],
    )
    await session.plain.start_session(session_id, "Where is A-1?")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)

    events = await read_agent_events(session.plain, session_id)
    assert list(text_by_model_step(events).values()) == ["Let me check.", "It shipped today."]
    stored = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT and m.text]
    assert stored == ["Let me check.", "It shipped today."]


async def test_mcp_tools_run_one_tools_call_per_tool_step_with_effects_from_annotations(
    session: Session,
) -> None:
    # The shared scenario asserts the effects, the approvals of set_stock (trusted, destructive) and
    # order_more (unclassified), one tools/call per tool Step beside any tools/list, and the Step shape.
    session_id = session.stack.new_session_id("mcp")
    log = mcp_log_path(session.stack.state_dir)
    run = await run_mcp_inventory_scenario(session.mcp, session.stack, session_id, log)

    assert run.snapshot.messages[-1].text == "Stock updated."


async def test_a_turn_cancelled_during_its_model_call_keeps_its_own_items_and_the_next_turn_sees_them(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("cancel")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1", output="A-1 shipped on Monday")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me check.", tool_calls=(read,)),
                ScriptedResponse(block_until_cancelled=True),
            ],
            [ScriptedResponse(text="It shipped on Monday.")],
        ],
    )
    invocations = session.stack.invocations
    await session.plain.start_session(session_id, "Where is A-1?")
    await wait_until("the second model call", lambda: len(invocations.model_calls(session_id)) == 2)

    assert await session.plain.cancel_turn(session_id, "turn-1")
    cancelled = await wait_for_turn_end(session.plain, session_id, 1)

    # The Runner's streamed model call was cancelled inside the scripted model, not left running.
    await wait_until("the model call's cancellation", lambda: invocations.cancelled_model_calls(session_id))
    turn = [(m.role, m.text, m.tool_call_id, m.tool_output) for m in cancelled.messages]
    assert turn == [
        (MessageRole.USER, "Where is A-1?", None, None),
        (MessageRole.ASSISTANT, "Let me check.", None, None),
        (MessageRole.ASSISTANT, None, "read-1", None),
        (MessageRole.TOOL, None, "read-1", "A-1 shipped on Monday"),
    ]
    assert all(TURN_CANCELLED_NOTE_HEADER not in (m.text or "") for m in cancelled.messages)
    events = await read_agent_events(session.plain, session_id)
    assert [e.type for e in events].count(AgentEventType.TURN_CANCELLED) == 1
    assert await session.plain.send_user_message(session_id, "When?")
    done = await wait_for_turn_end(session.plain, session_id, 2)
    assert done.messages[-1].text == "It shipped on Monday."
    assert stored_calls_without_result(done.messages) == []
    [next_call] = invocations.model_calls(session_id, "turn-2")
    assert next_call.model_input[1:4] == (
        "assistant: Let me check.",
        'assistant calls lookup_order {"order_id": "A-1"} [read-1]',
        "tool lookup_order [read-1]: A-1 shipped on Monday",
    )


async def test_a_hosted_mcp_approval_waits_through_a_worker_kill_and_the_provider_runs_the_approved_call(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("hosted-mcp")
    client = session.hosted
    await client.start_session(session_id, "Delete branch old")
    interrupt = await client.wait_for_interrupt(session_id)
    assert interrupt is not None
    assert (interrupt.tool_name, json.loads(interrupt.arguments)) == ("delete_branch", {"branch": "old"})

    # The approval waits in the session, not in the Worker: a replacement answers it.
    session.stack.kill_workers()
    await session.stack.start_worker()
    assert await client.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True)
    first = await wait_for_turn_end(client, session_id, 1)

    assert first.state is not None and first.state.last_turn_error is None
    page = await client.list_agent_messages(session_id, include_framework_items=True)
    items = [json.loads(m.framework_item) for m in page.messages]
    assert [item.get("type") for item in items[1:]] == [
        "message",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "message",
    ]
    assert items[3]["approve"] is True
    # The hosted tool's result is what the provider returned after the approval.
    assert items[4]["output"] == "branch old deleted"
    assert first.messages[3].tool_output == HOSTED_MCP_APPROVED_RESULT
    assert first.messages[-1].text == "Deleted branch old."
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "ResumeTurn",
        "RunModel",
    ]

    # A rejection reaches the model as the request's reason; nothing runs at the provider.
    assert await client.send_user_message(session_id, "And the new one?")
    again = await client.wait_for_interrupt(session_id)
    assert again is not None and again.interrupt_id != interrupt.interrupt_id
    assert await client.resolve_interrupt(
        session_id, again.interrupt_id, approved=False, rejection_message="Keep that branch."
    )
    second = await wait_for_turn_end(client, session_id, 2)
    assert second.messages[-1].text == "Not deleted: Keep that branch."
    assert [m.tool_output for m in second.messages if m.role is MessageRole.TOOL] == [
        HOSTED_MCP_APPROVED_RESULT,
        "Keep that branch.",
    ]
