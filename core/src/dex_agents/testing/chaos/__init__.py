"""Chaos runs: scripted sessions of one package under SIGKILLed Workers and a SIGKILLed engine.

``python -m dex_agents.testing.chaos --spec tests.matrix_spec:SPEC --name <package> --kills N`` runs in a
package's own environment (``scripts/chaos`` runs it in every package). It starts a private devserver and
Workers of the package's matrix Flow, drives many sessions whose turns mix reads, idempotent writes and
approved single-attempt writes (approving every interrupt as it appears), and meanwhile SIGKILLs Worker
process groups at seeded moments (random ones, inside a tool run, inside a model call) and the engine
(``--engine-crashes``), starting replacements. Afterwards it checks, from the tools' own ledger and the
stored transcripts: a single-attempt write ran at most once per call; an idempotent write that ran more
than once always got the same key, and no two calls shared one; no accepted user message is lost or
repeated; every stored tool call has its result and the session takes one more normal turn; every
session reached an idle state. The report (``--results``) is JSON; a failure prints the command that
replays its seed.

Nothing here imports a framework: the package's :class:`ChaosSpec` (or its ``MatrixSpec``) brings the
runner.
"""

from dex_agents.testing.chaos._invariants import (
    Violation,
    idempotency_key_violations,
    single_attempt_violations,
    transcript_violations,
    user_message_violations,
)
from dex_agents.testing.chaos._plan import (
    CHECK_TURN_ANSWER,
    CHECK_TURN_MESSAGE,
    PlannedTurn,
    SessionPlan,
    plan_session,
)
from dex_agents.testing.chaos._report import REPORT_FORMAT, ChaosReport
from dex_agents.testing.chaos._run import ChaosSettings, run_chaos
from dex_agents.testing.chaos._spec import ChaosSpec, load_chaos_spec

__all__ = [
    "CHECK_TURN_ANSWER",
    "CHECK_TURN_MESSAGE",
    "REPORT_FORMAT",
    "ChaosReport",
    "ChaosSettings",
    "ChaosSpec",
    "PlannedTurn",
    "SessionPlan",
    "Violation",
    "idempotency_key_violations",
    "load_chaos_spec",
    "plan_session",
    "run_chaos",
    "single_attempt_violations",
    "transcript_violations",
    "user_message_violations",
]
