"""The runner contract from `dex_agents.testing.runner_contract`, in process, with the matrix's runner."""

from dex_agents.testing import RunnerContractSpec
from dex_agents.testing.runner_contract import RunnerContractTests

from tests.matrix_spec import SPEC


class TestOpenAIAgentsRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=SPEC.build_runner,
        foreign_run_state_error="not written by OpenAIAgentsRunner",
        unknown_tool_message=SPEC.unknown_tool_message,
    )
