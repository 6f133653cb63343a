"""The Worker child of the matrix tests: serves the Claude harness matrix Flows until it is killed."""

from dex_agents.testing import run_matrix_worker

from tests.matrix_spec import SPEC

if __name__ == "__main__":
    run_matrix_worker(SPEC)
