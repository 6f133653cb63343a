"""The contract between the session Flow and a framework adapter.

A runner turns one model call of its framework into an `AgentTurnOutcome` and runs one deferred tool call
at a time. The session calls it from Steps, so every call may run again after a crash or a retry; a runner
keeps no state between calls and derives everything from its arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dex_agents._tool_context import current_tool_execution
from dex_agents.events import AgentEventWriter
from dex_agents.values import (
    AgentMessage,
    AgentToolCall,
    AgentUsage,
    FrameworkMessage,
    InteractionMode,
    ToolCallStatus,
    ToolEffect,
)

__all__ = [
    "APPROVAL_DEADLINE_PASSED",
    "DEFAULT_REJECTION_TOOL_RESULT",
    "OUTCOME_UNKNOWN_TOOL_RESULT",
    "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
    "TURN_FAILURE_NOTE_FOOTER",
    "TURN_FAILURE_NOTE_HEADER",
    "UNKNOWN_TOOL_POLICY",
    "AgentFrameworkRunner",
    "AgentTurnContext",
    "AgentTurnOutcome",
    "DeferredToolCall",
    "DeferredToolExecution",
    "ToolCallsRequested",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolPolicy",
    "TurnCompleted",
    "TurnContinued",
    "build_turn_failure_note",
    "current_tool_execution",
    "describe_tool_call_outcome",
    "resolve_tool_policy",
]

#: What the model sees for a rejected call whose user gave no reason.
DEFAULT_REJECTION_TOOL_RESULT = "The user rejected this tool call."
#: What the model sees for a call that may or may not have taken effect.
OUTCOME_UNKNOWN_TOOL_RESULT = (
    "The tool call's outcome is unknown: it stopped without returning a result, so it may or may not "
    "have taken effect. It will not be retried automatically."
)
#: The rejection message of a call whose approval deadline passed.
APPROVAL_DEADLINE_PASSED = "approval deadline passed"
#: First line of the note a failed turn leaves when tool calls ran.
TURN_FAILURE_NOTE_HEADER = "[Dex] The previous turn failed after these tool calls ran:"
#: Last line of that note.
TURN_FAILURE_NOTE_FOOTER = "Do not repeat these tool calls unless the user asks again."
#: Start of the error of a call whose Step never reached a Worker; the recovery detail follows after ": ".
TOOL_CALL_NOT_RUN_ERROR_PREFIX = "the tool did not run, so it is safe to call again"

_APPROVAL_BY_DEFAULT = {
    ToolEffect.READ: False,
    ToolEffect.IDEMPOTENT_WRITE: False,
    ToolEffect.NON_IDEMPOTENT_WRITE: True,
    ToolEffect.UNCLASSIFIED: True,
}


@dataclass(frozen=True)
class ToolPolicy:
    """How the session runs one tool.

    Attributes:
        effect: What running the tool may change; decides the Step and its retries.
        requires_approval: Whether a call waits for the user's approval; `None` uses the effect's
            default (approval for `non_idempotent_write` and `unclassified`).
    """

    effect: ToolEffect
    requires_approval: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "effect", ToolEffect(self.effect))

    @property
    def is_approval_required(self) -> bool:
        """Whether a call of this tool waits for approval, after applying the effect's default."""
        if self.requires_approval is not None:
            return self.requires_approval
        return _APPROVAL_BY_DEFAULT[self.effect]


UNKNOWN_TOOL_POLICY = ToolPolicy(ToolEffect.READ, requires_approval=False)
"""The policy for a call to a tool name the agent does not have.

Nothing runs for such a call: its tool Step only records `failed` with the framework's message, which the
model reads at its next call. So it needs neither an approval nor a single-attempt Step; runners defer it
with this policy instead of asking `resolve_tool_policy`, whose default for an unknown name
(`unclassified`) would hold the call for an approval first.
"""


def resolve_tool_policy(
    tool_name: str,
    tool_policies: Mapping[str, ToolPolicy],
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED,
    framework_effect: ToolEffect | None = None,
) -> ToolPolicy:
    """Return the policy of a tool.

    An explicit policy wins; otherwise the framework's metadata (such as MCP `readOnlyHint`) gives the
    effect; otherwise the session's default effect applies. The last two use the effect's default
    approval.

    Args:
        tool_name: The tool's name.
        tool_policies: Explicit policies by tool name.
        default_tool_effect: The effect of a tool with neither a policy nor metadata.
        framework_effect: The effect the framework's metadata declares, if any.

    Returns:
        The tool's policy.
    """
    explicit = tool_policies.get(tool_name)
    if explicit is not None:
        return explicit
    if framework_effect is not None:
        return ToolPolicy(framework_effect)
    return ToolPolicy(default_tool_effect)


@dataclass(frozen=True)
class DeferredToolCall:
    """One tool call the model asked for, which the session runs in its own Step.

    Attributes:
        tool_call_id: The call's ID: non-empty, without `/`, unique within the turn.
        tool_name: The tool's name.
        arguments: The call's arguments as JSON text.
        policy: The tool's policy, from `AgentTurnContext.resolve_tool_policy`.
        tool_source_reference: Opaque text the session keeps on the record for the tool Step.
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    policy: ToolPolicy
    tool_source_reference: str | None = None


@dataclass(frozen=True)
class TurnCompleted:
    """The model gave its final answer; the turn ends.

    Attributes:
        new_messages: Every item the turn produced after its user message, in order, across all of its
            model calls. The session stores them in one commit.
        usage: Usage of this model call only.
        turn_error: When set, the turn ends as failed with this error and is not retried. Use it for a
            failure a retry would only repeat, such as a tripped guardrail.
    """

    new_messages: Sequence[FrameworkMessage]
    usage: AgentUsage = field(default_factory=AgentUsage)
    turn_error: str | None = None


@dataclass(frozen=True)
class ToolCallsRequested:
    """The model asked for tools; the session runs them and calls the runner again.

    Attributes:
        framework_run_state: Non-empty framework state that continues the turn after the tools.
        tool_calls: One entry per call, in model order.
        usage: Usage of this model call only.
        new_messages: Reserved for runners that store messages incrementally, which this release does
            not support; a non-empty value fails the turn.
    """

    framework_run_state: str
    tool_calls: Sequence[DeferredToolCall]
    usage: AgentUsage = field(default_factory=AgentUsage)
    new_messages: Sequence[FrameworkMessage] = ()


@dataclass(frozen=True)
class TurnContinued:
    """The turn goes on with another model call, with no tool call in between.

    A runner returns it when its own loop decides to continue after an answer, such as a built-in loop
    whose continuation hook adds a user message. The session appends ``new_messages``, stores the run
    state, records the usage, and runs `RunModel` again in the same turn.

    Attributes:
        framework_run_state: Non-empty framework state that the next `run_model_step` receives.
        new_messages: Items to store now, in order; they may end with a user message. A runner that sets
            them must implement ``build_unfinished_turn_messages``, or the turn fails without a retry.
        usage: Usage of this model call only.
    """

    framework_run_state: str
    new_messages: Sequence[FrameworkMessage] = ()
    usage: AgentUsage = field(default_factory=AgentUsage)


#: What one `run_model_step` returns.
AgentTurnOutcome = TurnCompleted | ToolCallsRequested | TurnContinued


@dataclass(frozen=True)
class ToolExecutionResult:
    """The result of a tool that ran.

    Attributes:
        output: The text the model sees.
    """

    output: str


class ToolExecutionError(Exception):
    """A tool failure the model should see.

    The session records the call `failed` with this message and does not retry it. Any other exception
    from `execute_deferred_tool_call` fails the Step attempt instead.
    """

    def __init__(self, message: str) -> None:
        """Create the error.

        Args:
            message: What went wrong, as the model should read it.
        """
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class AgentTurnContext:
    """Committed session state for one `run_model_step` call.

    Attributes:
        flow_id: The session ID.
        turn_id: `"turn-<n>"`.
        attempt: The one-based `RunModel` attempt.
        messages: Every stored message in sequence order; the last user message belongs to this turn.
        framework_run_state: `None` for the turn's first model call, else the run state of this turn's last
            `ToolCallsRequested` or `TurnContinued`.
        tool_calls: Every tool call record of this turn by tool call ID; all are final.
        events: Writes events stamped with this turn, Step execution and attempt.
        tool_policies: The session's explicit tool policies.
        default_tool_effect: The effect of a tool without a policy or metadata.
        heartbeat_function: Records liveness; call `heartbeat()` instead.
        interaction_mode: Always `chat` in this release.
        session_settings: Always empty in this release.
    """

    flow_id: str
    turn_id: str
    attempt: int
    messages: Sequence[AgentMessage]
    framework_run_state: str | None
    tool_calls: Mapping[str, AgentToolCall]
    events: AgentEventWriter
    tool_policies: Mapping[str, ToolPolicy]
    default_tool_effect: ToolEffect
    heartbeat_function: Callable[[], Awaitable[None]]
    interaction_mode: InteractionMode = InteractionMode.CHAT
    session_settings: Mapping[str, object] = field(default_factory=dict[str, object])

    @property
    def is_resuming(self) -> bool:
        """Whether this model call continues the turn, after tool calls or a `TurnContinued`."""
        return self.framework_run_state is not None

    def recorded_tool_call(self, tool_call_id: str) -> AgentToolCall:
        """Return the record of one of this turn's tool calls.

        Args:
            tool_call_id: The call's ID.

        Returns:
            The call's final record.

        Raises:
            KeyError: If this turn has no such call.
        """
        record = self.tool_calls.get(tool_call_id)
        if record is None:
            raise KeyError(f"turn {self.turn_id} has no tool call record with ID {tool_call_id!r}")
        return record

    def resolve_tool_policy(self, tool_name: str, framework_effect: ToolEffect | None = None) -> ToolPolicy:
        """Return a tool's policy: explicit policy, else framework metadata, else the default effect.

        Args:
            tool_name: The tool's name.
            framework_effect: The effect the framework's metadata declares, if any.

        Returns:
            The tool's policy.
        """
        return resolve_tool_policy(tool_name, self.tool_policies, self.default_tool_effect, framework_effect)

    async def heartbeat(self) -> None:
        """Record liveness. The session already does this every 20 seconds."""
        await self.heartbeat_function()


@dataclass(frozen=True)
class DeferredToolExecution:
    """One approved tool call for `execute_deferred_tool_call`.

    Attributes:
        flow_id: The session ID.
        tool_call: The call's record.
        idempotency_key: `"<flow_id>/<turn_id>/<tool_call_id>"`, the same on every attempt.
        attempt: The one-based attempt of the tool Step.
        events: Writes events stamped with the turn, Step execution and attempt.
        heartbeat_function: Records liveness; call `heartbeat()` instead.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    events: AgentEventWriter
    heartbeat_function: Callable[[], Awaitable[None]]

    async def heartbeat(self) -> None:
        """Record liveness. The session already does this every 20 seconds."""
        await self.heartbeat_function()


@runtime_checkable
class AgentFrameworkRunner(Protocol):
    """What a framework adapter implements."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message with role `user` holding ``text`` as the framework's own item."""
        ...

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the framework make at most one model call and return its outcome, running no tool."""
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one tool call once and return its result, or raise `ToolExecutionError`."""
        ...


def describe_tool_call_outcome(record: AgentToolCall) -> str:
    """Return the text the model sees for a final tool call record.

    Args:
        record: A final record.

    Returns:
        The output of a successful call, or the text that stands for its failure, rejection or unknown
        outcome.

    Raises:
        ValueError: If the record is not final.
    """
    status = record.status
    if status is ToolCallStatus.SUCCEEDED:
        return record.output or ""
    if status is ToolCallStatus.FAILED:
        return f"The tool call failed: {record.error or 'no error was recorded'}"
    if status is ToolCallStatus.REJECTED:
        return record.rejection_message or DEFAULT_REJECTION_TOOL_RESULT
    if status is ToolCallStatus.OUTCOME_UNKNOWN:
        return OUTCOME_UNKNOWN_TOOL_RESULT
    raise ValueError(
        f"tool call {record.tool_call_id!r} is {status.value}, not final, so it has no outcome yet"
    )


def build_turn_failure_note(records: Iterable[AgentToolCall]) -> str:
    """Return the note a failed turn leaves about the tool calls it ran.

    Args:
        records: The turn's tool call records; records that are not final are left out.

    Returns:
        The header, one line per final record in deferral order, and the footer.

    Raises:
        ValueError: If no record is final.
    """
    final = sorted(
        (record for record in records if record.is_final), key=lambda record: record.deferral_order
    )
    if not final:
        raise ValueError("a turn-failure note needs at least one final tool call record")
    lines = [TURN_FAILURE_NOTE_HEADER]
    for record in final:
        outcome = describe_tool_call_outcome(record)
        lines.append(f"- {record.tool_name} {record.arguments} -> {record.status.value}: {outcome}")
    lines.append(TURN_FAILURE_NOTE_FOOTER)
    return "\n".join(lines)
