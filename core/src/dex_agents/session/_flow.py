"""`AgentSessionFlow`: one durable agent session per Flow execution."""

from __future__ import annotations

from typing import Any

from dex import Channel, Context, Flow, PersistenceSchema, RPCResult, Step, StepList, Stream, rpc

from dex_agents.limits import MAX_USER_MESSAGE_BYTES, unencodable_index, utf8_size
from dex_agents.persistence import (
    AGENT_MESSAGES,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TOOL_CALL_CANCELLATIONS,
    TOOL_CALL_RESULTS,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
    agent_events_stream,
)
from dex_agents.runner import AgentFrameworkRunner
from dex_agents.session import _turn_control_rpcs
from dex_agents.session._control import ApplyTurnControl, FinishTurnCancellation
from dex_agents.session._runtime import SessionRuntime
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._state import (
    now,
    parse_time,
    read_interrupts,
    read_last_messages,
    read_state,
    read_usage,
)
from dex_agents.session._tool_steps import (
    AwaitToolApproval,
    CallSingleAttemptTool,
    CallTool,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
)
from dex_agents.session._turn_steps import (
    AwaitUserMessage,
    RecordTurnFailure,
    ResumeTurn,
    RunModel,
    StartAgentSession,
)
from dex_agents.values import (
    AgentEvent,
    AgentInterruptResolution,
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentToolCall,
    AgentUserMessage,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    InterruptKind,
    ListAgentMessagesRequest,
    PendingUserMessage,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
)

__all__ = ["SNAPSHOT_MESSAGE_LIMIT", "AgentSessionFlow"]


def _pending_user_messages(
    context: Context, channel: Channel[AgentUserMessage]
) -> tuple[PendingUserMessage, ...]:
    return tuple(
        PendingUserMessage(message_id=message.message_id, message=message.value)
        for message in channel.pending_messages(context)
    )


#: Messages a snapshot returns: the newest ones.
SNAPSHOT_MESSAGE_LIMIT = 200
_PAGE_LIMIT_MAX = 200


class AgentSessionFlow(Flow[AgentSessionStartInput]):
    """The session Flow: every model call and every tool call is its own Step.

    Register one instance per agent, each with its own ``flow_type``, and use the same instance for the
    Worker's and the Client's Registry. The session never completes by itself; stop it with
    `AsyncClient.stop_flow`.
    """

    def __init__(
        self,
        runner: AgentFrameworkRunner,
        *,
        flow_type: str,
        options: AgentSessionOptions | None = None,
    ) -> None:
        """Create a session Flow type.

        Args:
            runner: The framework adapter.
            flow_type: The Flow type name, unique per agent.
            options: Tool policies, the default tool effect, event capacity and approval deadline.

        Raises:
            TypeError: If ``runner`` lacks a runner method or ``options`` has the wrong type.
            ValueError: If ``flow_type`` is empty or contains ``/``.
        """
        for method in ("build_user_message", "run_model_step", "execute_deferred_tool_call"):
            if not callable(getattr(runner, method, None)):
                raise TypeError(f"the runner {type(runner).__name__} has no {method} method")
        if not isinstance(flow_type, str) or not flow_type or "/" in flow_type:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"flow_type must be a non-empty name without '/', got {flow_type!r}")
        resolved = options if options is not None else AgentSessionOptions()
        if not isinstance(resolved, AgentSessionOptions):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"options must be AgentSessionOptions, got {type(resolved).__name__}")
        self._runner = runner
        self._flow_type = flow_type
        self._options = resolved
        self._agent_events = agent_events_stream(resolved.agent_events_capacity_bytes)
        runtime = SessionRuntime(runner, resolved, self._agent_events, flow_type=flow_type)
        self._runtime = runtime
        self._start = StartAgentSession(runtime)
        self._steps: tuple[Step[Any], ...] = (
            AwaitUserMessage(runtime),
            RunModel(runtime),
            AwaitToolApproval(runtime),
            CallTool(runtime),
            CallSingleAttemptTool(runtime),
            RecordToolFailure(runtime),
            RecordToolOutcomeUnknown(runtime),
            ResumeTurn(runtime),
            RecordTurnFailure(runtime),
            ApplyTurnControl(runtime),
            FinishTurnCancellation(runtime),
        )

    @property
    def runner(self) -> AgentFrameworkRunner:
        """The framework adapter."""
        return self._runner

    @property
    def options(self) -> AgentSessionOptions:
        """The session options."""
        return self._options

    @property
    def flow_type(self) -> str:
        """The Flow type name."""
        return self._flow_type

    @property
    def agent_events(self) -> Stream[AgentEvent]:
        """This Flow type's `AgentEvents` Stream."""
        return self._agent_events

    def get_flow_type(self) -> str:
        """Return the Flow type name."""
        return self._flow_type

    def get_steps(self) -> StepList[AgentSessionStartInput]:
        """Return the session's Steps, starting with `StartAgentSession`."""
        return StepList[AgentSessionStartInput].start_step(self._start).other_steps(*self._steps)

    def get_persistence_schema(self) -> PersistenceSchema:
        """Return the shared persistence definitions plus this Flow type's `AgentEvents` Stream."""
        return PersistenceSchema.of(
            AGENT_STATE,
            AGENT_MESSAGES,
            FRAMEWORK_RUN_STATE,
            AGENT_TOOL_CALLS,
            PENDING_INTERRUPTS,
            AGENT_USAGE,
            QUEUED_USER_MESSAGES,
            INTERRUPT_RESOLUTIONS,
            TOOL_CALL_RESULTS,
            STEERED_USER_MESSAGES,
            TURN_CONTROL_REQUESTS,
            TURN_CANCELLATION_REQUEST,
            TOOL_CALL_CANCELLATIONS,
            self._agent_events,
        )

    @rpc(is_transactional=True)
    def send_user_message(self, context: Context, message: AgentUserMessage) -> RPCResult[bool]:
        """Queue a user message; `False` for blank, oversized, plan-mode, or not UTF-8 encodable text."""
        text = message.text
        if not isinstance(text, str) or not text.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            return RPCResult(False)
        if (
            message.plan_mode
            or utf8_size(text) > MAX_USER_MESSAGE_BYTES
            or unencodable_index(text) is not None
        ):
            return RPCResult(False)
        QUEUED_USER_MESSAGES.publish(context, AgentUserMessage(text=text))
        return RPCResult(True)

    @rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES,))
    def steer_user_message(self, context: Context, request: SteerUserMessageRequest) -> RPCResult[bool]:
        """Steer the active turn: the message applies at the turn's next boundary and starts the next turn.

        With ``text``, a new message steers; with ``message_id``, that queued message moves from the queue.
        Waiting approvals are abandoned, calls that did not start are not run, and a model call or tool that
        started runs to its end. While no turn is active, ``text`` is queued like `send_user_message` and a
        queued ``message_id`` stays queued. `False` when both or neither field is set, the text is blank or
        too large, the message ID is not queued, or the active turn does not accept steering. A message
        consumed between the read and the commit fails the RPC with CHANNEL_MESSAGE_NOT_FOUND, and nothing
        commits. Locks nothing.
        """
        return _turn_control_rpcs.steer_user_message(context, request)

    @rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES,))
    def delete_queued_message(self, context: Context, request: DeleteQueuedMessageRequest) -> RPCResult[bool]:
        """Delete a queued user message; `False` when it is not queued.

        Like `steer_user_message`, a message consumed between the read and the commit fails the RPC with
        CHANNEL_MESSAGE_NOT_FOUND.
        """
        return _turn_control_rpcs.delete_queued_message(context, request)

    @rpc(lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()))
    def cancel_turn(self, context: Context, request: CancelTurnRequest) -> RPCResult[bool]:
        """Cancel the active turn (``turn_id`` `None`) or the named one, if it is the active turn.

        Cancels the running model call, the failure route, and the approval waits at this RPC's commit, and
        schedules `FinishTurnCancellation`; a tool that started runs to its end. `True` means the
        cancellation is recorded (also when it already was); a final answer that committed first still
        completes the turn. `False` when no turn is active, ``turn_id`` names another turn, or the turn
        does not accept cancellation.
        """
        return _turn_control_rpcs.cancel_turn(context, request, self._runtime)

    @rpc(lock_attributes=(PENDING_INTERRUPTS.lock(),))
    def resolve_interrupt(self, context: Context, request: ResolveInterruptRequest) -> RPCResult[bool]:
        """Answer a pending approval; `False` when it is not pending or its deadline passed."""
        interrupts = read_interrupts(context)
        interrupt = next((item for item in interrupts if item.interrupt_id == request.interrupt_id), None)
        if interrupt is None:
            return RPCResult(False)
        if interrupt.kind is InterruptKind.QUESTION and request.approved:
            return RPCResult(False)
        if interrupt.deadline is not None and now() >= parse_time(interrupt.deadline):
            return RPCResult(False)
        PENDING_INTERRUPTS.set(context, [item for item in interrupts if item is not interrupt])
        INTERRUPT_RESOLUTIONS.publish(
            context,
            interrupt.interrupt_id,
            AgentInterruptResolution(
                approved=request.approved,
                rejection_message=None if request.approved else request.rejection_message,
            ),
        )
        return RPCResult(True)

    @rpc(
        load_attribute_maps=(AGENT_MESSAGES, AGENT_TOOL_CALLS),
        load_channels=(QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    )
    def get_agent_snapshot(self, context: Context) -> RPCResult[AgentSnapshot]:
        """Return the session's state, messages, interrupts, tool calls, usage, and waiting user messages."""
        state = read_state(context)
        records: list[AgentToolCall] = []
        if state is not None and state.active_turn_id is not None:
            keys = AGENT_TOOL_CALLS.get_all_instance_keys(context)
            records = sorted(
                (
                    record
                    for record in (AGENT_TOOL_CALLS.get(context, key) for key in keys)
                    if record.turn_id == state.active_turn_id
                ),
                key=lambda record: record.deferral_order,
            )
        messages = read_last_messages(context, SNAPSHOT_MESSAGE_LIMIT)
        return RPCResult(
            AgentSnapshot(
                state=state,
                messages=tuple(messages),
                pending_interrupts=tuple(read_interrupts(context)),
                tool_calls=tuple(records),
                usage=read_usage(context),
                queued_message_count=QUEUED_USER_MESSAGES.size(context),
                queued_messages=_pending_user_messages(context, QUEUED_USER_MESSAGES),
                steered_messages=_pending_user_messages(context, STEERED_USER_MESSAGES),
            )
        )

    @rpc(load_attribute_maps=(AGENT_MESSAGES,))
    def list_agent_messages(
        self, context: Context, request: ListAgentMessagesRequest
    ) -> RPCResult[AgentMessagesPage]:
        """Return a page of stored messages, oldest first, ending before ``before_sequence``."""
        limit = min(max(request.limit, 1), _PAGE_LIMIT_MAX)
        page = read_last_messages(context, limit, request.before_sequence)
        # Without message chunks (a later release) the oldest stored message is always sequence 1.
        next_before = page[0].sequence if page and page[0].sequence > 1 else None
        return RPCResult(AgentMessagesPage(messages=tuple(page), next_before_sequence=next_before))
