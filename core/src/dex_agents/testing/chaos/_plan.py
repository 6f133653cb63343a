"""Seeded chaos sessions: what each user says and what the scripted model answers, turn by turn.

Every turn mixes the four matrix tools: reads, idempotent writes, approved single-attempt writes and
single-attempt writes without approval. Some calls fail their first attempt (a Step retry without any
kill), and some tool runs and model calls stop at a gate, so the fault injector can kill the Worker
exactly inside them. For a runner whose model is behind the scripted provider server, some model calls
also meet a provider fault on their first attempt: a rate limit, a 500, an overload, a cut stream, a stream
without its finish reason, or malformed tool-call arguments. The same seed always plans the same sessions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from dex_agents.testing._matrix_tools import MatrixToolNames
from dex_agents.testing._script import ProviderFault, ProviderFaultKind, ScriptedResponse, ScriptedToolCall

__all__ = [
    "CHECK_TURN_ANSWER",
    "CHECK_TURN_MESSAGE",
    "MODEL_GATE_PREFIX",
    "TOOL_GATE_PREFIX",
    "PlannedTurn",
    "SessionPlan",
    "plan_session",
]

TOOL_GATE_PREFIX = "tool-"
"""Gate names of tool runs start with this."""
MODEL_GATE_PREFIX = "model-"
"""Gate names of model calls start with this."""
CHECK_TURN_MESSAGE = "Is everything in order?"
"""The message of the normal turn every session takes after the chaos, to prove its transcript usable."""
CHECK_TURN_ANSWER = "Everything is in order."
"""What the model answers to :data:`CHECK_TURN_MESSAGE`."""

_TOOL_GATE_CHANCE = 0.35
_MODEL_GATE_CHANCE = 0.25
_FIRST_ATTEMPT_FAILURE_CHANCE = 0.1
_EAGER_MESSAGE_CHANCE = 0.3
_PROVIDER_FAULT_CHANCE = 0.15
# Faults a retry survives; a context-length refusal is not one (it ends the turn by design).
_ANSWER_FAULTS: tuple[ProviderFaultKind, ...] = (
    "rate_limit",
    "server_error",
    "overloaded",
    "cut_stream",
    "unfinished_stream",
)
_TOOL_CALL_FAULTS: tuple[ProviderFaultKind, ...] = (*_ANSWER_FAULTS, "malformed_arguments")
# Short, so a run's time goes to its Worker kills rather than to waiting out rate limits.
_RETRY_AFTER_SECONDS = 0.2


@dataclass(frozen=True)
class PlannedTurn:
    """One planned turn.

    Attributes:
        message: The user's message; unique across the whole run, so a lost or repeated one shows.
        responses: The model's answers, in call order; the last one is the final text.
        sent_early: Send the message while the turn before it still runs, so it waits in the queue.
    """

    message: str
    responses: tuple[ScriptedResponse, ...]
    sent_early: bool


@dataclass(frozen=True)
class SessionPlan:
    """One planned session.

    Attributes:
        session_id: The session ID.
        turns: The turns the chaos runs over.
    """

    session_id: str
    turns: tuple[PlannedTurn, ...]

    def script(self) -> list[list[ScriptedResponse]]:
        """The session's whole script: the planned turns, then the check turn."""
        return [
            *(list(turn.responses) for turn in self.turns),
            [ScriptedResponse(text=CHECK_TURN_ANSWER)],
        ]


def plan_session(
    rng: random.Random,
    session_id: str,
    tools: MatrixToolNames,
    *,
    one_deferred_call_per_response: bool = False,
    turn_range: tuple[int, int] = (2, 4),
    provider_faults: bool = False,
) -> SessionPlan:
    """Plan one session's turns.

    Args:
        rng: The run's seeded random source.
        session_id: The session ID.
        tools: The names the agent gives the matrix tools.
        one_deferred_call_per_response: Put at most one call that is not a read in a response, after its
            reads (a harness that defers one call per response and runs reads inline).
        turn_range: The fewest and most turns.
        provider_faults: Give some model calls a provider fault on their first attempt (the runner's
            model is behind `dex_agents.testing.scripted_provider_server`).

    Returns:
        The plan.
    """
    turns: list[PlannedTurn] = []
    for number in range(1, rng.randint(*turn_range) + 1):
        responses = [
            ScriptedResponse(
                tool_calls=_tool_calls(rng, tools, number, response, one_deferred_call_per_response),
                gate=_gate(rng, _MODEL_GATE_CHANCE, f"{MODEL_GATE_PREFIX}{number}-{response}"),
                provider_faults=_provider_faults(rng, provider_faults, _TOOL_CALL_FAULTS),
            )
            for response in range(1, rng.randint(1, 3) + 1)
        ]
        answer = ScriptedResponse(
            text=f"Turn {number} of {session_id} is done.",
            gate=_gate(rng, _MODEL_GATE_CHANCE, f"{MODEL_GATE_PREFIX}{number}-final"),
            provider_faults=_provider_faults(rng, provider_faults, _ANSWER_FAULTS),
        )
        turns.append(
            PlannedTurn(
                message=f"Message {number} of {session_id}: please see to my orders.",
                responses=(*responses, answer),
                sent_early=number > 1 and rng.random() < _EAGER_MESSAGE_CHANCE,
            )
        )
    return SessionPlan(session_id=session_id, turns=tuple(turns))


def _provider_faults(
    rng: random.Random, enabled: bool, kinds: tuple[ProviderFaultKind, ...]
) -> tuple[ProviderFault, ...]:
    # Drawn only when enabled, so a run without provider faults plans what the same seed always planned.
    if not enabled or rng.random() >= _PROVIDER_FAULT_CHANCE:
        return ()
    kind = rng.choice(kinds)
    if kind == "malformed_arguments":
        # On every attempt: the call must fail as a tool error, not pass on a retry of the model call.
        return (ProviderFault(kind, attempts=(1, 2, 3), requests=None),)
    if kind in ("rate_limit", "overloaded"):
        return (ProviderFault(kind, requests=(1,), retry_after_seconds=_RETRY_AFTER_SECONDS),)
    return (ProviderFault(kind, requests=None),)


def _gate(rng: random.Random, chance: float, name: str) -> str | None:
    return name if rng.random() < chance else None


def _tool_calls(
    rng: random.Random,
    tools: MatrixToolNames,
    turn: int,
    response: int,
    one_deferred_call_per_response: bool,
) -> tuple[ScriptedToolCall, ...]:
    retried = {tools.read, tools.idempotent_write}
    names = rng.choices(
        [tools.read, tools.idempotent_write, tools.approval_write, tools.single_attempt_write],
        weights=[3, 3, 2, 2],
        k=rng.randint(1, 3),
    )
    if one_deferred_call_per_response:
        reads = [name for name in names if name == tools.read]
        others = [name for name in names if name != tools.read]
        names = reads + others[:1]
    calls: list[ScriptedToolCall] = []
    for index, name in enumerate(names, start=1):
        tool_call_id = f"call-{turn}-{response}-{index}"
        calls.append(
            ScriptedToolCall(
                tool_name=name,
                arguments={"order_id": f"A-{turn}{response}{index}"},
                tool_call_id=tool_call_id,
                gate=_gate(rng, _TOOL_GATE_CHANCE, f"{TOOL_GATE_PREFIX}{tool_call_id}"),
                fail_attempts=(1,)
                if name in retried and rng.random() < _FIRST_ATTEMPT_FAILURE_CHANCE
                else (),
            )
        )
    return tuple(calls)
