"""Item 13's rule on logged model calls: one per RunModel attempt and Worker, again only after a kill."""

from dex_agents.testing import Invocation
from dex_agents.testing._model_call_rule import model_call_problems


def call(step: str, attempt: int, pid: int, *texts: str, session: str = "s-1") -> Invocation:
    return Invocation(
        kind="model",
        session_id=session,
        turn_id="turn-1",
        attempt=attempt,
        step_execution_id=step,
        model_input=texts,
        pid=pid,
    )


def test_one_call_per_attempt_and_a_new_attempt_per_retry_pass() -> None:
    calls = [call("RunModel-1", 1, 100), call("RunModel-1", 2, 100), call("RunModel-2", 1, 100)]
    calls.append(call("RunModel-1", 1, 100, session="s-2"))  # Step execution IDs repeat across sessions
    tool = Invocation(kind="tool", session_id="s-1", turn_id="turn-1", attempt=1, tool_name="t", pid=100)
    assert model_call_problems([*calls, tool], killed_worker_pids=()) == []


def test_an_attempt_handed_to_a_replacement_after_a_kill_passes_and_without_one_fails() -> None:
    redelivered = [call("RunModel-1", 1, 100), call("RunModel-1", 1, 200)]
    assert model_call_problems(redelivered, killed_worker_pids={100}) == []
    assert model_call_problems(redelivered, killed_worker_pids={200}) == [
        "attempt 1 of RunModel RunModel-1 in session s-1 ran in Workers [100, 200], though Worker 100 was "
        "not killed"
    ]


def test_a_second_call_in_one_attempt_and_worker_fails() -> None:
    calls = [call("RunModel-2", 1, 100, "user: hi"), call("RunModel-2", 1, 100, "user: hi")]
    assert model_call_problems(calls, killed_worker_pids={100}) == [
        "attempt 1 of RunModel RunModel-2 in session s-1 made 2 model calls in Worker 100, "
        "a hidden extra call"
    ]


def test_inline_reads_allow_one_call_per_response_but_never_a_repeat() -> None:
    growing = [call("RunModel-1", 1, 100, "user: hi"), call("RunModel-1", 1, 100, "user: hi", "tool: 7")]
    assert model_call_problems(growing, killed_worker_pids=(), runs_reads_inline=True) == []
    repeated = [call("RunModel-1", 1, 100, "user: hi"), call("RunModel-1", 1, 100, "user: hi")]
    assert model_call_problems(repeated, killed_worker_pids=(), runs_reads_inline=True) == [
        "attempt 1 of RunModel RunModel-1 in session s-1 repeated a model call in Worker 100 "
        "without new input"
    ]


def test_a_model_call_outside_run_model_fails() -> None:
    assert model_call_problems([call("", 1, 100)], killed_worker_pids=()) == [
        "a model call of session s-1 turn-1 names no Step execution"
    ]
