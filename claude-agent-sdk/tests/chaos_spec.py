"""The Claude harness agent under chaos (`scripts/chaos`): the provider matrix agent and its Worker.

The CLI defers one call per response, the last one, and runs the reads before it inline, so the chaos
scripts put at most one call that is not a read in a response (see "One deferred call per response" in
the docs site's `docs/pages/frameworks/claude-agent-sdk/index.md`). The spec is provider-backed
(`tests.provider_matrix_spec`): the CLI, with its own retries on, meets provider faults at seeded moments
from the package's scripted Messages API.
"""

from __future__ import annotations

from dex_agents.testing.chaos import ChaosSpec

from tests.provider_matrix_spec import SPEC as PROVIDER_SPEC

SPEC = ChaosSpec(matrix=PROVIDER_SPEC, one_deferred_call_per_response=True)
