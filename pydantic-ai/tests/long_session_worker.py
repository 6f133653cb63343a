"""The Worker child of `test_long_sessions.py`."""

from dex_agents.testing import run_agent_worker

from tests.long_session_agents import build_flows

if __name__ == "__main__":
    run_agent_worker(build_flows())
