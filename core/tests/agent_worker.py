"""The Worker child of the core's integration tests."""

from dex_agents.testing import run_matrix_worker
from tests.agents import SPEC

if __name__ == "__main__":
    run_matrix_worker(SPEC)
