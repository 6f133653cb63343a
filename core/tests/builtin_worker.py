"""The Worker child of the built-in tool, plan mode, tool question and tool task tests."""

from dex_agents.testing import run_agent_worker
from tests.builtin_agents import build_built_in_flows

if __name__ == "__main__":
    run_agent_worker(build_built_in_flows().all)
