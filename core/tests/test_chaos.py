"""The chaos suite end to end on the core's scripted runner: a healthy run passes under Worker and engine
kills, and a runner that runs each call twice is caught, with the command that replays it."""

from pathlib import Path

from dex_agents.testing.chaos import ChaosSettings, ChaosSpec, run_chaos
from tests.agents import SPEC
from tests.chaos_agents import EXECUTES_TWICE_SPEC


async def test_a_healthy_runner_keeps_every_promise_through_worker_and_engine_kills(tmp_path: Path) -> None:
    settings = ChaosSettings(
        name="core-test", spec_reference="tests.agents:SPEC", seed=7, worker_kills=2, engine_crashes=1
    )
    report = await run_chaos(ChaosSpec(SPEC), settings, tmp_path, log=lambda _line: None)

    assert report.violations == [], report.summary()
    assert (report.worker_kills, report.engine_crashes) == (2, 1), report
    assert not report.stopped_by_time_limit
    assert report.sessions >= 1 and report.turns > report.sessions, report
    # Every planned tool kind ran, and every approval came from the driver.
    assert set(report.tool_runs) == {"lookup_order", "send_receipt", "refund_order", "cancel_order"}, report
    assert report.approvals >= 1 and report.model_calls >= report.turns, report


async def test_a_runner_that_runs_each_call_twice_is_reported_with_its_replay(tmp_path: Path) -> None:
    settings = ChaosSettings(
        name="executes-twice",
        spec_reference="tests.chaos_agents:EXECUTES_TWICE_SPEC",
        seed=3,
        worker_kills=1,
        replay="scripts/chaos --seed 3 executes-twice",
    )
    report = await run_chaos(ChaosSpec(EXECUTES_TWICE_SPEC), settings, tmp_path, log=lambda _line: None)

    assert not report.passed
    invariants = {violation.invariant for violation in report.violations}
    assert invariants == {"single_attempt_write_ran_twice"}, report.summary()
    assert any("ran 2 times" in violation.detail for violation in report.violations), report.violations
    summary = report.summary()
    assert "VIOLATION single_attempt_write_ran_twice" in summary
    assert "replay: scripts/chaos --seed 3 executes-twice" in summary


async def test_a_rolling_deploy_drains_every_worker_and_fails_no_turn(tmp_path: Path) -> None:
    settings = ChaosSettings(
        name="core-deploy",
        spec_reference="tests.agents:SPEC",
        seed=11,
        worker_kills=0,
        rolling_deploys=1,
        concurrent_sessions=8,
    )
    report = await run_chaos(ChaosSpec(SPEC), settings, tmp_path, log=lambda _line: None)

    assert report.violations == [], report.summary()
    # Both Workers were SIGTERMed in turn while sessions ran, each drained and exited by itself, and the
    # sessions went on on their replacements without one failed turn or one outcome_unknown write (a
    # violation, checked above).
    assert (report.rolling_deploys, report.worker_drains) == (1, 2), report
    assert report.failed_turns == 0, report
    assert report.approvals >= 1 and report.turns > report.sessions, report
    # The sessions that ran through the deploy went on on other Worker processes than they began on.
    assert report.sessions_on_several_workers >= 1, report
