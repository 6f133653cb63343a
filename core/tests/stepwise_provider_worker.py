"""The Worker child of the provider-backed Stepwise tests: both providers' matrix Flows, a compacting one."""

from dex_agents.testing import run_agent_worker
from tests.stepwise_provider_agents import ANTHROPIC_SPEC, OPENAI_SPEC, build_compacting_flow

if __name__ == "__main__":
    run_agent_worker(
        (*OPENAI_SPEC.build_flows().all, *ANTHROPIC_SPEC.build_flows().all, build_compacting_flow())
    )
