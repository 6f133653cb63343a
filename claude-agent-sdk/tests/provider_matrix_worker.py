"""The Worker child of the provider-fault tests: serves the provider matrix Flows until it is killed."""

from dex_agents.testing import run_matrix_worker

from tests.provider_matrix_spec import SPEC

if __name__ == "__main__":
    run_matrix_worker(SPEC)
