"""The AG-UI endpoint's pure parts: reading a RunAgentInput and its resume entries, and the event mapping."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.values import (
    AgentInterrupt,
    AgentMessage,
    AgentSessionStatus,
    AgentSnapshot,
    AgentState,
    AgentToolCall,
    AgentUsage,
    InterruptKind,
    MessageRole,
    ToolCallStatus,
    ToolEffect,
)
from dex_agents.web._ag_ui import (
    AgUiTranslator,
    browser_tools_of_turn,
    encode_event,
    messages_snapshot,
    parse_ag_ui_request,
    resume_answers,
)
from dex_agents.web._requests import BadRequestError
from dex_agents.web._ui_translator import BrowserToolState

APPROVAL = AgentInterrupt(
    "refund-1", InterruptKind.TOOL_APPROVAL, "refund-1", "refund", '{"order": "A-1"}', "t", None
)
QUESTION = AgentInterrupt(
    "refund-1-input-1",
    InterruptKind.QUESTION,
    "refund-1",
    "refund",
    "{}",
    "t",
    "2030-01-01T00:00:00Z",
    question="Which card?",
    choices=("visa", "amex"),
    allows_free_text=False,
)


def _record(call_id: str, status: ToolCallStatus) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name="refund",
        arguments="{}",
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=status,
    )


def _message(sequence: int, role: MessageRole, text: str | None, **tool: Any) -> AgentMessage:
    return AgentMessage(
        sequence=sequence,
        turn_id=tool.pop("turn_id", "turn-0"),
        role=role,
        text=text,
        tool_call_id=tool.get("tool_call_id"),
        tool_name=tool.get("tool_name"),
        tool_arguments=tool.get("tool_arguments"),
        tool_output=tool.get("tool_output"),
        framework_item="",
        created_at="t",
    )


def _snapshot(*interrupts: AgentInterrupt, messages: tuple[AgentMessage, ...] = ()) -> AgentSnapshot:
    state = AgentState(AgentSessionStatus.RUNNING_TOOLS, 1, "turn-1", 1, None)
    records = (
        _record("lookup-1", ToolCallStatus.SUCCEEDED),
        _record("refund-1", ToolCallStatus.AWAITING_APPROVAL),
    )
    return AgentSnapshot(state, messages, interrupts, records, AgentUsage(), 0)


def _input(**fields: Any) -> dict[str, Any]:
    return {"threadId": "s-1", "runId": "r-1", "messages": [], **fields}


def test_only_a_last_user_message_is_sent() -> None:
    user = {"id": "u1", "role": "user", "content": "Refund A-1"}
    assistant = {"id": "a1", "role": "assistant", "content": "Checking."}
    assert parse_ag_ui_request(_input(messages=[assistant, user]), "s-1").user_text == "Refund A-1"
    assert parse_ag_ui_request(_input(messages=[user, assistant]), "s-1").user_text is None
    parts = {
        "id": "u2",
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert parse_ag_ui_request(_input(messages=[parts]), "s-1").user_text == "ab"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"threadId": "s-1"}, "RunAgentInput"),
        (_input(threadId="s-2"), "threadId must be the session ID"),
        (
            _input(
                messages=[{"id": "u", "role": "user", "content": "hi"}],
                resume=[{"interruptId": "refund-1", "status": "cancelled"}],
            ),
            "not both",
        ),
    ],
)
def test_bad_inputs_answer_400(body: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequestError, match=message) as raised:
        parse_ag_ui_request(body, "s-1")
    assert raised.value.status_code == 400


def test_resume_entries_become_answers_to_pending_interrupts_only() -> None:
    entries = [
        {"interruptId": "refund-1", "status": "resolved", "payload": {"approved": False, "reason": "no"}},
        {"interruptId": "refund-1-input-1", "status": "resolved", "payload": {"answer": "visa"}},
        {"interruptId": "gone-1", "status": "resolved", "payload": {"approved": True}},
    ]
    request = parse_ag_ui_request(_input(resume=entries), "s-1")
    answers = resume_answers(request, _snapshot(APPROVAL, QUESTION))
    assert [(a.interrupt_id, a.approved, a.reason, a.answer) for a in answers] == [
        ("refund-1", False, "no", None),
        ("refund-1-input-1", True, None, "visa"),
    ]
    cancelled = parse_ag_ui_request(
        _input(resume=[{"interruptId": "refund-1", "status": "cancelled"}]), "s-1"
    )
    [rejected] = resume_answers(cancelled, _snapshot(APPROVAL))
    assert rejected.approved is False and rejected.answer is None


@pytest.mark.parametrize(
    ("entry", "status"),
    [
        ({"interruptId": "refund-1", "status": "resolved", "payload": "yes"}, 400),
        ({"interruptId": "refund-1-input-1", "status": "resolved", "payload": {"answer": " "}}, 400),
        ({"interruptId": "refund-1-input-1", "status": "resolved", "payload": "mastercard"}, 409),
    ],
)
def test_a_payload_that_does_not_answer_its_interrupt_is_refused(entry: dict[str, Any], status: int) -> None:
    request = parse_ag_ui_request(_input(resume=[entry]), "s-1")
    with pytest.raises(BadRequestError) as raised:
        resume_answers(request, _snapshot(APPROVAL, QUESTION))
    assert raised.value.status_code == status


def test_chunks_become_ag_ui_events() -> None:
    translator = AgUiTranslator("s-1", "r-1")
    chunks: list[dict[str, Any]] = [
        {"type": "start", "messageId": "dex-turn-1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-1"},
        {"type": "text-delta", "id": "text-1", "delta": ""},
        {"type": "text-delta", "id": "text-1", "delta": "Checking."},
        {"type": "text-end", "id": "text-1"},
        {"type": "tool-input-available", "toolCallId": "lookup-1", "toolName": "lookup", "input": {"o": 1}},
        {"type": "tool-output-available", "toolCallId": "lookup-1", "output": {"status": "shipped"}},
        {"type": "tool-output-denied", "toolCallId": "refund-1"},
        {"type": "finish-step"},
        {"type": "data-dex-plan", "id": "plan", "data": {"revision": 1}},
    ]
    events = [encode_event(event) for chunk in chunks for event in translator.on_chunk(chunk)]
    assert events == [
        '{"type":"STEP_STARTED","stepName":"model-call-1"}',
        '{"type":"TEXT_MESSAGE_START","messageId":"r-1-text-1","role":"assistant"}',
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"r-1-text-1","delta":"Checking."}',
        '{"type":"TEXT_MESSAGE_END","messageId":"r-1-text-1"}',
        '{"type":"TOOL_CALL_START","toolCallId":"lookup-1","toolCallName":"lookup"}',
        '{"type":"TOOL_CALL_ARGS","toolCallId":"lookup-1","delta":"{\\"o\\":1}"}',
        '{"type":"TOOL_CALL_END","toolCallId":"lookup-1"}',
        '{"type":"TOOL_CALL_RESULT","messageId":"lookup-1-result","toolCallId":"lookup-1",'
        '"content":"{\\"status\\":\\"shipped\\"}"}',
        '{"type":"TOOL_CALL_RESULT","messageId":"refund-1-result","toolCallId":"refund-1",'
        '"content":"The user rejected the call."}',
        '{"type":"STEP_FINISHED","stepName":"model-call-1"}',
        '{"type":"STATE_SNAPSHOT","snapshot":{"plan":{"revision":1}}}',
    ]


def test_a_turn_that_waits_finishes_the_run_with_its_interrupts() -> None:
    translator = AgUiTranslator("s-1", "r-1")
    translator.on_chunk(
        {"type": "finish", "finishReason": "tool-calls", "messageMetadata": {"dex": {"turn_id": "turn-1"}}}
    )
    [finished] = translator.finish(_snapshot(APPROVAL, QUESTION))
    data = finished.model_dump(by_alias=True, mode="json")
    assert data["outcome"]["type"] == "interrupt"
    approval, question = data["outcome"]["interrupts"]
    assert approval["id"] == "refund-1" and approval["reason"] == "tool_approval"
    assert approval["metadata"]["dex"]["arguments"] == {"order": "A-1"}
    assert question["message"] == "Which card?" and question["expiresAt"] == "2030-01-01T00:00:00Z"
    assert question["responseSchema"]["properties"]["answer"]["enum"] == ["visa", "amex"]


@pytest.mark.parametrize(("reason", "outcome"), [("stop", "success"), ("other", "cancelled")])
def test_the_finish_reason_decides_the_outcome(reason: str, outcome: str) -> None:
    translator = AgUiTranslator("s-1", "r-1")
    translator.on_chunk({"type": "finish", "finishReason": reason})
    [finished] = translator.finish(None)
    assert finished.model_dump(by_alias=True, mode="json")["outcome"] == {"type": outcome}


def test_a_failed_turn_ends_with_run_error_alone() -> None:
    translator = AgUiTranslator("s-1", "r-1")
    [error] = translator.on_chunk({"type": "error", "errorText": "the model failed"})
    translator.on_chunk({"type": "finish", "finishReason": "error"})
    assert encode_event(error) == '{"type":"RUN_ERROR","message":"the model failed","code":"turn_failed"}'
    assert translator.finish(None) == []


def test_the_resumed_run_knows_what_the_interrupted_one_showed() -> None:
    assert browser_tools_of_turn(_snapshot(APPROVAL, QUESTION), "turn-1") == {
        "lookup-1": BrowserToolState.OUTPUT,
        "refund-1": BrowserToolState.APPROVAL,
        "refund-1-input-1": BrowserToolState.INPUT,
    }


def test_the_messages_snapshot_leaves_the_running_turn_to_its_events() -> None:
    messages = (
        _message(1, MessageRole.USER, "Hi"),
        _message(2, MessageRole.ASSISTANT, "Hello."),
        _message(3, MessageRole.USER, "Refund A-1", turn_id="turn-1"),
        _message(
            4, MessageRole.ASSISTANT, None, turn_id="turn-1", tool_call_id="lookup-1", tool_name="lookup"
        ),
    )
    event = messages_snapshot(_snapshot(messages=messages), "turn-1")
    data = event.model_dump(by_alias=True, mode="json")["messages"]
    assert [(message["id"], message["role"], message.get("content")) for message in data] == [
        ("dex-message-1", "user", "Hi"),
        ("dex-message-2", "assistant", "Hello."),
        ("dex-message-3", "user", "Refund A-1"),
    ]
