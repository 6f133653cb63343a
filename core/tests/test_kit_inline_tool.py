"""`run_inline_scripted_tool`: a scripted tool a harness runs inline inside `RunModel`, not in a tool Step."""

import asyncio
from pathlib import Path

import pytest

from dex_agents.testing import (
    ModelCallScope,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    model_call_scope,
    run_inline_scripted_tool,
    script_store_scope,
)


def _scope(attempt: int, turn_id: str = "turn-1", session_id: str = "s") -> ModelCallScope:
    return ModelCallScope(session_id, turn_id, attempt, step_execution_id=f"run-model-{attempt}")


def _store(tmp_path: Path) -> ScriptStore:
    store = ScriptStore(tmp_path)
    first = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-a", gate="read", output="A-1 shipped")
    second = ScriptedToolCall("lookup_order", {"order_id": "B-2"}, "read-b", output_size=3)
    store.add_turn("s", ScriptedResponse(tool_calls=(first, second)), ScriptedResponse(text="done"))
    store.add_turn("s", ScriptedResponse(text="turn two"))
    return store


async def test_an_inline_tool_finds_its_call_by_name_and_arguments_logs_it_and_waits_at_its_gate(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    with model_call_scope(_scope(attempt=1)):
        gated = asyncio.create_task(run_inline_scripted_tool("lookup_order", {"order_id": "A-1"}, store))
        gate = store.gate("s", "read")
        await gate.wait_until_reached(timeout=5)
        await asyncio.sleep(0.05)
        assert not gated.done()
        gate.release()
        assert await asyncio.wait_for(gated, 5) == "A-1 shipped"
        assert await run_inline_scripted_tool("lookup_order", {"order_id": "B-2"}, store) == "xxx"

    first, second = store.invocations.tool_calls("s", "lookup_order")
    assert (first.kind, first.turn_id, first.attempt, first.step_execution_id) == (
        "tool",
        "turn-1",
        1,
        "run-model-1",
    )
    assert (first.tool_call_id, second.tool_call_id) == ("read-a", "read-b")
    assert first.idempotency_key == second.idempotency_key == ""


async def test_an_inline_tool_passes_the_gate_on_other_attempts_and_runs_unscripted_calls(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    with script_store_scope(store), model_call_scope(_scope(attempt=2)):
        # Attempt 2 is not a gated attempt: no wait, though nobody releases the gate.
        output = await asyncio.wait_for(run_inline_scripted_tool("lookup_order", {"order_id": "A-1"}), 5)
        assert output == "A-1 shipped"
        unscripted = await run_inline_scripted_tool("lookup_order", {"order_id": "Z-9"})
        assert unscripted == 'lookup_order done: {"order_id":"Z-9"}'
    assert not store.gate("s", "read").is_reached
    with model_call_scope(_scope(attempt=1, turn_id="turn-7")):
        # A turn the script does not have: the default behaviour, with no gate.
        await asyncio.wait_for(run_inline_scripted_tool("lookup_order", {"order_id": "A-1"}, store), 5)

    runs = store.invocations.tool_calls("s", "lookup_order")
    assert [(run.turn_id, run.attempt, run.tool_call_id) for run in runs] == [
        ("turn-1", 2, "read-a"),
        ("turn-1", 2, ""),
        ("turn-7", 1, ""),
    ]


async def test_an_inline_tool_refuses_to_run_outside_a_model_call(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(RuntimeError, match=r"'lookup_order'.*RunModel"):
        await run_inline_scripted_tool("lookup_order", {"order_id": "A-1"}, store)
    assert store.invocations.read() == []
