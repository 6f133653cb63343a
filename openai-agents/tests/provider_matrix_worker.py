"""The Worker child of the provider matrix: serves the spec `PROVIDER_API_ENV` names until it is killed."""

import os

from dex_agents.testing import run_matrix_worker

from tests.provider_matrix_spec import PROVIDER_API_ENV, SPECS

if __name__ == "__main__":
    run_matrix_worker(SPECS[os.environ.get(PROVIDER_API_ENV, "responses")])
