"""The promises a chaos run checks, read from the tools' own ledger and the stored transcripts.

Each check is a pure function from what the run recorded to the violations it finds, so a unit test can
prove each one fails on the defect it names.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from dex_agents import AgentMessage, MessageRole
from dex_agents.testing._invocations import Invocation
from dex_agents.testing._transcript import stored_calls_without_result

__all__ = [
    "Violation",
    "idempotency_key_violations",
    "single_attempt_violations",
    "transcript_violations",
    "user_message_violations",
]


@dataclass(frozen=True)
class Violation:
    """A broken promise.

    Attributes:
        invariant: Which promise: ``single_attempt_write_ran_twice``, ``idempotency_key_changed``,
            ``idempotency_key_shared``, ``user_message_lost``, ``user_message_repeated``,
            ``user_messages_reordered``, ``tool_call_without_result``, ``next_request_refused`` or
            ``session_not_idle``.
        session_id: The session it happened in.
        detail: What exactly happened, with the IDs to look up.
    """

    invariant: str
    session_id: str
    detail: str


def _runs_by_call(
    invocations: Iterable[Invocation], tool_names: Collection[str]
) -> dict[tuple[str, str, str], list[Invocation]]:
    runs: dict[tuple[str, str, str], list[Invocation]] = defaultdict(list)
    for invocation in invocations:
        if invocation.kind == "tool" and invocation.tool_name in tool_names:
            runs[(invocation.session_id, invocation.turn_id, invocation.tool_call_id)].append(invocation)
    return runs


def single_attempt_violations(
    invocations: Iterable[Invocation], single_attempt_tools: Collection[str]
) -> list[Violation]:
    """Find single-attempt tool calls that ran more than once.

    Args:
        invocations: Every logged call of the run.
        single_attempt_tools: The names of the ``non_idempotent_write`` tools.

    Returns:
        One violation per call that ran twice or more.
    """
    return [
        Violation(
            "single_attempt_write_ran_twice",
            session_id,
            f"{runs[0].tool_name} call {tool_call_id} of {turn_id} ran {len(runs)} times "
            f"(attempts {[run.attempt for run in runs]}, Worker pids {[run.pid for run in runs]})",
        )
        for (session_id, turn_id, tool_call_id), runs in _runs_by_call(
            invocations, single_attempt_tools
        ).items()
        if len(runs) > 1
    ]


def idempotency_key_violations(
    invocations: Iterable[Invocation], idempotent_tools: Collection[str]
) -> list[Violation]:
    """Find idempotent writes whose runs did not all use one key of their own.

    Args:
        invocations: Every logged call of the run.
        idempotent_tools: The names of the ``idempotent_write`` tools.

    Returns:
        A violation per call whose runs used different (or empty) keys, and per key two calls shared.
    """
    violations: list[Violation] = []
    owners: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for call, runs in _runs_by_call(invocations, idempotent_tools).items():
        session_id, turn_id, tool_call_id = call
        keys = sorted({run.idempotency_key for run in runs})
        if len(keys) > 1 or not keys[0]:
            violations.append(
                Violation(
                    "idempotency_key_changed",
                    session_id,
                    f"{runs[0].tool_name} call {tool_call_id} of {turn_id} ran {len(runs)} times with the "
                    f"keys {keys}",
                )
            )
        for key in keys:
            owners[key].append(call)
    for key, calls in owners.items():
        if key and len(calls) > 1:
            violations.append(
                Violation("idempotency_key_shared", calls[0][0], f"the key {key!r} was used by calls {calls}")
            )
    return violations


def user_message_violations(
    session_id: str, sent: Sequence[str], stored: Sequence[AgentMessage]
) -> list[Violation]:
    """Compare the user messages a session was sent with the ones it stored.

    Args:
        session_id: The session.
        sent: Every message the session accepted, in the order it was sent.
        stored: Every stored message, in sequence order.

    Returns:
        A violation per lost or repeated message, and one when they are stored out of order.
    """
    expected = set(sent)
    kept = [
        message.text for message in stored if message.role is MessageRole.USER and message.text in expected
    ]
    counts = Counter(kept)
    violations = [
        Violation("user_message_lost", session_id, f"{text!r} was accepted but is not stored")
        for text in sent
        if counts[text] == 0
    ]
    violations.extend(
        Violation("user_message_repeated", session_id, f"{text!r} is stored {count} times")
        for text, count in counts.items()
        if count > 1
    )
    if not violations and kept != list(sent):
        violations.append(
            Violation("user_messages_reordered", session_id, f"sent {list(sent)}, stored {kept}")
        )
    return violations


def transcript_violations(session_id: str, stored: Sequence[AgentMessage]) -> list[Violation]:
    """Find stored tool calls without a stored result, which a provider would refuse.

    Args:
        session_id: The session.
        stored: Every stored message, in sequence order.

    Returns:
        One violation listing the calls, or none.
    """
    missing = stored_calls_without_result(stored)
    if not missing:
        return []
    return [Violation("tool_call_without_result", session_id, f"stored calls without a result: {missing}")]
