"""The Worker child of the provider matrix tests: serves one provider client's matrix Flows until killed."""

import os

from dex_agents.testing import run_matrix_worker

from tests.provider_matrix_spec import CLIENT_ENV, SPECS

if __name__ == "__main__":
    run_matrix_worker(SPECS[os.environ.get(CLIENT_ENV, "chat_openai")])
