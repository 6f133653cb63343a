"""The Worker child of `test_harness_specifics.py`."""

from dex_agents.testing import run_agent_worker

from tests.specifics_agents import build_flows

if __name__ == "__main__":
    run_agent_worker(build_flows())
