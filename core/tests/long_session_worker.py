"""The Worker child of the long-session tests."""

from dex_agents.testing import run_agent_worker
from tests.long_session_agents import build_long_session_flows

if __name__ == "__main__":
    run_agent_worker(build_long_session_flows().all)
