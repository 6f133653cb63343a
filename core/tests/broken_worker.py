"""The Worker child of the deliberately broken matrix run."""

from dex_agents.testing import run_matrix_worker
from tests.broken_agents import BROKEN_SPEC

if __name__ == "__main__":
    run_matrix_worker(BROKEN_SPEC)
