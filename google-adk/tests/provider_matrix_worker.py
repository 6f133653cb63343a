"""The Worker child of the provider matrix: serves the `LiteLlm` spec that ``DEX_ADK_PROVIDER`` names."""

import os

from dex_agents.testing import run_matrix_worker

from tests.provider_matrix_spec import PROVIDER_ENV, SPECS

if __name__ == "__main__":
    run_matrix_worker(SPECS[os.environ[PROVIDER_ENV]])
