"""The contract between the session Flow and a framework adapter.

A runner turns one model call of its framework into an `AgentTurnOutcome` and runs one deferred tool call
at a time. The session calls it from Steps, so every call may run again after a crash or a retry; a runner
keeps no state between calls and derives everything from its arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from dex_agents._tools._context import current_tool_execution
from dex_agents._tools._outcomes import (
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskStarted,
)
from dex_agents._tools._tasks import (
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
)
from dex_agents.events import AgentEventWriter
from dex_agents.limits import (
    MAX_TURN_FAILURE_NOTE_BYTES,
    TURN_FAILURE_NOTE_CUT_MARKER,
    bounded_text,
    utf8_size,
)
from dex_agents.values import (
    AgentMessage,
    AgentPlan,
    AgentToolCall,
    AgentUsage,
    CancellationReason,
    ContextSummary,
    FrameworkMessage,
    InteractionMode,
    QuestionAnswer,
    ToolCallStatus,
    ToolEffect,
)

__all__ = [
    "APPROVAL_DEADLINE_PASSED",
    "DEFAULT_REJECTION_TOOL_RESULT",
    "OUTCOME_UNKNOWN_TOOL_RESULT",
    "QUESTION_DEADLINE_PASSED",
    "QUESTION_DECLINED_TOOL_RESULT",
    "STEERED_REJECTION_MESSAGE",
    "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
    "TOOL_OUTPUT_CUT_NOTE",
    "TOOL_TASK_CANCELLED_ERROR",
    "TURN_CANCELLED_NOTE_HEADER",
    "TURN_CANCELLED_REJECTION_MESSAGE",
    "TURN_FAILURE_NOTE_FOOTER",
    "TURN_FAILURE_NOTE_HEADER",
    "TURN_STEERED_NOTE_HEADER",
    "UNKNOWN_TOOL_POLICY",
    "AgentFrameworkRunner",
    "AgentTurnContext",
    "AgentTurnOutcome",
    "DeferredToolCall",
    "DeferredToolExecution",
    "DeferredToolOutcome",
    "ModelCallMetadata",
    "ModelRequestParameters",
    "ModelToolDescription",
    "PlanModeRunner",
    "ToolCallsRequested",
    "ToolDescriber",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolInputRequested",
    "ToolNamesRunner",
    "ToolPolicy",
    "ToolTaskCancellation",
    "ToolTaskCanceller",
    "ToolTaskPending",
    "ToolTaskPoll",
    "ToolTaskPollOutcome",
    "ToolTaskPoller",
    "ToolTaskStarted",
    "TurnCompleted",
    "TurnContinued",
    "UnfinishedTurnMessageBuilder",
    "UnknownToolPolicyError",
    "build_turn_control_note",
    "build_turn_failure_note",
    "cancellation_rejection_message",
    "current_tool_execution",
    "describe_tool_call_outcome",
    "resolve_tool_policy",
    "server_endpoint",
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
#: The rejection message of a call whose question's deadline passed (and the answer a task receives).
QUESTION_DEADLINE_PASSED = "question deadline passed"
#: The rejection message of a call whose question the user declined without a message.
QUESTION_DECLINED_TOOL_RESULT = "The user declined to answer."
#: The error of a started task that `cancel_turn` abandoned; the call records `outcome_unknown`.
TOOL_TASK_CANCELLED_ERROR = (
    "the turn was cancelled while the tool's task was running; the task may have taken effect"
)
#: First line of the note a failed turn leaves when tool calls ran.
TURN_FAILURE_NOTE_HEADER = "[Dex] The previous turn failed after these tool calls ran:"
#: Last line of that note.
TURN_FAILURE_NOTE_FOOTER = "Do not repeat these tool calls unless the user asks again."
#: Start of the error of a call whose Step never reached a Worker; the recovery detail follows after ": ".
TOOL_CALL_NOT_RUN_ERROR_PREFIX = "the tool did not run, so it is safe to call again"
#: The rejection message of a call that a steered user message abandoned before it started.
TOOL_OUTPUT_CUT_NOTE = (
    "[Dex] The tool's output was cut: it is {size} bytes, and only the first {shown} are shown here. "
    "The whole output is stored with the session, where the user can read it; if you need more of it, "
    "call the tool again for a narrower part."
)
"""The note after the part of a large tool output that the model sees (`tool_output_view`)."""

STEERED_REJECTION_MESSAGE = '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
#: The rejection message of a call that `cancel_turn` abandoned before it started.
TURN_CANCELLED_REJECTION_MESSAGE = '{"status":"cancelled","reason":"turn_cancelled_by_user"}'
#: First line of the note a steered turn leaves when its runner stores no unfinished-turn messages.
TURN_STEERED_NOTE_HEADER = "[Dex] The user steered the conversation after these tool calls ran:"
#: First line of the note a cancelled turn leaves when its runner stores no unfinished-turn messages.
TURN_CANCELLED_NOTE_HEADER = "[Dex] The user stopped the previous turn after these tool calls ran:"

_CANCELLATION_REJECTION_MESSAGES = {
    CancellationReason.STEERED: STEERED_REJECTION_MESSAGE,
    CancellationReason.TURN_CANCELLED: TURN_CANCELLED_REJECTION_MESSAGE,
}
_TURN_CONTROL_NOTE_HEADERS = {
    CancellationReason.STEERED: TURN_STEERED_NOTE_HEADER,
    CancellationReason.TURN_CANCELLED: TURN_CANCELLED_NOTE_HEADER,
}

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
    framework_policy: ToolPolicy | None = None,
) -> ToolPolicy:
    """Return the policy of a tool.

    An explicit policy wins; otherwise the framework's metadata gives it: a whole policy (such as
    `policy_from_mcp_annotations` for a trusted MCP server), else an effect with its default approval;
    otherwise the session's default effect applies, with its default approval.

    Args:
        tool_name: The tool's name.
        tool_policies: Explicit policies by tool name.
        default_tool_effect: The effect of a tool with neither a policy nor metadata.
        framework_effect: The effect the framework's metadata declares, if any.
        framework_policy: The policy the framework's metadata declares, if any; wins over
            ``framework_effect``.

    Returns:
        The tool's policy.
    """
    explicit = tool_policies.get(tool_name)
    if explicit is not None:
        return explicit
    if framework_policy is not None:
        return framework_policy
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
class ModelRequestParameters:
    """The sampling and limit parameters a model call sent, for the ``chat`` span of tracing.

    Fill what the request set and leave the rest unset: an unset parameter is left off the span, since the
    provider's default applies.

    Attributes:
        max_tokens: The most tokens the answer may have, as ``gen_ai.request.max_tokens``.
        temperature: As ``gen_ai.request.temperature``.
        top_p: As ``gen_ai.request.top_p``.
        stop_sequences: As ``gen_ai.request.stop_sequences``.
        frequency_penalty: As ``gen_ai.request.frequency_penalty``.
        presence_penalty: As ``gen_ai.request.presence_penalty``.
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop_sequences: Sequence[str] = ()
    frequency_penalty: float | None = None
    presence_penalty: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_sequences", tuple(self.stop_sequences))


@dataclass(frozen=True)
class ModelToolDescription:
    """One tool as a model call offered it, for ``gen_ai.tool.definitions`` when content is recorded.

    Attributes:
        name: The tool's name.
        description: What the tool does, as the model read it.
        parameters: The JSON schema of its arguments, as JSON text.
        tool_type: The GenAI conventions' tool type; ``function`` for a tool the session runs.
    """

    name: str
    description: str | None = None
    parameters: str | None = None
    tool_type: str = "function"


def server_endpoint(url: object) -> tuple[str | None, int | None]:
    """Return the host and port of a model endpoint's URL, for `ModelCallMetadata`'s server fields.

    A URL without a port takes its scheme's (443 for ``https``, 80 for ``http``). Anything that is not a
    URL with a host, such as `None`, an empty string or a masked secret, gives ``(None, None)``: a runner
    reports an endpoint only when the framework names one, never a provider's default it assumes.

    Args:
        url: The base URL the framework's client calls, as text (or an object whose text is the URL,
            such as ``httpx.URL``).

    Returns:
        ``(host, port)``, or ``(None, None)``.
    """
    if url is None:
        return None, None
    text = url if isinstance(url, str) else str(url)
    if not text:
        return None, None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None, None
    if not parts.hostname:
        return None, None
    return parts.hostname, port if port is not None else _DEFAULT_PORTS.get(parts.scheme)


_DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True)
class ModelCallMetadata:
    """What the framework reports about one model call, for the ``chat`` span of tracing.

    It only names and annotates the span (``dex_agents.otel``); the session never stores it, so a runner may
    fill what its framework reports and leave the rest `None`. Use the provider's own values: the model
    names as sent and as answered, the provider as the GenAI conventions name it (``openai``,
    ``anthropic``, ``gcp.gemini``, ``aws.bedrock``, ...), the provider's response ID, and its raw finish
    reasons (``stop``, ``tool_calls``, ``length``, ...).

    Every field has a default, so a runner fills only what its framework exposes. The system instructions
    and tool definitions are content: tracing records them only when the application opts in to content.

    Attributes:
        request_model: The model the request named, as ``gen_ai.request.model``; it also names the span.
        response_model: The model that answered, as ``gen_ai.response.model``.
        provider_name: The provider, as ``gen_ai.provider.name``.
        response_id: The provider's ID of the response, as ``gen_ai.response.id``.
        finish_reasons: Why the model stopped, one per choice, as ``gen_ai.response.finish_reasons``.
        request_parameters: The sampling and limit parameters the request set.
        is_streaming: Whether the request streamed its answer, as ``gen_ai.request.stream``.
        server_address: The provider endpoint's host, as ``server.address``; leave it unset when the
            framework does not say which endpoint it called.
        server_port: That endpoint's port, as ``server.port``.
        time_to_first_chunk_seconds: For a streaming request, the seconds from the request to the first
            chunk of the answer, as ``gen_ai.response.time_to_first_chunk``.
        cache_creation_input_tokens: Input tokens the provider wrote to its prompt cache, as
            ``gen_ai.usage.cache_creation.input_tokens``, when it reports them.
        system_instructions: The system instructions the model received, as ``gen_ai.system_instructions``.
        tool_definitions: The tools the call offered the model, as ``gen_ai.tool.definitions``.
    """

    request_model: str | None = None
    response_model: str | None = None
    provider_name: str | None = None
    response_id: str | None = None
    finish_reasons: Sequence[str] = ()
    request_parameters: ModelRequestParameters = field(default_factory=ModelRequestParameters)
    is_streaming: bool = False
    server_address: str | None = None
    server_port: int | None = None
    time_to_first_chunk_seconds: float | None = None
    cache_creation_input_tokens: int | None = None
    system_instructions: str | None = None
    tool_definitions: Sequence[ModelToolDescription] = ()

    def __post_init__(self) -> None:
        # A caller's list could change after the outcome is returned; the span reads one set of values.
        object.__setattr__(self, "finish_reasons", tuple(self.finish_reasons))
        object.__setattr__(self, "tool_definitions", tuple(self.tool_definitions))


@dataclass(frozen=True)
class TurnCompleted:
    """The model gave its final answer; the turn ends.

    Attributes:
        new_messages: The turn's items that the session has not stored yet, in order. For a runner that
            never sets `ToolCallsRequested.new_messages`, that is every item the turn produced after its
            user messages, across all of its model calls. The session stores them in one commit.
        usage: Usage of this model call only.
        turn_error: When set, the turn ends as failed with this error and is not retried. Use it for a
            failure a retry would only repeat, such as a tripped guardrail.
        model_call_metadata: What the framework reports about the model call, for tracing only.
    """

    new_messages: Sequence[FrameworkMessage]
    usage: AgentUsage = field(default_factory=AgentUsage)
    turn_error: str | None = None
    model_call_metadata: ModelCallMetadata | None = None


@dataclass(frozen=True)
class ToolCallsRequested:
    """The model asked for tools; the session runs them and calls the runner again.

    Attributes:
        framework_run_state: Non-empty framework state that continues the turn after the tools.
        tool_calls: One entry per call, in model order.
        usage: Usage of this model call only.
        new_messages: Items to store now, in the commit that records the tool calls, for a runner that
            stores its messages incrementally. Such a runner must implement
            `UnfinishedTurnMessageBuilder`, or the turn fails without a retry.
        model_call_metadata: What the framework reports about the model call, for tracing only.
    """

    framework_run_state: str
    tool_calls: Sequence[DeferredToolCall]
    usage: AgentUsage = field(default_factory=AgentUsage)
    new_messages: Sequence[FrameworkMessage] = ()
    model_call_metadata: ModelCallMetadata | None = None


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
        model_call_metadata: What the framework reports about the model call, for tracing only.
    """

    framework_run_state: str
    new_messages: Sequence[FrameworkMessage] = ()
    usage: AgentUsage = field(default_factory=AgentUsage)
    model_call_metadata: ModelCallMetadata | None = None


#: What one `run_model_step` returns.
AgentTurnOutcome = TurnCompleted | ToolCallsRequested | TurnContinued


#: What one `execute_deferred_tool_call` returns: the tool's result, a question it asks before it takes any
#: effect, or a remote task it started. A runner whose tools only return results returns
#: `ToolExecutionResult` alone, as in 0.1.0.
DeferredToolOutcome = ToolExecutionResult | ToolInputRequested | ToolTaskStarted


@dataclass(frozen=True)
class AgentTurnContext:
    """Committed session state for one `run_model_step` call.

    Attributes:
        flow_id: The session ID.
        turn_id: `"turn-<n>"`.
        attempt: The one-based `RunModel` attempt.
        messages: The stored messages in sequence order; the last user message belongs to this turn. A
            runner with the compaction capability (`ContextCompactionRunner`) receives only the messages
            after `context_summary`; any other runner receives every stored message, which is all of them
            unless retention deleted the oldest.
        framework_run_state: `None` for the turn's first model call, else the run state of this turn's last
            `ToolCallsRequested` or `TurnContinued`.
        tool_calls: Every tool call record of this turn by tool call ID; all are final.
        events: Writes events stamped with this turn, Step execution and attempt.
        tool_policies: The session's explicit tool policies.
        default_tool_effect: The effect of a tool without a policy or metadata.
        heartbeat_function: Records liveness; call `heartbeat()` instead.
        interaction_mode: The turn's mode. A runner with `supports_plan_mode` offers only ``write_todos``
            in a `planning` turn; every other runner sees only `chat` and `executing`.
        session_settings: The settings this turn started with (a JSON object), empty when there are none;
            an update during the turn applies to the next turn, so every model call and retry of this turn
            sees the same settings.
        context_summary: The summary of the messages before `messages`, for a runner with the compaction
            capability once the session compacted; else `None`.
        enabled_built_in_tools: The built-in tools the session enables (``ask_user``, ``durable_wait``,
            ``write_todos``); offer their `BUILT_IN_TOOL_DEFINITIONS` to the model like any other tool.
        plan: The session's committed plan, or `None` before ``write_todos`` first wrote one; a runner
            with `supports_plan_mode` shows it to the model with `build_plan_note`.
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
    context_summary: ContextSummary | None = None
    enabled_built_in_tools: tuple[str, ...] = ()
    plan: AgentPlan | None = None

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

    def resolve_tool_policy(
        self,
        tool_name: str,
        framework_effect: ToolEffect | None = None,
        *,
        framework_policy: ToolPolicy | None = None,
    ) -> ToolPolicy:
        """Return a tool's policy: explicit policy, else framework metadata, else the default effect.

        Args:
            tool_name: The tool's name.
            framework_effect: The effect the framework's metadata declares, if any.
            framework_policy: The policy the framework's metadata declares, if any (such as
                `policy_from_mcp_annotations` for a trusted MCP server); wins over ``framework_effect``.

        Returns:
            The tool's policy.
        """
        return resolve_tool_policy(
            tool_name, self.tool_policies, self.default_tool_effect, framework_effect, framework_policy
        )

    async def heartbeat(self) -> None:
        """Record liveness. The session already does this every 20 seconds."""
        await self.heartbeat_function()


async def _no_checkpoint(checkpoint: str) -> None:
    raise RuntimeError("this DeferredToolExecution cannot save a heartbeat checkpoint")


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
        heartbeat_checkpoint: The checkpoint an earlier attempt of this tool Step saved with
            `save_heartbeat_checkpoint`, such as the handle of a task it started; `None` when there is
            none. Dex keeps checkpoints best-effort, so the tool must still tolerate `None` after a crash.
        supports_tool_tasks: Whether the runner polls tasks (`ToolTaskPoller`), so the tool may return
            `ToolTaskStarted`; without it the tool runs its work to the end inside the call.
        checkpoint_function: Saves a checkpoint; call `save_heartbeat_checkpoint()` instead.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    events: AgentEventWriter
    heartbeat_function: Callable[[], Awaitable[None]]
    heartbeat_checkpoint: str | None = None
    supports_tool_tasks: bool = False
    checkpoint_function: Callable[[str], Awaitable[None]] = _no_checkpoint

    @property
    def input_answers(self) -> tuple[QuestionAnswer, ...]:
        """The answers to the questions this call asked, oldest first; the tool asks them again in order."""
        return self.tool_call.input_answers

    async def heartbeat(self) -> None:
        """Record liveness. The session already does this every 20 seconds."""
        await self.heartbeat_function()

    async def save_heartbeat_checkpoint(self, checkpoint: str) -> None:
        """Save ``checkpoint`` with this attempt's heartbeats, for a retried attempt to read.

        Every later heartbeat of the attempt repeats it, and the next attempt of the same tool Step reads it
        as ``heartbeat_checkpoint``. Save the handle of remote work as soon as it exists, so a retried
        attempt resumes that work instead of starting it again.

        Args:
            checkpoint: Opaque text; prefix it so your code reads back only checkpoints it wrote.
        """
        await self.checkpoint_function(checkpoint)


@runtime_checkable
class AgentFrameworkRunner(Protocol):
    """What a framework adapter implements."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message with role `user` holding ``text`` as the framework's own item."""
        ...

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the framework make at most one model call and return its outcome, running no tool."""
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one tool call once and return its result, or raise `ToolExecutionError`.

        A runner whose tools only return results declares ``-> ToolExecutionResult``, which satisfies this
        protocol. Tools may also stop the call with `ToolInputRequested` or `ToolTaskStarted`, usually
        through `dex_agents.ask_user_input` and `dex_agents.start_tool_task`, which the session sees even
        when the framework turns the tool's exception into an error result.
        """
        ...


@runtime_checkable
class PlanModeRunner(Protocol):
    """Optional runner capability: plan mode, which `AgentSessionOptions.plan_mode_enabled` requires.

    A runner that sets ``supports_plan_mode`` to `True` offers only ``write_todos`` in a `planning` turn
    (`AgentTurnContext.interaction_mode`) and shows the model `build_plan_note` of `AgentTurnContext.plan`
    as user text before the turn's messages.
    """

    @property
    def supports_plan_mode(self) -> bool:
        """`True` when the runner honours planning turns as described above."""
        ...


@runtime_checkable
class ToolDescriber(Protocol):
    """Optional runner capability: what a tool does, for tracing's ``execute_tool`` spans.

    With `AgentSessionOptions.tracing` on, a tool Step asks the runner for the description of the tool it
    runs and sets it as ``gen_ai.tool.description``. Answer from what the runner already holds (its tool
    definitions, a cached MCP listing); never call a model or a server for it.
    """

    def describe_tool(self, tool_name: str) -> str | None:
        """Return what the tool named ``tool_name`` does, or `None` when the runner does not know.

        Args:
            tool_name: The tool's name, as the model called it.

        Returns:
            The tool's description, or `None`.
        """
        ...


@runtime_checkable
class ToolNamesRunner(Protocol):
    """Optional runner capability: the names of the agent's tools, so the session checks `tool_policies`.

    With it, `AgentSessionFlow` refuses (`UnknownToolPolicyError`) a policy for a name the agent has no
    tool by, such as a misspelling, which would otherwise leave the real tool unclassified. When the
    method returns names at construction the Flow is refused then; when it returns `None` the session asks
    again after each `run_model_step` and ends a turn whose runner then lists names that a policy misses
    with a ``turn_error`` of the same text, before any of that response's tool calls run.
    """

    def agent_tool_names(self) -> Collection[str] | None:
        """Return the names the model calls the agent's own tools by, or `None` when not known yet.

        Answer from what the runner already holds: no I/O and no model call. Return `None` while some
        tools are only known once the agent runs (a toolset listed from an MCP server, a dynamic
        toolset), and the names once they are. The built-in tools (``ask_user``, ``durable_wait``,
        ``write_todos``) need not be listed: the session counts them. Nor need an
        `dex_agents.mcp.McpToolSource`'s before it listed: a key shaped like its names
        (``<server>__<tool>``) counts as real while no listed name belongs to that server, so return the
        source's `agent_tool_names` beside your own and its servers' keys are checked once listed.

        Returns:
            The tool names, or `None`.
        """
        ...


class UnknownToolPolicyError(ValueError):
    """`AgentSessionOptions.tool_policies` names a tool the agent does not have.

    The message names the key, the closest real tool name when one is close, and the agent's tools.
    """


@runtime_checkable
class UnfinishedTurnMessageBuilder(Protocol):
    """Optional runner capability: the items a turn has not stored when it ends without a final answer.

    The session calls it when a turn fails (`RecordTurnFailure`, before the turn-failure note) and when
    steering or `cancel_turn` ends a turn (instead of the steered or cancelled note), so the stored
    transcript keeps the turn's own items. A runner that stores items incrementally
    (`ToolCallsRequested.new_messages`) must implement it; a runner that keeps the turn's items in its run
    state should, so a steered or cancelled turn keeps its exact transcript.
    """

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the turn's items that are not stored yet, in order.

        ``turn`` is the committed state: the stored messages, the run state of the turn's last
        `ToolCallsRequested` (`None` if there was none), and every tool call record, all final. The result
        must hold a tool result for every tool call the stored and returned items contain, built from the
        final records (`describe_tool_call_outcome`), so the next model request has no dangling call. Return
        an empty sequence when nothing is unstored. If it raises, or returns anything but messages with a
        `user`, `assistant` or `tool` role and a string ``framework_item``, the session logs a warning and
        stores the note instead. It may run while the session holds the cancellation lock, so keep it to
        local work, such as decoding the run state; it must not call a model.

        Args:
            turn: The turn's committed state.

        Returns:
            The unstored items.
        """
        ...


def cancellation_rejection_message(reason: CancellationReason) -> str:
    """Return the rejection message of a call that steering or `cancel_turn` abandoned.

    Args:
        reason: Why the call was abandoned.

    Returns:
        `STEERED_REJECTION_MESSAGE` or `TURN_CANCELLED_REJECTION_MESSAGE`.
    """
    return _CANCELLATION_REJECTION_MESSAGES[CancellationReason(reason)]


def build_turn_control_note(
    records: Iterable[AgentToolCall],
    reason: CancellationReason,
    *,
    max_bytes: int = MAX_TURN_FAILURE_NOTE_BYTES,
) -> str:
    """Return the note a steered or cancelled turn leaves when its runner stores no unfinished messages.

    Args:
        records: The turn's tool call records; records that are not final are left out.
        reason: `steered` or `turn_cancelled`.
        max_bytes: The note's largest size in UTF-8 bytes, applied as `build_turn_failure_note` does.

    Returns:
        The turn-failure note's lines and footer, cut the same way, under `TURN_STEERED_NOTE_HEADER` or
        `TURN_CANCELLED_NOTE_HEADER`.

    Raises:
        ValueError: If no record is final.
    """
    header = _TURN_CONTROL_NOTE_HEADERS[CancellationReason(reason)]
    longer_by = utf8_size(header) - utf8_size(TURN_FAILURE_NOTE_HEADER)
    failure_note = build_turn_failure_note(records, max_bytes=max_bytes - longer_by)
    # The same lines and footer as the turn-failure note, so both notes always read alike.
    assert failure_note.startswith(TURN_FAILURE_NOTE_HEADER)
    return header + failure_note[len(TURN_FAILURE_NOTE_HEADER) :]


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


def tool_output_view(output: str, max_bytes: int) -> str:
    """Return what the model sees of a tool output: all of it, or its first part and `TOOL_OUTPUT_CUT_NOTE`.

    The session keeps an output larger than ``AgentSessionOptions.max_inline_tool_output_bytes`` apart and
    gives every runner this view as the call's result, so each framework shows its model the same text.

    Args:
        output: The tool's whole output.
        max_bytes: The view's largest size in UTF-8 bytes, note included.

    Returns:
        ``output`` when it fits; otherwise its first part, cut at a character boundary, a blank line, and
        the note, together at most ``max_bytes``.
    """
    size = utf8_size(output)
    if size <= max_bytes:
        return output
    # The note is longest when it names max_bytes as shown, so leaving room for that one always fits.
    longest_note = TOOL_OUTPUT_CUT_NOTE.format(size=f"{size:,}", shown=f"{max_bytes:,}")
    room = max(0, max_bytes - utf8_size(longest_note) - 2)
    head = output.encode("utf-8", errors="surrogatepass")[:room].decode("utf-8", errors="ignore")
    note = TOOL_OUTPUT_CUT_NOTE.format(size=f"{size:,}", shown=f"{utf8_size(head):,}")
    return f"{head}\n\n{note}"


def build_turn_failure_note(
    records: Iterable[AgentToolCall], *, max_bytes: int = MAX_TURN_FAILURE_NOTE_BYTES
) -> str:
    """Return the note a failed turn leaves about the tool calls it ran.

    The note holds the header, one ``- <tool_name> <arguments> -> <status>: <result>`` line per final
    record in deferral order, and the footer. When it would be longer than ``max_bytes``, the longest
    model-visible results are cut to an equal share of the room left, each ending with
    `TURN_FAILURE_NOTE_CUT_MARKER`, so a short result (such as a write's confirmation) stays whole. Only
    when the results alone cannot make room are the longest arguments cut the same way.

    Args:
        records: The turn's tool call records; records that are not final are left out.
        max_bytes: The note's largest size in UTF-8 bytes. The header, the footer, the tool names and a
            marker per cut value always stay, so a limit below their size yields a note above it.

    Returns:
        The note.

    Raises:
        ValueError: If no record is final.
    """
    final = sorted(
        (record for record in records if record.is_final), key=lambda record: record.deferral_order
    )
    if not final:
        raise ValueError("a turn-failure note needs at least one final tool call record")
    names = [record.tool_name for record in final]
    arguments = [record.arguments for record in final]
    statuses = [record.status.value for record in final]
    results = [describe_tool_call_outcome(record) for record in final]
    # Everything but the arguments and the results: the header, the footer, and each line's frame.
    frame = utf8_size(TURN_FAILURE_NOTE_HEADER) + utf8_size(TURN_FAILURE_NOTE_FOOTER) + len(final) + 1
    frame += sum(utf8_size(f"- {name}  -> {status}: ") for name, status in zip(names, statuses, strict=True))
    room = max_bytes - frame
    argument_sizes = [utf8_size(text) for text in arguments]
    result_sizes = [utf8_size(text) for text in results]
    if sum(argument_sizes) + sum(result_sizes) > room:
        marker = utf8_size(TURN_FAILURE_NOTE_CUT_MARKER)
        # What the results take once each is cut down to the marker alone.
        result_floor = sum(min(size, marker) for size in result_sizes)
        if sum(argument_sizes) + result_floor > room:
            argument_caps = _fair_shares(argument_sizes, room - result_floor)
            arguments = [_cut(text, cap) for text, cap in zip(arguments, argument_caps, strict=True)]
            argument_sizes = [utf8_size(text) for text in arguments]
        result_caps = _fair_shares(result_sizes, room - sum(argument_sizes))
        results = [_cut(text, cap) for text, cap in zip(results, result_caps, strict=True)]
    lines = [TURN_FAILURE_NOTE_HEADER]
    for name, argument, status, result in zip(names, arguments, statuses, results, strict=True):
        lines.append(f"- {name} {argument} -> {status}: {result}")
    lines.append(TURN_FAILURE_NOTE_FOOTER)
    return "\n".join(lines)


def _fair_shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Return a cap per size whose sum is at most ``budget``, cutting the largest sizes first.

    A size that fits an equal share of what is left stays whole; the larger ones all get that share.
    """
    caps = list(sizes)
    left = max(0, budget)
    pending = sorted(range(len(sizes)), key=lambda index: sizes[index])
    while pending:
        share = left // len(pending)
        index = pending[0]
        if sizes[index] > share:
            for rest in pending:
                caps[rest] = share
            break
        left -= sizes[index]
        pending.pop(0)
    return caps


def _cut(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` UTF-8 bytes with the marker, or the marker alone when it is longer."""
    if utf8_size(text) <= limit:
        return text
    cut = bounded_text(text, max(limit, utf8_size(TURN_FAILURE_NOTE_CUT_MARKER)))
    # A value cut to nothing reads "-> succeeded: [... cut ...]", without a second space.
    return cut.lstrip() if cut == TURN_FAILURE_NOTE_CUT_MARKER else cut
