"""The runner contract kit, run against Stepwise through LiteLLM's real code path."""

from dex_agents.testing import RunnerContractSpec
from dex_agents.testing.runner_contract import RunnerContractTests
from tests.stepwise_agents import build_matrix_runner


class TestStepwiseRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=build_matrix_runner,
        foreign_run_state_error="was not written by StepwiseRunner",
        unknown_tool_message="unknown tool 'launch_rocket'",
    )
