"""The benchmark's Worker child."""

from dex_agents.testing import run_agent_worker

from bench.agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow()])
