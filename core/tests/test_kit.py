"""The test kit's own pieces that need no server: the invocation log, gates and the script store."""

import asyncio
import multiprocessing
from pathlib import Path

import pytest
from dex.dexpb import dex_pb2 as pb

from dex_agents import AgentEventWriter, ContextSummaryRequest, ContextSummaryResult
from dex_agents.testing import (
    FileGate,
    Invocation,
    InvocationLog,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    scripted_model_response,
    with_model_call_scope,
)
from dex_agents.testing._history import decode_value
from tests.test_unit_values import _Runner  # pyright: ignore[reportPrivateUsage]


def _append_many(path: str, worker: int, count: int) -> None:
    log = InvocationLog(path)
    for attempt in range(count):
        log.record(Invocation(kind="tool", session_id=f"s{worker}", turn_id="turn-1", attempt=attempt + 1))


def test_invocation_log_keeps_every_record_from_concurrent_processes(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_append_many, args=(str(path), worker, 200)) for worker in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    log = InvocationLog(path)
    assert len(log.read()) == 800
    for worker in range(4):
        assert [call.attempt for call in log.tool_calls(f"s{worker}")] == list(range(1, 201))


def test_invocation_log_ignores_a_torn_last_line(tmp_path: Path) -> None:
    log = InvocationLog(tmp_path / "log.jsonl")
    log.record(Invocation(kind="model", session_id="s", turn_id="turn-1", attempt=1, model_input=("hi",)))
    with log.path.open("a", encoding="utf-8") as file:
        file.write('{"kind":"model","sess')  # a Worker killed mid-write
    calls = log.model_calls("s")
    assert len(calls) == 1 and calls[0].model_input == ("hi",) and calls[0].pid > 0


async def test_file_gate_holds_until_released(tmp_path: Path) -> None:
    gate = FileGate(tmp_path, "g")
    waiter = asyncio.create_task(gate.pass_through())
    await gate.wait_until_reached(timeout=5)
    assert gate.is_reached and not waiter.done()
    gate.release()
    await asyncio.wait_for(waiter, 5)
    with pytest.raises(TimeoutError, match="'never'"):
        await FileGate(tmp_path, "never").wait_until_reached(timeout=0.1)
    with pytest.raises(ValueError):
        FileGate(tmp_path, "a/b")


def test_script_store_picks_the_response_from_recorded_tool_calls(tmp_path: Path) -> None:
    store = ScriptStore(tmp_path)
    read = ScriptedToolCall("lookup_order", {"order_id": "1"}, "read-1")
    write = ScriptedToolCall("send_receipt", {"order_id": "1"}, "write-1", fail_attempts=(1,))
    first = ScriptedResponse(tool_calls=(read,))
    second = ScriptedResponse(tool_calls=(write,), partial_text="so far")
    third = ScriptedResponse(text="done")
    assert store.add_turn("s", first, second, third) == 1
    assert store.add_turn("s", ScriptedResponse(text="turn two")) == 2
    assert store.response_for("s", "turn-1", frozenset()) == first
    assert store.response_for("s", "turn-1", frozenset({"read-1"})) == second
    assert store.response_for("s", "turn-1", frozenset({"read-1", "write-1"})) == third
    assert store.response_for("s", "turn-2", frozenset()).text == "turn two"
    assert store.tool_call("s", "turn-1", "write-1") == write
    assert store.tool_call("s", "turn-2", "write-1") is None
    assert store.tool_call("unscripted", "turn-1", "x") is None
    with pytest.raises(LookupError, match="turn-3"):
        store.response_for("s", "turn-3", frozenset())
    exhausted = ScriptStore(tmp_path / "other")
    exhausted.add_turn("t", first)
    with pytest.raises(LookupError, match="model call 2"):
        exhausted.response_for("t", "turn-1", frozenset({"read-1"}))


def test_script_store_default_turns_apply_only_without_a_script(tmp_path: Path) -> None:
    store = ScriptStore(tmp_path, default_turns=[[ScriptedResponse(text="default")]])
    assert store.response_for("anyone", "turn-1", frozenset()).text == "default"
    store.set_turns("mine", [[ScriptedResponse(text="mine")]])
    assert store.response_for("mine", "turn-1", frozenset()).text == "mine"


def test_history_values_decode_like_the_sdk() -> None:
    assert decode_value(pb.Value(string_value="read-1")) == "read-1"
    assert decode_value(pb.Value(int_value=3)) == 3
    assert decode_value(pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=b'{"a":[1]}'))) == {
        "a": [1]
    }
    assert decode_value(pb.Value(internal_blob_id_for_obj_value="o-1")) == "<blob:o-1>"
    assert decode_value(pb.Value()) is None


class _SummarizingRunner(_Runner):
    """A framework's runner whose scripted model also makes the summary call."""

    def __init__(self, store: ScriptStore) -> None:
        self.store = store

    def estimate_input_tokens(self, turn: object) -> int:
        return 0

    def select_compaction_cutoff(self, turn: object, retained_token_budget: int) -> int | None:
        return None

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        response = await scripted_model_response(["summarize this"], self.store)
        return ContextSummaryResult(response.text)


async def test_a_wrapped_runner_summary_call_answers_from_the_summary_script(tmp_path: Path) -> None:
    store = ScriptStore(tmp_path)
    store.set_turns("s", [[ScriptedResponse(text="the turn's answer")]])
    store.set_summaries("s", {"turn-2": ScriptedResponse(text="what happened so far")})

    async def no_heartbeat() -> None:
        return None

    request = ContextSummaryRequest(
        flow_id="s",
        turn_id="turn-2",
        attempt=1,
        previous_summary=None,
        messages=(),
        through_sequence=4,
        events=AgentEventWriter(lambda event: None, "turn-2", 1, "CompactContext-1"),
        heartbeat_function=no_heartbeat,
        input_token_budget=1000,
    )
    wrapped = with_model_call_scope(_SummarizingRunner(store))
    assert (await wrapped.summarize_context(request)).text == "what happened so far"
    assert [(call.kind, call.step_execution_id) for call in store.invocations.read()] == [
        ("summary", "CompactContext-1")
    ]
    assert store.summary_response("s", "turn-9") == ScriptedResponse()  # unscripted: the default text
