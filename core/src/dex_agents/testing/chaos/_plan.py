"""Seeded chaos sessions: what each user says and what the scripted model answers, turn by turn.

Every turn mixes the four matrix tools: reads, idempotent writes, approved single-attempt writes and
single-attempt writes without approval. Some calls fail their first attempt (a Step retry without any
kill), and some tool runs and model calls stop at a gate, so the fault injector can kill the Worker
exactly inside them. The same seed always plans the same sessions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from dex_agents.testing._matrix_tools import MatrixToolNames
from dex_agents.testing._script import ScriptedResponse, ScriptedToolCall

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
) -> SessionPlan:
    """Plan one session's turns.

    Args:
        rng: The run's seeded random source.
        session_id: The session ID.
        tools: The names the agent gives the matrix tools.
        one_deferred_call_per_response: Put at most one call that is not a read in a response, after its
            reads (a harness that defers one call per response and runs reads inline).
        turn_range: The fewest and most turns.

    Returns:
        The plan.
    """
    turns: list[PlannedTurn] = []
    for number in range(1, rng.randint(*turn_range) + 1):
        responses = [
            ScriptedResponse(
                tool_calls=_tool_calls(rng, tools, number, response, one_deferred_call_per_response),
                gate=_gate(rng, _MODEL_GATE_CHANCE, f"{MODEL_GATE_PREFIX}{number}-{response}"),
            )
            for response in range(1, rng.randint(1, 3) + 1)
        ]
        answer = ScriptedResponse(
            text=f"Turn {number} of {session_id} is done.",
            gate=_gate(rng, _MODEL_GATE_CHANCE, f"{MODEL_GATE_PREFIX}{number}-final"),
        )
        turns.append(
            PlannedTurn(
                message=f"Message {number} of {session_id}: please see to my orders.",
                responses=(*responses, answer),
                sent_early=number > 1 and rng.random() < _EAGER_MESSAGE_CHANCE,
            )
        )
    return SessionPlan(session_id=session_id, turns=tuple(turns))


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
