"""`AgentSessionFlow`: one durable agent session per Flow execution."""

from __future__ import annotations

from typing import Any, cast

from dex import (
    AttributeMapNotLoadedError,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepList,
    Stream,
    rpc,
)

from dex_agents.compaction import is_compaction_runner
from dex_agents.limits import MAX_USER_MESSAGE_BYTES, unencodable_index, utf8_size
from dex_agents.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_TOOL_OUTPUTS,
    AGENT_TRACE_CONTEXT,
    AGENT_USAGE,
    CONTEXT_SUMMARY,
    FRAMEWORK_RUN_STATE,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    PLAN_EXECUTIONS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    STEERED_USER_MESSAGES,
    TOOL_CALL_CANCELLATIONS,
    TOOL_CALL_RESULTS,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
    TURN_REPLY_SEQUENCE,
    TURN_SESSION_SETTINGS,
    agent_events_stream,
    tool_output_key,
)
from dex_agents.runner import AgentFrameworkRunner, UnknownToolPolicyError
from dex_agents.session._client_only import ClientOnlyRunner
from dex_agents.session._deps import SessionDeps
from dex_agents.session._plan import execute_plan
from dex_agents.session._questions import answer_question
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._settings import (
    session_settings_problem,
    store_session_settings,
)
from dex_agents.session._snapshot import SNAPSHOT_MESSAGE_LIMIT, build_snapshot, list_messages
from dex_agents.session._state import (
    now,
    parse_time,
    read_interrupts,
    read_state,
)
from dex_agents.session._tool_names import listed_tool_names, unknown_tool_policy_problem
from dex_agents.session._transitions import build_session_steps
from dex_agents.session._turn_control_rpcs import cancel_turn, delete_queued_message, steer_user_message
from dex_agents.session._turn_lifecycle import user_message_problem
from dex_agents.values import (
    AgentEvent,
    AgentInterruptResolution,
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    GetToolOutputRequest,
    InterruptKind,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    UpdateSessionSettingsRequest,
)

__all__ = ["SNAPSHOT_MESSAGE_LIMIT", "AgentSessionFlow", "ToolOutputNotLoadedError"]


class ToolOutputNotLoadedError(ValueError):
    """A `get_tool_output` call did not load the `AgentToolOutputs` instance it reads."""


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
            options: Tool policies, the default tool effect, event capacity, approval deadline, message
                storage and compaction.

        Raises:
            TypeError: If ``runner`` lacks a runner method, ``options`` has the wrong type,
                ``options.compaction`` is set for a runner without the `ContextCompactionRunner` methods,
                or its ``agent_tool_names`` returns something other than names or `None`.
            ValueError: If ``flow_type`` is empty or contains ``/``, or the options enable plan mode for a
                runner whose ``supports_plan_mode`` is not `True`.
            UnknownToolPolicyError: If ``options.tool_policies`` names a tool that the runner's
                ``agent_tool_names`` (`ToolNamesRunner`) does not list and that is not a built-in.
        """
        for method in ("build_user_message", "run_model_step", "execute_deferred_tool_call"):
            if not callable(getattr(runner, method, None)):
                raise TypeError(f"the runner {type(runner).__name__} has no {method} method")
        if not isinstance(flow_type, str) or not flow_type or "/" in flow_type:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"flow_type must be a non-empty name without '/', got {flow_type!r}")
        resolved = options if options is not None else AgentSessionOptions()
        if not isinstance(resolved, AgentSessionOptions):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"options must be AgentSessionOptions, got {type(resolved).__name__}")
        if resolved.compaction is not None and not is_compaction_runner(runner):
            raise TypeError(
                f"options.compaction needs a runner that compacts context, and {type(runner).__name__} "
                "does not implement ContextCompactionRunner (estimate_input_tokens, "
                "select_compaction_cutoff, summarize_context)"
            )
        if resolved.plan_mode_enabled and getattr(runner, "supports_plan_mode", False) is not True:
            raise ValueError(
                f"plan_mode_enabled needs a runner that supports plan mode, and {type(runner).__name__} does "
                "not set supports_plan_mode to True: it would not limit planning turns to write_todos"
            )
        if resolved.tool_policies:
            listed = listed_tool_names(runner)
            problem = (
                None
                if listed is None
                else unknown_tool_policy_problem(resolved.tool_policies, listed, resolved.built_in_tools)
            )
            if problem is not None:
                raise UnknownToolPolicyError(problem)
        self._runner = runner
        self._flow_type = flow_type
        self._options = resolved
        self._agent_events = agent_events_stream(resolved.agent_events_capacity_bytes)
        steps = build_session_steps(SessionDeps.of(runner, resolved, self._agent_events, flow_type))
        self._start = steps.start
        self._steps: tuple[Step[Any], ...] = steps.others
        self._moves = steps.moves

    @classmethod
    def for_client(cls, *, flow_type: str, options: AgentSessionOptions | None = None) -> AgentSessionFlow:
        """Build the Flow type for a client process: no runner, so no agent, tools or framework to import.

        It registers the same Steps, RPCs, persistence and `AgentEvents` Stream as the Worker's Flow, so
        an `AgentSessionClient` on it starts sessions, calls their RPCs and reads their events. It cannot
        run Steps: `AgentWorker` refuses it, and a Step that reaches its runner fails with
        `ClientOnlyFlowError`.

        Args:
            flow_type: The Worker's Flow type name.
            options: The Worker's options; only ``agent_events_capacity_bytes`` matters to a client.

        Returns:
            The Flow, for the client process's Registry.
        """
        return cls(ClientOnlyRunner(flow_type), flow_type=flow_type, options=options)

    @property
    def is_client_only(self) -> bool:
        """Whether this Flow was built with `for_client` and so has no runner."""
        return isinstance(self._runner, ClientOnlyRunner)

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
            AGENT_MESSAGE_CHUNKS,
            AGENT_MESSAGE_INDEX,
            TURN_REPLY_SEQUENCE,
            CONTEXT_SUMMARY,
            SESSION_SETTINGS,
            TURN_SESSION_SETTINGS,
            FRAMEWORK_RUN_STATE,
            AGENT_TOOL_CALLS,
            AGENT_TOOL_OUTPUTS,
            PENDING_INTERRUPTS,
            AGENT_USAGE,
            AGENT_TRACE_CONTEXT,
            QUEUED_USER_MESSAGES,
            INTERRUPT_RESOLUTIONS,
            TOOL_CALL_RESULTS,
            STEERED_USER_MESSAGES,
            TURN_CONTROL_REQUESTS,
            TURN_CANCELLATION_REQUEST,
            TOOL_CALL_CANCELLATIONS,
            AGENT_PLAN,
            PLAN_EXECUTIONS,
            PENDING_PLAN_EXECUTION,
            self._agent_events,
        )

    @rpc(is_transactional=True)
    def send_user_message(self, context: Context, message: AgentUserMessage) -> RPCResult[bool]:
        """Queue a user message; `False` for blank, oversized or non-UTF-8 text, or plan mode it lacks.

        Also `False` when the runner's message for the text is too large to store (the text repeats in its
        ``framework_item``, escaped by the framework's JSON).
        """
        text = message.text
        if not isinstance(text, str) or not text.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            return RPCResult(False)
        if utf8_size(text) > MAX_USER_MESSAGE_BYTES or unencodable_index(text) is not None:
            return RPCResult(False)
        plan_mode = message.plan_mode is True
        if plan_mode and not self._options.plan_mode_enabled:
            return RPCResult(False)
        if user_message_problem(self._runner, text) is not None:
            return RPCResult(False)
        QUEUED_USER_MESSAGES.publish(context, AgentUserMessage(text=text, plan_mode=plan_mode))
        return RPCResult(True)

    @rpc(
        lock_attributes=(PENDING_PLAN_EXECUTION.lock(),),
        load_channels=(QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    )
    def execute_plan(self, context: Context, request: ExecutePlanRequest) -> RPCResult[bool]:
        """Approve the plan's ``revision``: an executing turn starts with it.

        `False` unless the session waits for a user message with no queued or steered message and no
        pending interrupt, the plan has this revision and is a draft or active, and no approval is pending
        (including one whose turn is starting). Locks `PendingPlanExecution`.
        """
        return execute_plan(context, request)

    @rpc(lock_attributes=(PENDING_INTERRUPTS.lock(),))
    def answer_question(self, context: Context, request: AnswerQuestionRequest) -> RPCResult[bool]:
        """Answer a pending question.

        `False` when the interrupt is not a pending question, its deadline passed, or the answer is blank,
        too large, or not one of the choices of a question that allows no free text. Locks
        `PendingInterrupts`.
        """
        return answer_question(context, request)

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
        return steer_user_message(context, request, self._runner)

    @rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES,))
    def delete_queued_message(self, context: Context, request: DeleteQueuedMessageRequest) -> RPCResult[bool]:
        """Delete a queued user message; `False` when it is not queued.

        Like `steer_user_message`, a message consumed between the read and the commit fails the RPC with
        CHANNEL_MESSAGE_NOT_FOUND.
        """
        return delete_queued_message(context, request)

    @rpc(lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()))
    def cancel_turn(self, context: Context, request: CancelTurnRequest) -> RPCResult[bool]:
        """Cancel the active turn (``turn_id`` `None`) or the named one, if it is the active turn.

        Cancels the running model call, the failure route, the waits of approvals, questions and durable
        waits, and the polls of started tasks at this RPC's commit, and schedules `FinishTurnCancellation`,
        which hands each started task to `CancelToolTask` (recorded `outcome_unknown`); a tool that started
        runs to its end. `True` means the cancellation is recorded (also when it already was); a final
        answer that committed first still completes the turn. `False` when no turn is active, ``turn_id``
        names another turn, or the turn does not accept cancellation.
        """
        return cancel_turn(context, request, self._moves)

    @rpc(is_transactional=True)
    def update_session_settings(
        self, context: Context, request: UpdateSessionSettingsRequest
    ) -> RPCResult[bool]:
        """Replace the settings the next turn starts with; ``{}`` clears them. Locks nothing.

        The active turn keeps the settings it started with. `False` before `StartAgentSession` committed,
        or for settings that are missing, not a JSON object, or larger than `MAX_SESSION_SETTINGS_BYTES`
        plus `SESSION_SETTINGS_SIZE_TOLERANCE_BYTES`.
        """
        settings: object = request.session_settings
        if read_state(context) is None or settings is None or session_settings_problem(settings) is not None:
            return RPCResult(False)
        store_session_settings(context, settings)
        return RPCResult(True)

    @rpc(lock_attributes=(PENDING_INTERRUPTS.lock(),))
    def resolve_interrupt(self, context: Context, request: ResolveInterruptRequest) -> RPCResult[bool]:
        """Answer a pending approval, or decline a question (``approved=False``).

        `False` when the interrupt is not pending or its deadline passed, and for ``approved=True`` on a
        question, which takes `answer_question` instead.
        """
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
        """Return the session's state and newest messages, with everything a UI draws beside them.

        That is the pending interrupts, the active turn's tool calls, usage, the waiting user messages, the
        context summary and the settings the next turn starts with, within `MAX_RPC_OUTPUT_BYTES`. It
        loads the window; the message chunks it reads come from the caller's load options, and it names
        the ones it lacked in ``missing_chunks``.
        """
        return RPCResult(build_snapshot(context))

    @rpc(load_attribute_maps=(AGENT_MESSAGES,))
    def list_agent_messages(
        self, context: Context, request: ListAgentMessagesRequest
    ) -> RPCResult[AgentMessagesPage]:
        """Return a page of stored messages, oldest first, ending before ``before_sequence``.

        ``deleted_before_sequence`` is the oldest stored message once retention deleted older ones. The
        page ends early to stay within `MAX_RPC_OUTPUT_BYTES`. It loads the window; the message chunks it
        reads come from the caller's load options, and it names the ones it lacked in ``missing_chunks``.
        """
        return RPCResult(list_messages(context, request))

    @rpc()
    def get_tool_output(self, context: Context, request: GetToolOutputRequest) -> RPCResult[str]:
        """Return a call's whole output when the session stored it apart, else an empty string.

        A stored output is never empty: only outputs above ``max_inline_tool_output_bytes`` (at least
        1 KiB) are stored apart. The output travels as plain text, not JSON, so its size is its own.

        The caller loads the one `AgentToolOutputs` instance (`tool_output_key`) in its load options.

        Raises:
            ToolOutputNotLoadedError: If the call did not load that instance.
        """
        key = tool_output_key(request.turn_id, request.tool_call_id)
        try:
            output = AGENT_TOOL_OUTPUTS.get(context, key)
        except AttributeMapNotLoadedError as error:
            raise ToolOutputNotLoadedError(
                f"get_tool_output reads AgentToolOutputs instance {key!r}, which this call did not load: "
                "pass RPCInvokeOptions(load_attribute_map_instances=(AGENT_TOOL_OUTPUTS.load(key),)) "
                "(AgentSessionClient.get_tool_output does)"
            ) from error
        return RPCResult(cast(str | None, output) or "")
