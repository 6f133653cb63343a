"""The MCP task source's pure rules: poll intervals, what it keeps between polls, what it asks the user."""

from datetime import timedelta
from typing import Any

import pytest

from dex_agents import QuestionAnswer, QuestionResolution, ToolTaskCanceller, ToolTaskPoller
from dex_agents.mcp import (
    DEFAULT_TASK_WAIT_TIMEOUT,
    TASK_STATUS_EVENT,
    TASKS_EXTENSION,
    McpHttpServer,
    McpToolSource,
)
from dex_agents.mcp._task_polling import first_poll_interval, next_poll_interval
from dex_agents.mcp._task_questions import input_response, read_task_question
from dex_agents.mcp._task_state import AskedRequest, TaskCheckpoint, TaskContinuation
from dex_agents.mcp._task_wire import parse_task


def test_the_extension_is_the_one_the_spec_names() -> None:
    assert TASKS_EXTENSION == "io.modelcontextprotocol/tasks"


@pytest.mark.parametrize(
    ("server_ms", "previous", "expected"),
    [
        (1500, 2, 4),  # the server's 2 s is shorter than double the last interval
        (5000, 1, 5),  # the server's is longer: it wins
        (None, 1, 2),  # no server interval: double
        (100, 20, 40),
        (1000, 40, 60),  # doubling stops at a minute
        (1000, 60, 60),
        (90_000, 60, 90),  # only the server's own interval may exceed a minute
        (0, None, 2),
    ],
)
def test_the_next_interval_is_the_servers_or_double_the_last_up_to_a_minute(
    server_ms: float | None, previous: int | None, expected: int
) -> None:
    assert next_poll_interval(server_ms, previous) == expected


def test_the_first_interval_is_the_servers_rounded_up_to_whole_seconds() -> None:
    assert [first_poll_interval(ms) for ms in (None, 0, -5, 1, 1000, 1001, 90_000, float("nan"))] == [
        1,
        1,
        1,
        1,
        1,
        2,
        90,
        1,
    ]


def test_a_checkpoint_reads_back_only_for_the_tool_that_wrote_it() -> None:
    saved = TaskCheckpoint("shipping", "ship_order", "task-1", 3)
    assert TaskCheckpoint.decode(saved.encode(), "shipping", "ship_order") == saved
    assert TaskCheckpoint.decode(saved.encode(), "shipping", "ship_with_carrier") is None
    assert TaskCheckpoint.decode(saved.encode(), "inventory", "ship_order") is None
    for other in (
        None,
        "",
        "task-1",
        "dex-agents/tool-task:task-1",
        "[1]",
        '{"source": "x", "task_id": "t"}',
    ):
        assert TaskCheckpoint.decode(other, "shipping", "ship_order") is None
    broken = saved.encode().replace('"poll_interval_seconds":3', '"poll_interval_seconds":true')
    assert TaskCheckpoint.decode(broken, "shipping", "ship_order") is None


def test_a_continuation_reads_back_only_when_this_source_wrote_it() -> None:
    asked = TaskContinuation(
        "input_required", AskedRequest("carrier-1", "ab" * 32), sent_at=12.5, declined=True
    )
    assert TaskContinuation.decode(asked.encode()) == asked
    assert TaskContinuation.decode(TaskContinuation("working").encode()) == TaskContinuation("working")
    for other in (None, "", "step-2", '{"status": "working"}', '{"source": "dex-agents.mcp/task"}'):
        assert TaskContinuation.decode(other) is None
    # A send time without the request it answered means nothing.
    stray = '{"source": "dex-agents.mcp/task", "status": "working", "sent_at": 3}'
    assert TaskContinuation.decode(stray) == TaskContinuation("working")


def _elicitation(
    properties: dict[str, Any], *, message: str = "Which carrier?", **params: Any
) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties},
            **params,
        },
    }


def test_one_form_elicitation_with_a_single_string_enum_or_boolean_field_becomes_a_question() -> None:
    text = read_task_question({"q-1": _elicitation({"carrier": {"type": "string"}})})
    assert text is not None and (text.key, text.field, text.kind, text.choices) == (
        "q-1",
        "carrier",
        "string",
        (),
    )
    assert len(text.fingerprint) == 64
    asked = text.to_input_request("c")
    assert (asked.question, asked.allows_free_text, asked.continuation) == ("Which carrier?", True, "c")

    enum = read_task_question({"q-1": _elicitation({"carrier": {"type": "string", "enum": ["DHL", "UPS"]}})})
    assert enum is not None and (enum.kind, enum.choices) == ("enum", ("DHL", "UPS"))
    assert not enum.to_input_request("c").allows_free_text
    titled = _elicitation({"carrier": {"type": "string", "oneOf": [{"const": "dhl", "title": "DHL"}]}})
    assert (question := read_task_question({"q-1": titled})) is not None and question.choices == ("dhl",)
    boolean = read_task_question({"q-1": _elicitation({"ship": {"type": "boolean"}})})
    assert boolean is not None and (boolean.kind, boolean.choices) == ("boolean", ("yes", "no"))


@pytest.mark.parametrize(
    "requests",
    [
        {},
        {"a": _elicitation({"x": {"type": "string"}}), "b": _elicitation({"y": {"type": "string"}})},
        {"a": _elicitation({"x": {"type": "string"}, "y": {"type": "string"}})},
        {"a": _elicitation({"count": {"type": "integer"}})},
        {"a": _elicitation({"email": {"type": "string", "format": "email"}})},
        {"a": _elicitation({"x": {"type": "string"}}, message="  ")},
        {"a": _elicitation({"x": {"type": "string", "enum": ["A", "A"]}})},
        {
            "a": {
                "method": "elicitation/create",
                "params": {"mode": "url", "message": "Log in", "url": "https://x"},
            }
        },
        {"a": {"method": "sampling/createMessage", "params": {"messages": []}}},
        {"a": {"method": "roots/list"}},
    ],
)
def test_any_other_input_request_is_not_asked(requests: dict[str, dict[str, Any]]) -> None:
    assert read_task_question(requests) is None


def test_a_different_request_under_the_same_key_has_another_fingerprint() -> None:
    first = read_task_question({"q-1": _elicitation({"carrier": {"type": "string"}})})
    second = read_task_question(
        {"q-1": _elicitation({"carrier": {"type": "string"}}, message="Which one now?")}
    )
    assert first is not None and second is not None and first.fingerprint != second.fingerprint


def test_the_resolution_becomes_the_elicitation_result_the_task_expects() -> None:
    boolean = read_task_question({"q-1": _elicitation({"ship": {"type": "boolean"}})})
    text = read_task_question({"q-1": _elicitation({"carrier": {"type": "string"}})})
    assert boolean is not None and text is not None
    assert input_response(boolean, QuestionAnswer("i", "q", "yes")) == {
        "action": "accept",
        "content": {"ship": True},
    }
    assert input_response(boolean, QuestionAnswer("i", "q", "no")) == {
        "action": "accept",
        "content": {"ship": False},
    }
    assert input_response(text, QuestionAnswer("i", "q", "DHL")) == {
        "action": "accept",
        "content": {"carrier": "DHL"},
    }
    declined = QuestionAnswer("i", "q", "No.", QuestionResolution.DECLINED)
    assert input_response(text, declined) == {"action": "decline"}
    expired = QuestionAnswer("i", "q", "question deadline passed", QuestionResolution.DEADLINE_PASSED)
    assert input_response(text, expired) == {"action": "cancel"}


def test_a_task_answer_must_carry_what_its_status_promises() -> None:
    base = {"taskId": "t", "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}
    assert parse_task({**base, "status": "working", "pollIntervalMs": 500}).poll_interval_ms == 500
    done = parse_task(
        {**base, "status": "completed", "result": {"content": [{"type": "text", "text": "ok"}]}}
    )
    assert done.result is not None and done.result.model_dump()["content"][0]["text"] == "ok"
    assert parse_task({**base, "status": "failed", "error": {"code": -32603, "message": "boom"}}).error == (
        -32603,
        "boom",
    )
    # A creation answer may say completed without its result; a tasks/get answer may not.
    assert parse_task({**base, "status": "completed"}, needs_outcome=False).result is None
    for broken in (
        {**base, "status": "completed"},
        {**base, "status": "failed"},
        {**base, "status": "failed", "error": {"message": "no code"}},
        {**base, "status": "paused"},
        {**base, "taskId": "", "status": "working"},
    ):
        with pytest.raises(ValueError):
            parse_task(broken)


def test_the_source_is_the_task_poller_and_canceller_a_runner_passes_its_calls_to() -> None:
    source = McpToolSource([McpHttpServer("shipping", "http://127.0.0.1:1/mcp")])
    assert isinstance(source, ToolTaskPoller) and isinstance(source, ToolTaskCanceller)
    assert source.task_wait_timeout == DEFAULT_TASK_WAIT_TIMEOUT == timedelta(minutes=10)
    assert TASK_STATUS_EVENT == "mcp.task_status"
    with pytest.raises(ValueError, match="task_wait_timeout must be positive"):
        McpToolSource([McpHttpServer("shipping", "http://127.0.0.1:1/mcp")], task_wait_timeout=timedelta(0))
