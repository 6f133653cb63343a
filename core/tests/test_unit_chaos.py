"""The chaos suite's pure parts: seeded plans, and each invariant check failing on the defect it names."""

import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from dex_agents import AgentMessage, MessageRole
from dex_agents.testing import Invocation, MatrixToolNames
from dex_agents.testing.chaos import (
    CHECK_TURN_ANSWER,
    CHECK_TURN_MESSAGE,
    ChaosReport,
    Violation,
    idempotency_key_violations,
    plan_session,
    single_attempt_violations,
    transcript_violations,
    user_message_violations,
)
from dex_agents.testing.chaos._plan import PlannedTurn
from dex_agents.testing.chaos._run import (
    _failures_without_provider_faults,  # pyright: ignore[reportPrivateUsage]
    _Session,  # pyright: ignore[reportPrivateUsage]
)
from dex_agents.testing.chaos._sessions import TurnEnds

TOOLS = MatrixToolNames()


def _plan(seed: int, *, one_deferred_call_per_response: bool = False):
    return plan_session(
        random.Random(seed),
        "session-1",
        TOOLS,
        one_deferred_call_per_response=one_deferred_call_per_response,
        turn_range=(6, 6),
    )


def test_a_seed_plans_the_same_session_and_another_seed_a_different_one() -> None:
    assert _plan(1) == _plan(1)
    assert _plan(1) != _plan(2)


def test_every_turn_mixes_tools_with_unique_ids_and_ends_with_text_then_the_check_turn() -> None:
    plan = _plan(4)
    names: set[str] = set()
    for turn in plan.turns:
        *asking, answer = turn.responses
        assert asking and all(response.tool_calls and not response.text for response in asking), turn
        assert answer.text and not answer.tool_calls
        ids = [call.tool_call_id for response in asking for call in response.tool_calls]
        assert len(ids) == len(set(ids)), ids
        names.update(call.tool_name for response in asking for call in response.tool_calls)
    assert names == {TOOLS.read, TOOLS.idempotent_write, TOOLS.approval_write, TOOLS.single_attempt_write}
    assert len({turn.message for turn in plan.turns}) == len(plan.turns)
    assert not plan.turns[0].sent_early
    assert plan.script()[-1][0].text == CHECK_TURN_ANSWER
    assert CHECK_TURN_MESSAGE not in {turn.message for turn in plan.turns}


def test_a_harness_that_defers_one_call_gets_its_reads_first_and_one_other_call_last() -> None:
    for seed in range(20):
        for turn in _plan(seed, one_deferred_call_per_response=True).turns:
            for response in turn.responses:
                kinds = [call.tool_name == TOOLS.read for call in response.tool_calls]
                assert kinds.count(False) <= 1 and kinds[: len(kinds) - 1].count(False) == 0, kinds


def _run(tool: str, call: str, key: str = "", *, attempt: int = 1, session: str = "s") -> Invocation:
    return Invocation(
        kind="tool",
        session_id=session,
        turn_id="turn-1",
        attempt=attempt,
        tool_name=tool,
        tool_call_id=call,
        idempotency_key=key,
    )


def test_a_single_attempt_write_that_ran_twice_is_a_violation_and_two_calls_are_not() -> None:
    single = {TOOLS.single_attempt_write}
    assert single_attempt_violations([_run("cancel_order", "a"), _run("cancel_order", "b")], single) == []
    [violation] = single_attempt_violations([_run("cancel_order", "a"), _run("cancel_order", "a")], single)
    assert violation.invariant == "single_attempt_write_ran_twice" and "ran 2 times" in violation.detail
    # A read that ran twice is no violation of this promise.
    assert single_attempt_violations([_run("lookup_order", "r"), _run("lookup_order", "r")], single) == []


def test_an_idempotent_write_must_keep_one_key_of_its_own() -> None:
    idempotent = {TOOLS.idempotent_write}
    same = [_run("send_receipt", "a", "s/turn-1/a"), _run("send_receipt", "a", "s/turn-1/a", attempt=2)]
    assert idempotency_key_violations(same, idempotent) == []
    changed = [_run("send_receipt", "a", "k1"), _run("send_receipt", "a", "k2", attempt=2)]
    assert [item.invariant for item in idempotency_key_violations(changed, idempotent)] == [
        "idempotency_key_changed"
    ]
    empty = [_run("send_receipt", "a", "")]
    assert [item.invariant for item in idempotency_key_violations(empty, idempotent)] == [
        "idempotency_key_changed"
    ]
    shared = [_run("send_receipt", "a", "k"), _run("send_receipt", "b", "k")]
    assert [item.invariant for item in idempotency_key_violations(shared, idempotent)] == [
        "idempotency_key_shared"
    ]


def _message(
    sequence: int, role: MessageRole, text: str | None = None, call: str | None = None
) -> AgentMessage:
    return AgentMessage(
        sequence=sequence,
        turn_id="turn-1",
        role=role,
        text=text,
        tool_call_id=call,
        tool_name=None if call is None else "lookup_order",
        tool_arguments=None,
        tool_output=None,
        created_at="2026-01-01T00:00:00.000Z",
        framework_item="{}",
    )


def test_user_messages_must_all_be_stored_once_in_order() -> None:
    stored = [
        _message(1, MessageRole.USER, "one"),
        _message(2, MessageRole.ASSISTANT, "ok"),
        _message(3, MessageRole.USER, "two"),
    ]
    assert user_message_violations("s", ["one", "two"], stored) == []
    assert [item.invariant for item in user_message_violations("s", ["one", "two", "three"], stored)] == [
        "user_message_lost"
    ]
    repeated = [*stored, _message(4, MessageRole.USER, "two")]
    assert [item.invariant for item in user_message_violations("s", ["one", "two"], repeated)] == [
        "user_message_repeated"
    ]
    assert [item.invariant for item in user_message_violations("s", ["two", "one"], stored)] == [
        "user_messages_reordered"
    ]


def test_a_stored_call_without_its_result_is_a_violation() -> None:
    call = _message(2, MessageRole.ASSISTANT, call="c1")
    result = _message(3, MessageRole.TOOL, call="c1")
    assert transcript_violations("s", [call, result]) == []
    [violation] = transcript_violations("s", [call])
    assert violation.invariant == "tool_call_without_result" and "c1" in violation.detail


def test_a_report_round_trips_and_a_failing_one_names_its_replay(tmp_path: Path) -> None:
    report = ChaosReport(
        name="core-scripted",
        spec="tests.agents:SPEC",
        seed=9,
        requested_worker_kills=3,
        requested_engine_crashes=1,
        worker_kills=3,
        worker_kill_moments={"in_tool": 2, "random": 1},
        engine_crashes=1,
        engine_crash_moments={"random": 1},
        stopped_by_time_limit=False,
        sessions=5,
        turns=20,
        failed_turns=0,
        turn_failures=[],
        tool_runs={"cancel_order": 4},
        repeated_calls=1,
        tool_call_statuses={"succeeded": 4},
        model_calls=30,
        approvals=2,
        retried_client_calls=0,
        seconds=12.5,
        violations=[Violation("user_message_lost", "s", "'two' was accepted but is not stored")],
        replay="scripts/chaos --seed 9 --kills 3 --engine-crashes 1 core-scripted",
    )
    path = tmp_path / "chaos-core-scripted.json"
    report.write(path)
    assert ChaosReport.read(path) == report
    summary = report.summary()
    assert "3 Worker kills (2 in_tool, 1 random), 1 engine crashes" in summary
    assert "1 invariant violations" in summary and "VIOLATION user_message_lost in s" in summary
    assert "replay: scripts/chaos --seed 9 --kills 3 --engine-crashes 1 core-scripted" in summary


def _met_a_fault(turn: PlannedTurn) -> bool:
    return any(response.provider_faults for response in turn.responses)


def test_a_deploy_run_excuses_only_a_failed_turn_whose_model_calls_met_a_provider_fault() -> None:
    plans = (
        plan_session(random.Random(seed), "session-1", TOOLS, turn_range=(6, 6), provider_faults=True)
        for seed in range(200)
    )
    plan = next(plan for plan in plans if len({_met_a_fault(turn) for turn in plan.turns}) == 2)
    faulted = next(index for index, turn in enumerate(plan.turns) if _met_a_fault(turn))
    clean = next(index for index, turn in enumerate(plan.turns) if not _met_a_fault(turn))
    stored = [
        AgentMessage(
            sequence=index + 1,
            turn_id=f"turn-{index + 1}",
            role=MessageRole.USER,
            text=turn.message,
            tool_call_id=None,
            tool_name=None,
            tool_arguments=None,
            tool_output=None,
            created_at="2026-01-01T00:00:00.000Z",
            framework_item="{}",
        )
        for index, turn in enumerate(plan.turns)
    ]
    # A failed turn also stores the turn-failure note as a user message of the same turn.
    stored.append(replace(stored[faulted], sequence=len(stored) + 1, text="[Dex] The previous turn failed"))
    run = _Session(cast(Any, SimpleNamespace(plan=plan)), stored=stored)
    run.ends = TurnEnds(
        failed=["failed on the provider's fault", "failed in the deploy"],
        failed_turn_ids=[f"turn-{faulted + 1}", f"turn-{clean + 1}"],
    )
    assert _failures_without_provider_faults(run) == ["failed in the deploy"]
