"""The Worker child of the steering and cancellation tests."""

from dex_agents.testing import run_agent_worker
from tests.control_agents import build_control_flows

if __name__ == "__main__":
    run_agent_worker(build_control_flows().all)
