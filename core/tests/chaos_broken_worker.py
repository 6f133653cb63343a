"""The Worker child of the chaos suite's broken run."""

from dex_agents.testing import run_matrix_worker
from tests.chaos_agents import EXECUTES_TWICE_SPEC

if __name__ == "__main__":
    run_matrix_worker(EXECUTES_TWICE_SPEC)
