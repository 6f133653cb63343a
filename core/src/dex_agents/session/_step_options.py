"""The options of every session Step, as one table keyed by Step type.

The SDK replaces a Step's own options with the options of the movement that schedules it, so every
movement carries the complete set (durability, timeouts, retries, locks, loads and failure route), built
here from the Step type's rule and what the movement loads. The table names Steps, it does not import them:
`SessionTransitions`, the one module that knows every Step class, attaches the failure routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from dex import Attribute, AttributeMap, RetryPolicy, StepDurability, StepOptions

from dex_agents.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
)
from dex_agents.session._message_reads import ChunkLoads
from dex_agents.values import ToolEffect

__all__ = [
    "CANCEL_TOOL_TASK_ATTEMPTS",
    "CANCEL_TOOL_TASK_RETRY_WINDOW",
    "CANCEL_TOOL_TASK_TIMEOUT",
    "NO_LOADS",
    "POLL_TOOL_TASK_TIMEOUT",
    "RETRYING_EFFECTS",
    "RUN_MODEL_ATTEMPTS",
    "RUN_MODEL_HEARTBEAT_TIMEOUT",
    "RUN_MODEL_RETRY_WINDOW",
    "RUN_MODEL_TIMEOUT",
    "SINGLE_ATTEMPT_TOOL_ATTEMPTS",
    "STEP_RULES",
    "TOOL_ATTEMPTS",
    "TOOL_CALL_TIMEOUT",
    "MovementLoads",
    "StepRule",
    "failure_route_of",
    "step_options",
]

RUN_MODEL_TIMEOUT = timedelta(minutes=15)
RUN_MODEL_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
RUN_MODEL_ATTEMPTS = 3
RUN_MODEL_RETRY_WINDOW = timedelta(minutes=30)
TOOL_ATTEMPTS = 3
# The SDK documents two hours as the default method timeout, but servers apply their own default when the
# option is unset (older Dex Servers use 30 seconds), so tool Steps state it.
TOOL_CALL_TIMEOUT = timedelta(hours=2)
SINGLE_ATTEMPT_TOOL_ATTEMPTS = 1
# A poll only reads the task, so it is bounded far below a tool call.
POLL_TOOL_TASK_TIMEOUT = timedelta(minutes=10)
CANCEL_TOOL_TASK_TIMEOUT = timedelta(seconds=30)
CANCEL_TOOL_TASK_ATTEMPTS = 3
CANCEL_TOOL_TASK_RETRY_WINDOW = timedelta(minutes=2)

#: The effects whose tool Steps retry; a call of any other effect runs at most once.
RETRYING_EFFECTS = frozenset({ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE})

_SYNC = StepDurability.SYNC
_NO_CHUNKS = ChunkLoads()


@dataclass(frozen=True)
class StepRule:
    """What one Step type's options hold whatever movement reaches it.

    Every Step is SYNC for both methods. A Step without a ``retry`` retries as the server's default does,
    without end: the Steps that end a turn or record a call must not give up.

    Attributes:
        execute_timeout: The limit of one ``execute`` attempt.
        heartbeat_timeout: How long an attempt may go without a heartbeat.
        retry: The ``execute`` retry policy; `None` for the server's default.
        locks: The Attributes ``execute`` locks.
        loads_messages: Loads the `AgentMessages` window, and the message chunks the movement names.
        loads_records: Loads every `AgentToolCalls` record.
        loads_steered: Loads `SteeredUserMessages`.
        loads_answers: Loads every `InterruptResolutions` instance.
        waits_on_records: ``wait_for`` loads the records the movement names too (``execute`` always does).
        waits_on_answers: ``wait_for`` loads the answers the movement names too (``execute`` always does).
        failure_route: The Step that an ``execute`` out of retries proceeds to.
        failure_route_without_retries: The route of a call whose effect does not retry, when it differs.
    """

    execute_timeout: timedelta | None = None
    heartbeat_timeout: timedelta | None = None
    retry: RetryPolicy | None = None
    locks: tuple[Attribute[Any], ...] = ()
    loads_messages: bool = False
    loads_records: bool = False
    loads_steered: bool = False
    loads_answers: bool = False
    waits_on_records: bool = False
    waits_on_answers: bool = False
    failure_route: str | None = None
    failure_route_without_retries: str | None = None


@dataclass(frozen=True)
class MovementLoads:
    """What one movement loads beyond its Step type's rule.

    Attributes:
        chunks: The message chunks (of a Step whose rule loads messages).
        records: The `AgentToolCalls` instances, by tool call ID.
        answers: The `InterruptResolutions` instances, by interrupt ID.
    """

    chunks: ChunkLoads = _NO_CHUNKS
    records: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()


#: A movement that loads nothing beyond its Step type's rule.
NO_LOADS = MovementLoads()


_MODEL_CALL = StepRule(
    execute_timeout=RUN_MODEL_TIMEOUT,
    heartbeat_timeout=RUN_MODEL_HEARTBEAT_TIMEOUT,
    retry=RetryPolicy(maximum_attempts=RUN_MODEL_ATTEMPTS, total_duration=RUN_MODEL_RETRY_WINDOW),
    loads_messages=True,
    failure_route="RecordTurnFailure",
)
_TOOL_FAILURE = StepRule()

#: Every session Step type's rule. `tests/test_unit_step_options.py` pins each against the design.
STEP_RULES = MappingProxyType(
    {
        # Stores the first message.
        "StartAgentSession": StepRule(loads_messages=True),
        # Starts no turn while cancel_turn decides (TurnCancellationRequest), and execute_plan cannot accept
        # a second approval while this Step consumes the first (PendingPlanExecution).
        "AwaitUserMessage": StepRule(
            locks=(TURN_CANCELLATION_REQUEST, PENDING_PLAN_EXECUTION), loads_messages=True
        ),
        # One model call with a timeout, three attempts, and the failure route.
        "RunModel": StepRule(
            execute_timeout=_MODEL_CALL.execute_timeout,
            heartbeat_timeout=_MODEL_CALL.heartbeat_timeout,
            retry=_MODEL_CALL.retry,
            loads_messages=True,
            loads_records=True,
            loads_steered=True,
            failure_route=_MODEL_CALL.failure_route,
        ),
        # RunModel's, loading only the messages it summarizes.
        "CompactContext": _MODEL_CALL,
        # Keeps the turn's unstored items and writes the note.
        "RecordTurnFailure": StepRule(loads_messages=True, loads_records=True),
        "ResumeTurn": StepRule(locks=(PENDING_INTERRUPTS,), loads_records=True, loads_steered=True),
        # Its retry is the server's default, like the other Steps that end a turn: it must not give up.
        "ApplyTurnControl": StepRule(
            locks=(TURN_CANCELLATION_REQUEST,), loads_messages=True, loads_records=True
        ),
        # Both locks cancel_turn holds, the records and every answer.
        "FinishTurnCancellation": StepRule(
            locks=(TURN_CANCELLATION_REQUEST, PENDING_INTERRUPTS), loads_records=True, loads_answers=True
        ),
        "AwaitToolApproval": StepRule(locks=(PENDING_INTERRUPTS,), loads_steered=True),
        # Also loads the record keyed by the question's interrupt ID, to find a collision with another call.
        "AwaitQuestionAnswer": StepRule(
            locks=(PENDING_INTERRUPTS,), loads_steered=True, waits_on_records=True, waits_on_answers=True
        ),
        "AwaitTimer": StepRule(loads_steered=True, waits_on_records=True),
        "CallTool": StepRule(
            execute_timeout=TOOL_CALL_TIMEOUT,
            retry=RetryPolicy(maximum_attempts=TOOL_ATTEMPTS),
            loads_steered=True,
            failure_route="RecordToolFailure",
        ),
        "CallSingleAttemptTool": StepRule(
            execute_timeout=TOOL_CALL_TIMEOUT,
            retry=RetryPolicy(maximum_attempts=SINGLE_ATTEMPT_TOOL_ATTEMPTS),
            loads_steered=True,
            failure_route="RecordToolOutcomeUnknown",
        ),
        "RecordToolFailure": _TOOL_FAILURE,
        "RecordToolOutcomeUnknown": _TOOL_FAILURE,
        # Takes no lock and loads no steering, so steering never abandons a started task.
        "PollToolTask": StepRule(
            execute_timeout=POLL_TOOL_TASK_TIMEOUT,
            retry=RetryPolicy(maximum_attempts=TOOL_ATTEMPTS),
            waits_on_records=True,
            failure_route="RecordToolFailure",
            failure_route_without_retries="RecordToolOutcomeUnknown",
        ),
        # RecordToolOutcomeUnknown keeps the cancellation, so a cancellation that keeps failing still ends
        # the call, and the turn.
        "CancelToolTask": StepRule(
            execute_timeout=CANCEL_TOOL_TASK_TIMEOUT,
            retry=RetryPolicy(
                maximum_attempts=CANCEL_TOOL_TASK_ATTEMPTS, total_duration=CANCEL_TOOL_TASK_RETRY_WINDOW
            ),
            failure_route="RecordToolOutcomeUnknown",
        ),
    }
)


def failure_route_of(step_type: str, effect: ToolEffect | None = None) -> str | None:
    """The Step that ``step_type``'s exhausted ``execute`` proceeds to, for a call of ``effect``."""
    rule = STEP_RULES[step_type]
    if effect is not None and effect not in RETRYING_EFFECTS and rule.failure_route_without_retries:
        return rule.failure_route_without_retries
    return rule.failure_route


def _message_maps(rule: StepRule, chunks: ChunkLoads) -> tuple[AttributeMap[Any], ...]:
    maps: list[AttributeMap[Any]] = []
    if rule.loads_messages:
        maps.append(AGENT_MESSAGES)
        # Every chunk is one whole-map load; listing hundreds of instances would cost bytes on each request.
        if chunks.whole_map:
            maps.append(AGENT_MESSAGE_CHUNKS)
    if rule.loads_records:
        maps.append(AGENT_TOOL_CALLS)
    return tuple(maps)


def step_options(step_type: str, loads: MovementLoads = NO_LOADS) -> StepOptions:
    """Return ``step_type``'s options for a movement with ``loads``, without its failure route.

    Raises:
        KeyError: If ``step_type`` is not a session Step.
    """
    rule = STEP_RULES[step_type]
    records = tuple(AGENT_TOOL_CALLS.load(key) for key in loads.records)
    answers = tuple(INTERRUPT_RESOLUTIONS.load_messages(key) for key in loads.answers)
    chunk_instances = loads.chunks.instances if rule.loads_messages else ()
    return StepOptions(
        execute_method_timeout=rule.execute_timeout,
        heartbeat_timeout=rule.heartbeat_timeout,
        execute_retry=rule.retry,
        wait_for_durability=_SYNC,
        execute_durability=_SYNC,
        execute_lock_attributes=tuple(attribute.lock() for attribute in rule.locks),
        execute_load_attribute_maps=_message_maps(rule, loads.chunks),
        execute_load_attribute_map_instances=(*chunk_instances, *records),
        execute_load_channels=(STEERED_USER_MESSAGES,) if rule.loads_steered else (),
        execute_load_channel_maps=(INTERRUPT_RESOLUTIONS,) if rule.loads_answers else (),
        execute_load_channel_map_instances=answers,
        wait_for_load_attribute_map_instances=records if rule.waits_on_records else (),
        wait_for_load_channel_map_instances=answers if rule.waits_on_answers else (),
    )
