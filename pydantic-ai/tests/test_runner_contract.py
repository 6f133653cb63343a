"""The runner contract of `dex_agents.testing.runner_contract`, in process, with the matrix's runner."""

from dex_agents.testing import RunnerContractSpec
from dex_agents.testing.runner_contract import RunnerContractTests

from tests.matrix_spec import build_matrix_runner


class TestPydanticAiRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=build_matrix_runner,
        foreign_run_state_error="not written by PydanticAiRunner",
        unknown_tool_message="Unknown tool name: 'launch_rocket'",
    )
