"""The benchmark's Worker child.

``DEX_AGENTS_BENCH_DECODED_CACHE_BYTES``, when set, bounds the decoded-value cache (``bench.idle`` uses it to
tell the cache's memory from the sessions').
"""

import os

from bench.agent import build_flow
from dex_agents import set_decoded_value_cache_bytes
from dex_agents.testing import run_agent_worker

DECODED_CACHE_BYTES_ENV = "DEX_AGENTS_BENCH_DECODED_CACHE_BYTES"

if __name__ == "__main__":
    if DECODED_CACHE_BYTES_ENV in os.environ:
        set_decoded_value_cache_bytes(int(os.environ[DECODED_CACHE_BYTES_ENV]))
    run_agent_worker([build_flow()])
