"""The runner contract kit, run against the core's framework-free ScriptedRunner."""

from pathlib import Path

from dex_agents.testing import RunnerContractSpec, ScriptedRunner
from dex_agents.testing.runner_contract import RunnerContractTests
from tests.nested_pytest import run_nested_pytest


class TestScriptedRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=ScriptedRunner,
        foreign_run_state_error="not written by ScriptedRunner",
        unknown_tool_message="unknown tool 'launch_rocket'",
    )


def test_the_kit_fails_for_a_runner_that_reorders_calls_reads_another_runners_state_or_drops_results(
    tmp_path: Path,
) -> None:
    output = run_nested_pytest(tmp_path, "tests/broken_contract_runners.py", timeout=120)
    failed = sorted(line.split("::")[-1] for line in output.splitlines() if line.startswith("FAILED "))
    assert [name.split(" ")[0] for name in failed] == [
        "test_a_model_call_defers_every_tool_call_in_model_order_and_runs_none",
        "test_a_run_state_of_another_runner_is_refused_before_any_model_call",
        "test_a_turn_that_ends_early_keeps_its_items_and_a_result_for_every_call",
    ], output[-3000:]
    assert "the model was called with another runner's state" in output, output[-3000:]
    assert "4 passed" in output, output[-3000:]
