"""The Worker child of the Stepwise tests: the matrix Flows and the continuation agent."""

from dex_agents.testing import run_agent_worker
from tests.stepwise_agents import SPEC, build_builderless_flow, build_continuation_flow

if __name__ == "__main__":
    run_agent_worker((*SPEC.build_flows().all, build_continuation_flow(), build_builderless_flow()))
