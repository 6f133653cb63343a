"""Item 13's rule: a ``RunModel`` attempt makes one model call, and makes it again only in a new Worker.

Dex gives each ``RunModel`` attempt its own attempt number, with one exception: an attempt whose Worker
died before the attempt's first output reached the server is handed to another Worker under the same
number. So one attempt of one Step execution may show up in the log from two Worker processes, but only
when the first one was killed; within one Worker process it makes exactly one model call (or, for a
runner whose framework runs reads inline, one per response, each seeing more than the one before).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence

from dex_agents.testing._invocations import Invocation

__all__ = ["model_call_problems"]


def model_call_problems(
    calls: Sequence[Invocation], killed_worker_pids: Collection[int], *, runs_reads_inline: bool = False
) -> list[str]:
    """Return how logged model calls break item 13's rule, one sentence per problem; empty when none do.

    Args:
        calls: Logged model calls, in log order.
        killed_worker_pids: The Worker processes that were SIGKILLed.
        runs_reads_inline: Allow several model calls per attempt and Worker, each with more input than the
            one before (see `MatrixSpec.runs_reads_inline`).

    Returns:
        The problems.
    """
    problems: list[str] = []
    attempts: dict[tuple[str, str, int], dict[int, list[Invocation]]] = {}
    for call in calls:
        if call.kind != "model":
            continue
        if not call.step_execution_id:
            problems.append(
                f"a model call of session {call.session_id} {call.turn_id} names no Step execution"
            )
            continue
        runs = attempts.setdefault((call.session_id, call.step_execution_id, call.attempt), {})
        runs.setdefault(call.pid, []).append(call)
    for (session, step, attempt), runs in attempts.items():
        where = f"attempt {attempt} of RunModel {step} in session {session}"
        for pid, run in runs.items():
            if not runs_reads_inline and len(run) > 1:
                problems.append(f"{where} made {len(run)} model calls in Worker {pid}, a hidden extra call")
            if runs_reads_inline and any(
                len(later.model_input) <= len(earlier.model_input)
                for earlier, later in itertools.pairwise(run)
            ):
                problems.append(f"{where} repeated a model call in Worker {pid} without new input")
        # The log lists a Worker's calls before its replacement's, so every Worker but the last was replaced.
        replaced = [pid for pid in list(runs)[:-1] if pid not in killed_worker_pids]
        if replaced:
            problems.append(
                f"{where} ran in Workers {list(runs)}, though Worker {replaced[0]} was not killed"
            )
    return problems
