"""Whether a provider answer finished, and its tool calls' own argument text (pure functions)."""

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.tool import invalid_tool_call, tool_call_chunk

from dex_agents_langgraph._provider_answers import RawToolArguments, unfinished_answer


@pytest.mark.parametrize(
    "metadata",
    [
        {"model_provider": "openai", "finish_reason": "stop"},
        {"model_provider": "openai", "finish_reason": "tool_calls"},
        {"model_provider": "openai", "finish_reason": "length"},
        {"model_provider": "openai", "status": "completed"},
        {"model_provider": "openai", "status": "incomplete"},
        {"model_provider": "anthropic", "stop_reason": "end_turn"},
        {"model_provider": "anthropic", "stop_reason": "tool_use"},
        {"finish_reason": "STOP"},
        # A provider that reports no finish at all cannot be judged by it.
        {"model_provider": "ollama"},
        {},
    ],
)
def test_an_answer_the_provider_ended_is_finished(metadata: dict[str, object]) -> None:
    assert unfinished_answer(AIMessage("It was an answer.", response_metadata=metadata)) is None


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        # Chat Completions: the stream ended (`[DONE]` or the body's end) before any finish_reason.
        ({"model_provider": "openai"}, "finish_reason"),
        ({"model_provider": "openai", "finish_reason": None}, "finish_reason"),
        # Responses: no response.completed, so no status either.
        ({"model_provider": "openai", "id": "resp_1"}, "finish_reason"),
        # Messages: no message_delta with a stop_reason (or a non-streamed answer with a null one).
        ({"model_provider": "anthropic"}, "stop_reason"),
        ({"model_provider": "anthropic", "stop_reason": None}, "stop_reason"),
        ({"stop_reason": None}, "stop_reason"),
    ],
)
def test_an_answer_without_the_providers_finish_is_unfinished(
    metadata: dict[str, object], named: str
) -> None:
    reason = unfinished_answer(AIMessage("It was an ", response_metadata=metadata))
    assert reason is not None
    assert named in reason


def _streamed(*pieces: tuple[int, str | None, str]) -> RawToolArguments:
    raw = RawToolArguments()
    for index, call_id, text in pieces:
        chunk = AIMessageChunk(
            content="", tool_call_chunks=[tool_call_chunk(name=None, args=text, id=call_id, index=index)]
        )
        raw.add_chunk(chunk.tool_call_chunks)
    return raw


def test_streamed_arguments_that_langchain_completes_keep_the_providers_cut_text() -> None:
    raw = _streamed((0, "call_1", ""), (0, None, '{"order_id": "A-'), (1, "call_2", '{"order_id": "B-2"}'))
    # LangChain's own parse of the first call is {"order_id": "A-"}: a call the model never made.
    answer = AIMessageChunk(
        content="",
        tool_call_chunks=[
            tool_call_chunk(name="lookup", args='{"order_id": "A-', id="call_1", index=0),
            tool_call_chunk(name="lookup", args='{"order_id": "B-2"}', id="call_2", index=1),
        ],
    )
    assert answer.tool_calls[0]["args"] == {"order_id": "A-"}
    raw.add_answer(answer)
    assert raw.malformed("call_1") == '{"order_id": "A-'
    assert raw.malformed("call_2") is None


def test_a_call_without_argument_text_is_a_call_without_arguments() -> None:
    raw = _streamed((0, "toolu_1", ""))
    raw.add_answer(AIMessage(""))
    assert raw.malformed("toolu_1") is None
    assert raw.malformed("unknown") is None


def test_an_unparsable_call_of_a_whole_answer_keeps_its_text() -> None:
    raw = RawToolArguments()
    answer = AIMessage(
        "",
        invalid_tool_calls=[invalid_tool_call(name="lookup", args="{order: A-1}", id="call_9", error="bad")],
    )
    raw.add_answer(answer)
    assert raw.malformed("call_9") == "{order: A-1}"


def test_arguments_that_are_json_but_no_object_are_malformed() -> None:
    raw = _streamed((0, "call_1", '["A-1"]'))
    raw.add_answer(AIMessage(""))
    assert raw.malformed("call_1") == '["A-1"]'


def test_arguments_nested_past_pythons_recursion_limit_are_malformed_not_a_failed_step() -> None:
    deep = '{"data": ' + "[" * 1000 + "]" * 1000 + "}"
    raw = _streamed((0, "call_1", deep))
    # LangChain's own parse gives up on it too: the call is invalid, and the runner routes it to the gate.
    answer = AIMessageChunk(
        content="", tool_call_chunks=[tool_call_chunk(name="store", args=deep, id="call_1", index=0)]
    )
    assert [call["id"] for call in answer.invalid_tool_calls] == ["call_1"]
    raw.add_answer(answer)
    assert raw.malformed("call_1") == deep
