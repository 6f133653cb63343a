"""The Worker child of `test_provider_faults.py`."""

from dex_agents.testing import run_agent_worker

from tests.provider_fault_agents import build_flows

if __name__ == "__main__":
    run_agent_worker(build_flows())
