"""``ScriptedRunner``: a framework-free runner whose model is a script."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from dex_agents import (
    BUILT_IN_TOOL_NAMES,
    UNKNOWN_TOOL_POLICY,
    WRITE_TODOS,
    AgentMessage,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
    ModelCallMetadata,
    RunStateFormat,
    RunStateFormatError,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    TurnCompleted,
    build_plan_note,
    describe_tool_call_outcome,
    parse_tool_arguments,
)
from dex_agents.testing._matrix_tools import MATRIX_TOOLS, ScriptedTool
from dex_agents.testing._script import (
    ModelCallScope,
    ScriptedResponse,
    ScriptStore,
    model_call_scope,
    script_store_scope,
    scripted_model_response,
    scripted_summary_response,
)
from dex_agents.testing._scripted_tasks import cancel_scripted_task, poll_scripted_task

__all__ = ["ScriptedRunner", "render_message", "scripted_token_count"]

_CHARACTERS_PER_TOKEN = 4


def scripted_token_count(text: str) -> int:
    """Return the tokens :class:`ScriptedRunner` counts for one model input line: a token per 4 characters.

    Args:
        text: One line of the model input, as ``Invocation.model_input`` records it.

    Returns:
        ``ceil(len(text) / 4)``.
    """
    return -(-len(text) // _CHARACTERS_PER_TOKEN)


_RUN_STATE = RunStateFormat("dex-agents-testing/scripted-runner", 1, "ScriptedRunner")

#: The model and provider :class:`ScriptedRunner` reports in ``model_call_metadata``.
_SCRIPTED_MODEL = "scripted-model"
_SCRIPTED_PROVIDER = "dex.scripted"


def _metadata(response_id: str, finish_reason: str) -> ModelCallMetadata:
    return ModelCallMetadata(
        request_model=_SCRIPTED_MODEL,
        response_model=_SCRIPTED_MODEL,
        provider_name=_SCRIPTED_PROVIDER,
        response_id=response_id,
        finish_reasons=(finish_reason,),
    )


def render_message(message: FrameworkMessage | AgentMessage) -> str:
    """Render a message as the scripted model sees it, from its ``framework_item``.

    Args:
        message: A stored or produced message.

    Returns:
        ``"user: ..."``, ``"assistant: ..."``, ``"assistant calls <tool> <arguments> [<id>]"`` or
        ``"tool <tool> [<id>]: <output>"``.
    """
    item = cast(dict[str, Any], json.loads(message.framework_item))
    role = item["role"]
    if role == MessageRole.TOOL:
        return f"tool {item['tool_name']} [{item['tool_call_id']}]: {item['tool_output']}"
    if item.get("tool_name"):
        return f"assistant calls {item['tool_name']} {item['tool_arguments']} [{item['tool_call_id']}]"
    return f"{role}: {item['text']}"


def _message(
    role: MessageRole,
    *,
    text: str | None = None,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    tool_arguments: str | None = None,
    tool_output: str | None = None,
) -> FrameworkMessage:
    item = {
        "role": str(role),
        "text": text,
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "tool_arguments": tool_arguments,
        "tool_output": tool_output,
    }
    return FrameworkMessage(
        role=role,
        framework_item=json.dumps(item, sort_keys=True, separators=(",", ":")),
        text=text,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        tool_arguments=tool_arguments,
        tool_output=tool_output,
    )


def _from_item(framework_item: str) -> FrameworkMessage:
    item = cast(dict[str, Any], json.loads(framework_item))
    return _message(
        MessageRole(item["role"]),
        text=item["text"],
        tool_call_id=item["tool_call_id"],
        tool_name=item["tool_name"],
        tool_arguments=item["tool_arguments"],
        tool_output=item["tool_output"],
    )


class ScriptedRunner:
    """A runner whose "framework" is a script: the reference implementation of the runner contract.

    Each ``run_model_step`` makes one scripted model call (:func:`scripted_model_response`), whose input is
    the turn's session settings (``settings: <compact JSON>``, when there are any), the context summary
    (``summary: <text>``, once the session compacted), then every message it receives rebuilt from its
    ``framework_item`` plus this turn's unstored items: its tool requests and the model-visible result of
    each final record (:func:`describe_tool_call_outcome`). Tool calls become ``ToolCallsRequested`` with
    the run state holding the unstored items; a final answer returns them in ``TurnCompleted``.
    ``build_unfinished_turn_messages`` returns them too, so a failed, steered or cancelled turn keeps its
    exact transcript with a result for every call. ``execute_deferred_tool_call`` runs the real tool
    function once. Every model call reports ``model_call_metadata`` for tracing: model ``scripted-model``
    from provider ``dex.scripted``, the response ID ``<step execution ID>.<attempt>``, and the finish
    reason ``tool_calls`` or ``stop``.

    It also compacts (``ContextCompactionRunner``): a model input line counts
    :func:`scripted_token_count` tokens; the cut keeps the newest messages that fit the budget and falls
    only right after an assistant or tool message with no tool call open, never on the newest message; and
    the summary call answers from the session's summary script (:meth:`ScriptStore.set_summaries`), by
    default with ``"summary <generation> through message <sequence>"``.

    It offers the model its tools plus the session's enabled built-ins, and only ``write_todos`` in a
    planning turn (it supports plan mode), logging the offered names with each model call; the plan note
    (`build_plan_note`) comes before the turn's messages. It polls and cancels the tasks of scripted
    tools (``ScriptedToolCall.task``).

    Args:
        tools: Tool functions by name; each takes the call's arguments as keyword arguments and returns
            text. Defaults to :data:`MATRIX_TOOLS`.
        store: The script store; by default the one named by ``DEX_AGENTS_TEST_STATE_DIR``, opened when a
            model call needs it (so the runner can be built before the variable is set).
        default_turns: The script of sessions that have none of their own (with the default store).
        stores_incrementally: Store each model call's items at once through
            ``ToolCallsRequested.new_messages``, keeping only the pending calls in the run state, as a
            runner whose framework stores messages as it goes does.
        lists_tool_names_after_model_call: ``agent_tool_names`` (`ToolNamesRunner`) returns `None` until
            this runner made a model call, as a runner whose tools come from an MCP listing does, so the
            session checks ``tool_policies`` at the first model call instead of at construction.
    """

    def __init__(
        self,
        tools: Iterable[ScriptedTool] = MATRIX_TOOLS,
        store: ScriptStore | None = None,
        *,
        default_turns: Sequence[Sequence[ScriptedResponse]] | None = None,
        stores_incrementally: bool = False,
        lists_tool_names_after_model_call: bool = False,
    ) -> None:
        self._tools: Mapping[str, ScriptedTool] = {tool.__name__: tool for tool in tools}
        self._store = store
        self._default_turns = default_turns
        self._stores_incrementally = stores_incrementally
        self._tool_names_listed = not lists_tool_names_after_model_call

    @property
    def supports_plan_mode(self) -> bool:
        """`True`: a planning turn offers only ``write_todos`` and the model sees the plan note."""
        return True

    def agent_tool_names(self) -> tuple[str, ...] | None:
        """Return the names of the runner's tools (`ToolNamesRunner`), so the session checks its policies.

        Returns:
            The names, or `None` before the first model call when built with
            ``lists_tool_names_after_model_call``.
        """
        return tuple(self._tools) if self._tool_names_listed else None

    def _store_for_call(self) -> ScriptStore:
        return self._store or ScriptStore.from_environment(self._default_turns)

    def offered_tools(self, turn: AgentTurnContext) -> list[str]:
        """Return the tool names the model is offered in ``turn``: the runner's tools and the built-ins.

        Args:
            turn: The turn.

        Returns:
            The names; only ``write_todos`` in a planning turn.
        """
        built_ins = [name for name in BUILT_IN_TOOL_NAMES if name in turn.enabled_built_in_tools]
        if turn.interaction_mode is InteractionMode.PLANNING:
            return [name for name in built_ins if name == WRITE_TODOS]
        return [name for name in self._tools if name not in built_ins] + built_ins

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return the user message for ``text``.

        Args:
            text: The user's text (or the session's turn-failure note).

        Returns:
            The message.
        """
        return _message(MessageRole.USER, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make one scripted model call.

        Args:
            turn: The committed state of the turn.

        Returns:
            ``ToolCallsRequested`` for a response with tool calls, else ``TurnCompleted``.
        """
        try:
            items = self._unstored_items(turn)
        except RunStateFormatError as error:
            # The turn cannot continue without its own state, and a retry would read the same text.
            return TurnCompleted(new_messages=[], turn_error=str(error))
        model_input = self._model_input(turn, items)
        scope = ModelCallScope(
            session_id=turn.flow_id,
            turn_id=turn.turn_id,
            attempt=turn.attempt,
            step_execution_id=turn.events.step_execution_id,
            recorded_tool_call_ids=frozenset(turn.tool_calls),
        )
        self._tool_names_listed = True
        with model_call_scope(scope):
            response = await scripted_model_response(
                model_input,
                self._store_for_call(),
                on_partial_text=turn.events.write_text_delta,
                offered_tools=self.offered_tools(turn),
            )
        if response.thread_text:
            await asyncio.to_thread(turn.events.write_text_delta, response.thread_text)
        if response.text:
            turn.events.write_text_delta(response.text)
        if response.late_text:
            asyncio.get_running_loop().call_later(0.2, turn.events.write_text_delta, response.late_text)
        usage = AgentUsage(
            model_calls=1, input_tokens=response.input_tokens, output_tokens=response.output_tokens
        )
        if response.text:
            items.append(_message(MessageRole.ASSISTANT, text=response.text))
        response_id = f"{turn.events.step_execution_id}.{turn.attempt}"
        if not response.tool_calls:
            return TurnCompleted(
                new_messages=items,
                usage=usage,
                turn_error=response.turn_error,
                model_call_metadata=_metadata(response_id, "stop"),
            )
        calls: list[DeferredToolCall] = []
        for call in response.tool_calls:
            items.append(
                _message(
                    MessageRole.ASSISTANT,
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    tool_arguments=call.arguments_json,
                )
            )
            calls.append(
                DeferredToolCall(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    arguments=call.arguments_json,
                    policy=self._policy(turn, call.tool_name),
                )
            )
        stored_now = items if self._stores_incrementally else []
        run_state = {
            "items": [] if self._stores_incrementally else [item.framework_item for item in items],
            "pending": [call.tool_call_id for call in response.tool_calls],
            "padding": "x" * response.run_state_padding,
        }
        return ToolCallsRequested(
            framework_run_state=_RUN_STATE.wrap(run_state),
            tool_calls=calls,
            usage=usage,
            new_messages=stored_now,
            model_call_metadata=_metadata(response_id, "tool_calls"),
        )

    @staticmethod
    def _model_input(turn: AgentTurnContext, items: Sequence[FrameworkMessage]) -> list[str]:
        lines: list[str] = []
        if turn.session_settings:
            lines.append(
                "settings: " + json.dumps(dict(turn.session_settings), sort_keys=True, separators=(",", ":"))
            )
        if turn.context_summary is not None:
            lines.append(f"summary: {turn.context_summary.text}")
        messages = [render_message(message) for message in (*turn.messages, *items)]
        note = build_plan_note(turn.plan, turn.interaction_mode)
        if note is not None:
            # As user text before the turn's own messages.
            first = next(
                (index for index, message in enumerate(turn.messages) if message.turn_id == turn.turn_id),
                len(turn.messages),
            )
            messages.insert(first, f"user: {note}")
        lines.extend(messages)
        return lines

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Count the tokens of the model input ``run_model_step`` would send.

        Args:
            turn: The committed state of the turn.

        Returns:
            The sum of :func:`scripted_token_count` over the input's lines.
        """
        try:
            items = self._unstored_items(turn)
        except RunStateFormatError:
            items = []  # run_model_step ends such a turn without a model call
        return sum(scripted_token_count(line) for line in self._model_input(turn, items))

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the earliest cut whose newer messages fit the budget, or the latest cut when none does.

        A cut falls right after an assistant or tool message with every tool call before it answered, and
        never on the newest stored message, so the turn's question and any open tool call stay unsummarized.

        Args:
            turn: The committed state of the turn.
            retained_token_budget: The tokens to keep after the cut.

        Returns:
            The last sequence to summarize, or ``None`` when no message may be cut after.
        """
        try:
            unstored = sum(scripted_token_count(render_message(item)) for item in self._unstored_items(turn))
        except RunStateFormatError:
            unstored = 0
        messages = list(turn.messages)
        kept_after = [0] * (len(messages) + 1)
        for position in range(len(messages) - 1, -1, -1):
            kept_after[position] = kept_after[position + 1] + scripted_token_count(
                render_message(messages[position])
            )
        open_calls: set[str] = set()
        cuts: list[int] = []
        for position, message in enumerate(messages[:-1]):
            if message.role is MessageRole.TOOL:
                open_calls.discard(message.tool_call_id or "")
            elif message.role is MessageRole.ASSISTANT and message.tool_call_id:
                open_calls.add(message.tool_call_id)
            if message.role is not MessageRole.USER and not open_calls:
                cuts.append(position)
        for position in cuts:
            if kept_after[position + 1] + unstored <= retained_token_budget:
                return messages[position].sequence
        return messages[cuts[-1]].sequence if cuts else None

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make one scripted summary call.

        Args:
            request: The messages to summarize and the summary so far.

        Returns:
            The scripted text, or ``"summary <generation> through message <sequence>"`` by default.
        """
        previous = request.previous_summary
        generation = 1 if previous is None else previous.generation + 1
        model_input = [] if previous is None else [f"summary: {previous.text}"]
        model_input.extend(render_message(message) for message in request.messages)
        scope = ModelCallScope(
            session_id=request.flow_id,
            turn_id=request.turn_id,
            attempt=request.attempt,
            step_execution_id=request.events.step_execution_id,
            is_summary=True,
        )
        response = await scripted_summary_response(
            model_input,
            scope,
            self._store or ScriptStore.from_environment(self._default_turns),
            on_partial_text=request.events.write_text_delta,
        )
        text = response.text or f"summary {generation} through message {request.through_sequence}"
        usage = AgentUsage(
            model_calls=1, input_tokens=response.input_tokens, output_tokens=response.output_tokens
        )
        return ContextSummaryResult(
            text=text,
            usage=usage,
            model_call_metadata=_metadata(f"{request.events.step_execution_id}.{request.attempt}", "stop"),
        )

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> list[FrameworkMessage]:
        """Return the turn's unstored items: those in the run state and a result for each pending call.

        Args:
            turn: The turn's committed state; every record is final.

        Returns:
            The items, in order; empty before the turn's first tool calls.
        """
        return self._unstored_items(turn)

    @staticmethod
    def _unstored_items(turn: AgentTurnContext) -> list[FrameworkMessage]:
        state: dict[str, Any] = (
            _RUN_STATE.unwrap(turn.framework_run_state)
            if turn.framework_run_state
            else {"items": [], "pending": []}
        )
        items = [_from_item(item) for item in cast(list[str], state["items"])]
        for tool_call_id in cast(list[str], state["pending"]):
            record = turn.recorded_tool_call(tool_call_id)
            items.append(
                _message(
                    MessageRole.TOOL,
                    tool_call_id=tool_call_id,
                    tool_name=record.tool_name,
                    tool_arguments=record.arguments,
                    tool_output=describe_tool_call_outcome(record),
                )
            )
        return items

    def describe_tool(self, tool_name: str) -> str | None:
        """Return the first paragraph of the tool function's docstring, for tracing, or `None`."""
        tool = self._tools.get(tool_name)
        doc = inspect.getdoc(tool) if tool is not None else None
        return " ".join(doc.split("\n\n", 1)[0].split()) if doc else None

    def _policy(self, turn: AgentTurnContext, tool_name: str) -> ToolPolicy:
        if tool_name not in self._tools:
            # A name the agent lacks only records `failed` with a message for the model: nothing to approve.
            return UNKNOWN_TOOL_POLICY
        return turn.resolve_tool_policy(tool_name)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the real tool once.

        A scripted tool that asks a question or starts a task raises through here; the session reads what
        it asked for.

        Args:
            call: The approved call.

        Returns:
            The tool's output.

        Raises:
            ToolExecutionError: For a tool this runner does not have, or arguments that are not a JSON
                object (the model sees it).
        """
        tool = self._tools.get(call.tool_call.tool_name)
        if tool is None:
            raise ToolExecutionError(f"unknown tool {call.tool_call.tool_name!r}")
        arguments = parse_tool_arguments(call.tool_call.arguments, tool_name=call.tool_call.tool_name)
        with script_store_scope(self._store_for_call()):
            return ToolExecutionResult(await tool(**arguments))

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll the scripted task of a call once.

        Args:
            poll: The poll.

        Returns:
            The task's result, its question, or that it still runs.
        """
        return await poll_scripted_task(poll, self._store_for_call())

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel the scripted task of a call.

        Args:
            cancellation: The abandoned task.
        """
        await cancel_scripted_task(cancellation, self._store_for_call())
