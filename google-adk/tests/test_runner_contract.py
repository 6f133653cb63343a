"""The core's runner contract, in process, against the matrix's ADK application and scripted model."""

from dex_agents.testing import RunnerContractSpec
from dex_agents.testing.runner_contract import RunnerContractTests

from tests.matrix_spec import build_matrix_runner


class TestGoogleAdkRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=build_matrix_runner,
        foreign_run_state_error="not written by GoogleAdkRunner",
        unknown_tool_message="Tool 'launch_rocket' not found",
    )
