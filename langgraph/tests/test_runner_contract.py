"""The runner contract every adapter keeps, in process: the core's kit against the matrix's agent."""

from dex_agents.testing import RunnerContractSpec
from dex_agents.testing.runner_contract import RunnerContractTests

from tests.matrix_spec import build_matrix_runner


class TestLangGraphRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=build_matrix_runner,
        foreign_run_state_error="not written by LangGraphRunner",
        unknown_tool_message="launch_rocket is not a valid tool",
    )
