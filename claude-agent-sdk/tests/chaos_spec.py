"""The Claude harness agent under chaos (`scripts/chaos`): the matrix agent and its Worker.

The CLI defers one call per response, the last one, and runs the reads before it inline, so the chaos
scripts put at most one call that is not a read in a response (see the README's "One deferred call per
response").
"""

from __future__ import annotations

from dex_agents.testing.chaos import ChaosSpec

from tests.matrix_spec import SPEC as MATRIX_SPEC

SPEC = ChaosSpec(matrix=MATRIX_SPEC, one_deferred_call_per_response=True)
