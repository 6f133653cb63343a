"""`LangGraphRunner`: the session's runner contract for a LangChain `create_agent` agent or a LangGraph graph.

One `run_model_step` runs the user's compiled graph on a private thread of the runner's checkpoint saver:

- without run state, the input is the stored conversation; the graph makes its one model call and, when
  the model asks for tools, stops at the tool gate's interrupts (one per call). The runner exports the
  thread as the framework run state and returns one `DeferredToolCall` per interrupt, in model order;
- with run state, the runner imports the thread and resumes it with `Command(resume={interrupt_id:
  answer})`, giving every call its recorded outcome; the gate turns each answer into the call's
  `ToolMessage` and the graph makes its next model call itself;
- when the graph ends, the turn's new messages are stored.

A callback guard aborts the run before a second model call or any tool run, so a graph that does not gate
every tool ends the turn with `turn_error` instead of doing either silently.

The turn's messages live in the run state until the turn ends, so when steering, `cancel_turn` or a
failure ends it early, `build_unfinished_turn_messages` reads them back from the checkpoint and adds each
deferred call's recorded result. `cancel_turn` cancels the `run_model_step` coroutine; the cancellation
reaches the graph's own model task, whose streaming response closes, and the run's private thread is
deleted on the way out.

Each model Step runs inside a `TurnScope`: the session's enabled built-in tools and the MCP source's tools
are offered to the model next to the graph's own (their calls stop at the gate like any other), and the
model and instructions the runner's hooks choose from the turn's session settings replace the graph's.
A tool Step of an MCP tool calls the source, not the graph; tasks that tools start are polled and
cancelled by the source or by the user's `ToolTaskHandlers`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from dex_agents import (
    ContextWindowExceeded,
    ToolTaskHandlers,
    ToolTaskRouter,
    UnfinishedModelResponse,
    is_context_window_refusal,
    provider_refusal,
)
from dex_agents.compaction import DEFAULT_SUMMARY_INSTRUCTIONS, ContextSummaryRequest, ContextSummaryResult
from dex_agents.events import AgentEventWriter
from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.values import AgentUsage, FrameworkMessage
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphRecursionError, InvalidUpdateError
from langgraph.pregel import Pregel
from langgraph.types import Command, Interrupt
from pydantic import BaseModel

from dex_agents_langgraph._call_metadata import model_call_metadata, token_usage
from dex_agents_langgraph._compaction import estimate_tokens, select_cutoff, summary_message, summary_prompt
from dex_agents_langgraph._effects import annotation_policy
from dex_agents_langgraph._gate import (
    GateAnswer,
    ModelStepGuard,
    ModelStepViolation,
    answer_message,
    gate_payload,
    is_middleware_model_call,
    recorded_answer,
)
from dex_agents_langgraph._graph_interrupts import (
    graph_interrupt_answer,
    graph_interrupt_call,
    graph_interrupt_value,
    is_graph_interrupt_call,
)
from dex_agents_langgraph._hitl import ApprovalTools
from dex_agents_langgraph._messages import (
    build_user_framework_message,
    history_from_stored_messages,
    project_messages,
    tool_arguments_json,
)
from dex_agents_langgraph._provider_answers import unfinished_answer
from dex_agents_langgraph._refusals import refuse_conversation_rewriting_middleware
from dex_agents_langgraph._settings import InstructionsForSettings, ModelForSettings
from dex_agents_langgraph._state import DexCheckpointSaver, LangGraphRunState
from dex_agents_langgraph._tool_execution import ToolStepExecutor, ask_for_interrupt, single_tool_node
from dex_agents_langgraph._turn_scope import TurnScope, turn_scope
from dex_agents_langgraph._turn_tools import TurnSetup, TurnSetupError

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["UNKNOWN_TOOL_POLICY", "GraphFactory", "LangGraphRunner"]

_MAX_MIDDLEWARE_REVIEWS = 8
"""How often `HumanInTheLoopMiddleware` may interrupt one model Step (once per pending call at most)."""

GraphFactory = Callable[[DexCheckpointSaver], Pregel[Any, Any, Any, Any]]
"""Builds the compiled graph with the checkpoint saver it is given (`checkpointer=` of `create_agent` or
`StateGraph.compile`)."""


class LangGraphRunner:
    """Runs a LangChain `create_agent` agent, or your own LangGraph graph, one Step per model and tool call.

    Pass a factory that builds your compiled graph with the checkpoint saver it receives. For
    `create_agent`, add `DexToolGate()` as the first middleware; for your own graph, use `dex_tool_node`
    for the tools and `route_tool_calls` as the edge after the model node. The runner builds the graph
    once and keeps no state between Steps.

    Each model Step also offers the model the session's enabled built-in tools and the MCP source's tools,
    and may choose the turn's model and instructions from its session settings: `DexToolGate` applies all
    of it to a `create_agent` agent; a graph of your own binds `dex_session_tools()` and reads
    `current_session_settings()` in its model node.

    Args:
        build_graph: Builds the compiled graph; called once with the runner's `DexCheckpointSaver`.
        config: Extra `RunnableConfig` for every graph run (tags, metadata, `recursion_limit`,
            `configurable` values other than `thread_id`, your own callbacks).
        context: The runtime context of every graph run and tool call (`create_agent(context_schema=...)`,
            `Runtime.context`, `ToolRuntime.context`), the same for every session of this Flow.
        allowed_msgpack_modules: Extra ``(module, class)`` pairs the run state may hold, for custom types
            in your graph's state; by default only LangGraph's safe types are allowed.
        model_for_settings: Chooses each turn's chat model from the session settings the turn started with
            (`AgentTurnContext.session_settings`): a `BaseChatModel`, a name for `init_chat_model`
            (``"openai:gpt-5"``, one client per name and Worker), or `None` to keep the graph's model.
            Needs `DexToolGate`. When it raises, the turn ends with `turn_error` (the session stays usable).
        instructions_for_settings: Returns instructions each turn adds to the agent's system message, from
            its session settings; `None` adds none. Needs `DexToolGate`.
        mcp_tools: An `McpToolSource` (``dex_agents.mcp``, the ``mcp`` extra) whose tools are offered to the
            model; each call is deferred with the source's policy and run in its tool Step by the source.
            Pass ``mcp_tools.merge_tool_policies(...)`` as the session's ``tool_policies``.
        tool_tasks: The pollers (and cancellers) of the remote tasks your tools start with
            `dex_agents.start_tool_task`, by tool name. With neither this nor ``mcp_tools``, the runner
            polls no tasks, so `DeferredToolExecution.supports_tool_tasks` is false and tools finish their
            work inside the call.
        trust_mcp_annotations: Whether the MCP annotations in the graph tools' `BaseTool.metadata`
            (langchain-mcp-adapters copies them from the server) decide the policies of tools the session
            has no `ToolPolicy` for, as `dex_agents.policy_from_mcp_annotations` maps them: ``readOnlyHint``
            is a `read`, ``idempotentHint`` an `idempotent_write`, and a destructive tool still asks for
            approval. Off by default, since any server may claim anything: the tools then take the
            session's ``default_tool_effect``. Turn it on only when you trust every MCP server whose tools
            the graph holds. ``mcp_tools`` has its own switch per server (``trust_annotations``).
        summary_model: The chat model of the session's context summary calls. With it the runner compacts
            (`dex_agents.compaction.ContextCompactionRunner`, for ``AgentSessionOptions(compaction=...)``),
            and the graph's conversation starts with the summary as a `HumanMessage`; without it the
            session refuses ``compaction``.
        summary_instructions: The system message of a summary call.

    Raises:
        TypeError: If the factory does not return a compiled graph that uses the given checkpoint saver,
            keeps a `messages` list, and has exactly one `ToolNode`.
    """

    def __init__(
        self,
        build_graph: GraphFactory,
        *,
        config: RunnableConfig | None = None,
        context: object = None,
        allowed_msgpack_modules: Iterable[tuple[str, ...]] = (),
        model_for_settings: ModelForSettings | None = None,
        instructions_for_settings: InstructionsForSettings | None = None,
        mcp_tools: McpToolSource | None = None,
        tool_tasks: ToolTaskHandlers | None = None,
        trust_mcp_annotations: bool = False,
        summary_model: BaseChatModel | None = None,
        summary_instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
    ) -> None:
        if tool_tasks is not None and not isinstance(tool_tasks, ToolTaskHandlers):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"tool_tasks must be a ToolTaskHandlers, got {type(tool_tasks).__name__}")
        self._context = context
        self._saver = DexCheckpointSaver(allowed_msgpack_modules=allowed_msgpack_modules)
        graph = build_graph(self._saver)
        self._graph = _checked_graph(graph, self._saver)
        self._tool_node = single_tool_node(self._graph)
        self._config: RunnableConfig = config or {}
        self._approval_tools = ApprovalTools(self._graph)
        self._tool_step = ToolStepExecutor(
            self._tool_node, self._graph, context, self._saver, self._approval_tools
        )
        self._mcp_tools = mcp_tools
        self._trust_mcp_annotations = trust_mcp_annotations
        self._turn_setup = TurnSetup(
            frozenset(self._tool_node.tools_by_name),
            model_for_settings=model_for_settings,
            instructions_for_settings=instructions_for_settings,
            mcp_tools=mcp_tools,
        )
        # A started task's poll and cancel go to the MCP source that owns its call, else to `tool_tasks`.
        tasks = ToolTaskRouter(
            "LangGraphRunner", "tool_tasks", tool_tasks, sources=() if mcp_tools is None else (mcp_tools,)
        )
        if tasks.can_poll:
            # Only a runner with someone to ask polls tasks: the session reads the capability from these
            # methods and tells tools (`supports_tool_tasks`) whether they may hand work over.
            self.poll_tool_task = tasks.poll_tool_task
            self.cancel_tool_task = tasks.cancel_tool_task
        self._summary_model = summary_model
        self._summary_instructions = summary_instructions
        if summary_model is not None:
            # Only a runner with a model to summarize with compacts: the session reads the capability from
            # these methods, and refuses `AgentSessionOptions(compaction=...)` without them.
            self.estimate_input_tokens = self._estimate_input_tokens
            self.select_compaction_cutoff = self._select_compaction_cutoff
            self.summarize_context = self._summarize_context

    def _estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Estimate the model input of ``turn`` with LangChain's `count_tokens_approximately`.

        It counts the summary message and the stored messages after it, as the graph replays them; the
        agent's system prompt and tool definitions are not part of it (leave room for them in the policy's
        window). Stored messages the runner cannot read count as nothing: that model Step ends the turn.
        """
        try:
            return estimate_tokens(_history(turn))
        except ValueError:
            return 0

    def _select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the last stored sequence to summarize at a turn's first model call, else `None`.

        The cut never separates a tool call from its result or the parts of one response, and keeps about
        ``retained_token_budget`` tokens of the newest messages (see `_compaction.select_cutoff`).
        """
        return select_cutoff(turn, retained_token_budget)

    async def _summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make the one summary call with ``summary_model``: the instructions, then the conversation.

        The answer's text is the summary; no live text is written for it.

        Raises:
            ValueError: If the model's answer has no text.
        """
        assert self._summary_model is not None
        prompt = summary_prompt(request.previous_summary, request.messages, request.input_token_budget)
        config = self._run_config(None, request.flow_id)
        answer = await self._summary_model.ainvoke(
            [SystemMessage(content=self._summary_instructions), HumanMessage(content=prompt)], config
        )
        text = answer.text.strip()
        if not text:
            raise ValueError("the summary call returned no text")
        usage = AgentUsage(model_calls=1).plus(token_usage(answer.usage_metadata))
        return ContextSummaryResult(text=text, usage=usage)

    @property
    def supports_plan_mode(self) -> bool:
        """`True`: a planning turn offers the model only ``write_todos``, and the model sees the plan note.

        `DexToolGate`'s model hook does both (`PlanModeRunner`); a graph without it ends a planning turn
        with a `turn_error` before its model call, and its other turns do not show the plan.
        """
        return True

    @property
    def graph(self) -> Pregel[Any, Any, Any, Any]:
        """The compiled graph this runner drives."""
        return self._graph

    @property
    def tools(self) -> Mapping[str, BaseTool]:
        """The graph's tools by name."""
        return self._tool_node.tools_by_name

    def agent_tool_names(self) -> tuple[str, ...]:
        """Return the names of the graph's `ToolNode` tools, and the MCP source's its last listing gave.

        The session checks the ``tool_policies`` keys of an MCP server only once the server is listed
        (`ToolNamesRunner`). Never lists.
        """
        names = tuple(self._tool_node.tools_by_name)
        if self._mcp_tools is None:
            return names
        return (*names, *self._mcp_tools.agent_tool_names())

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message holding ``text`` as a LangChain `HumanMessage`."""
        return build_user_framework_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the graph make one model call and return what the session does next.

        Args:
            turn: The committed state of the turn.

        Returns:
            `ToolCallsRequested` when the model asked for tools, else `TurnCompleted` with every message
            of the turn, or with `turn_error` when the graph cannot continue without breaking the
            one-model-call rule.
        """
        try:
            history = _history(turn)
        except ValueError as error:
            return TurnCompleted(new_messages=(), turn_error=str(error))
        if turn.framework_run_state is None and not history:
            return TurnCompleted(new_messages=(), turn_error="the turn has no user message to answer")
        try:
            scope = await self._turn_setup.scope_for(turn)
        except TurnSetupError as error:
            return TurnCompleted(new_messages=(), turn_error=str(error))
        with turn_scope(scope), self._private_thread(turn) as (thread_id, thread_config):
            return await self._run_graph(turn, history, thread_id, thread_config, scope)

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> list[FrameworkMessage]:
        """Return the turn's messages that are not stored yet, with a result for every deferred call.

        The session calls it when steering, `cancel_turn` or a failure ends a turn without an answer. The
        turn's messages since its last stored one are in the checkpoint of its run state; each deferred
        call gets the `ToolMessage` the gate would have given the model on resume, built from the call's
        final record. It makes no model call and runs no tool.

        Args:
            turn: The turn's committed state; every record is final.

        Returns:
            The messages in the shared projection; none before the turn's first tool calls.

        Raises:
            ValueError: If the run state is another runner's or no valid checkpoint, or a call has no
                record (the session then stores its note instead).
        """
        if turn.framework_run_state is None:
            return []
        history = _history(turn)
        state = LangGraphRunState.from_json(turn.framework_run_state)
        with self._private_thread(turn) as (thread_id, thread_config):
            self._saver.import_thread(thread_id, state.thread, stored_messages=history)
            snapshot = await self._graph.aget_state(thread_config)
        stored_ids = {message.id for message in history}
        messages = cast(Sequence[BaseMessage], snapshot.values.get("messages") or ())
        unstored = [message for message in messages if message.id not in stored_ids]
        answered = {message.tool_call_id for message in unstored if isinstance(message, ToolMessage)}
        results: list[BaseMessage] = []
        for message in unstored:
            calls = message.tool_calls if isinstance(message, AIMessage) else ()
            for call in calls:
                if call["id"] in answered:
                    continue
                record = turn.tool_calls.get(call["id"] or "")
                if record is None:
                    raise ValueError(f"tool call {call['id']!r} of {turn.turn_id} has no record to answer it")
                results.append(answer_message(call, recorded_answer(record)))
        return project_messages([*unstored, *results])

    @contextlib.contextmanager
    def _private_thread(self, turn: AgentTurnContext) -> Iterator[tuple[str, RunnableConfig]]:
        """A thread of the saver for one call, deleted afterwards, so the saver keeps nothing between Steps.

        Every call gets a thread of its own, so concurrent sessions and retried attempts never share one.
        """
        thread_id = f"{turn.flow_id}/{turn.turn_id}/{turn.attempt}/{uuid.uuid4().hex}"
        try:
            yield thread_id, {"configurable": {"thread_id": thread_id}}
        finally:
            self._saver.delete_thread(thread_id)

    async def _run_graph(
        self,
        turn: AgentTurnContext,
        history: Sequence[BaseMessage],
        thread_id: str,
        thread_config: RunnableConfig,
        scope: TurnScope,
    ) -> AgentTurnOutcome:
        history_ids = {message.id for message in history}
        guard = ModelStepGuard(scope)
        if turn.framework_run_state is None:
            graph_input: object = {"messages": history}
            known_ids = set(history_ids)
        else:
            resumed = await self._resume_input(turn, history, thread_id, thread_config)
            if isinstance(resumed, TurnCompleted):
                return resumed
            graph_input, known_ids = resumed
        try:
            await self._stream_until_the_gate(graph_input, turn, thread_id, thread_config, guard, known_ids)
        except ModelStepViolation as error:
            return TurnCompleted(
                new_messages=(),
                usage=_no_usage(guard),
                turn_error=str(error),
                model_call_metadata=model_call_metadata(guard.model_call, None),
            )
        except (GraphRecursionError, InvalidUpdateError) as error:
            return TurnCompleted(
                new_messages=(),
                usage=_no_usage(guard),
                turn_error=f"LangGraph refused the run: {error}",
                model_call_metadata=model_call_metadata(guard.model_call, None),
            )
        except Exception as error:
            if is_context_window_refusal(error):
                raise ContextWindowExceeded(str(error)) from error
            refusal = provider_refusal(error)
            if refusal is None:
                raise  # a rate limit, a 5xx, a cut stream: RunModel tries again
            return TurnCompleted(
                new_messages=(),
                usage=_no_usage(guard),
                turn_error=refusal,
                model_call_metadata=model_call_metadata(guard.model_call, None),
            )
        if guard.agent_answer is not None:
            # Checked before anything of the answer is kept: a tool call cut short must not reach a Step.
            unfinished = unfinished_answer(guard.agent_answer)
            if unfinished is not None:
                raise UnfinishedModelResponse(unfinished)
        snapshot = await self._graph.aget_state(thread_config)
        messages = cast(Sequence[BaseMessage], snapshot.values.get("messages") or ())
        new_messages = [message for message in messages if message.id not in history_ids]
        responses = [m for m in messages if m.id not in known_ids and isinstance(m, AIMessage)]
        usage = _model_call_usage(guard, responses)
        metadata = model_call_metadata(guard.model_call, responses[-1] if responses else None)
        if snapshot.interrupts:
            interrupts = snapshot.interrupts
            outcome = self._tool_calls_requested(
                turn, thread_id, interrupts, messages, history_ids, usage, guard
            )
            return dataclasses.replace(outcome, model_call_metadata=metadata)
        if snapshot.next:
            return TurnCompleted(
                new_messages=(),
                usage=usage,
                model_call_metadata=metadata,
                turn_error=(
                    f"the graph stopped before {list(snapshot.next)} without a tool call; "
                    "remove interrupt_before/interrupt_after from the graph"
                ),
            )
        structured = snapshot.values.get("structured_response")
        answer_text = None if structured is None else _render_json(structured)
        projected = project_messages(new_messages, answer_text=answer_text)
        return TurnCompleted(new_messages=projected, usage=usage, model_call_metadata=metadata)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the real tool for one approved call, once: the graph's through its `ToolNode`, or an MCP tool.

        A graph tool's call goes through LangGraph's own tool pipeline (argument validation,
        `wrap_tool_call` middleware, `handle_tool_errors`) in this asyncio context, so
        `dex_agents.current_tool_execution()` gives the tool the call and its idempotency key, and the tool
        may ask the user (`dex_agents.ask_user_input`) or hand a remote task to the session
        (`dex_agents.start_tool_task`). A call of the MCP source's tool goes to `McpToolSource.call_tool`.

        Args:
            call: The approved call.

        Returns:
            The tool's result as text, or the MCP source's outcome (a task it started, say).

        Raises:
            ToolExecutionError: When the model should see an error instead of a result: the arguments are
                not a JSON object or do not validate, no tool has this name, or the tool's `ToolMessage`
                has status `error`. Any other exception the tool raises propagates unchanged, so the
                session retries or records the call by its effect.
        """
        if self._mcp_tools is not None and self._mcp_tools.owns_tool_call(call.tool_call):
            return await self._mcp_tools.call_tool(call)
        if is_graph_interrupt_call(call.tool_call.tool_call_id, call.tool_call.tool_name):
            return ToolExecutionResult(ask_for_interrupt(graph_interrupt_value(call.tool_call.arguments)))
        return await self._tool_step.execute(call, self._run_config(None, call.flow_id))

    def describe_tool(self, tool_name: str) -> str | None:
        """Return what tool ``tool_name`` does, for tracing (`ToolDescriber`), or `None` when unknown.

        It gives the `BaseTool.description` of the graph's `ToolNode` tool by that name, else the last
        listing of ``mcp_tools``; it never contacts a server.

        Args:
            tool_name: The tool's name, as the model called it.

        Returns:
            The tool's description, or `None`.
        """
        tool = self._tool_node.tools_by_name.get(tool_name)
        if tool is not None:
            return tool.description or None
        return self._mcp_tools.describe_tool(tool_name) if self._mcp_tools is not None else None

    async def _resume_input(
        self,
        turn: AgentTurnContext,
        history: Sequence[BaseMessage],
        thread_id: str,
        thread_config: RunnableConfig,
    ) -> tuple[Command[Any], set[str | None]] | TurnCompleted:
        """Import the turn's thread and build the resume command with every recorded outcome."""
        assert turn.framework_run_state is not None
        try:
            state = LangGraphRunState.from_json(turn.framework_run_state)
            self._saver.import_thread(thread_id, state.thread, stored_messages=history)
        except ValueError as error:
            return TurnCompleted(new_messages=(), turn_error=str(error))
        snapshot = await self._graph.aget_state(thread_config)
        answers: dict[str, GateAnswer | str] = {}
        for pending in snapshot.interrupts:
            payload = gate_payload(pending.value)
            if payload is None:
                answered = graph_interrupt_answer(pending, turn.tool_calls)
                if isinstance(answered, TurnCompleted):
                    return answered
                answers[pending.id] = answered
                continue
            record = turn.tool_calls.get(str(payload.get("id")))
            if record is None or not record.is_final:
                # The session makes every record final before RunModel; anything else is a bug to surface.
                raise RuntimeError(f"tool call {payload.get('id')!r} has no final record to resume with")
            answers[pending.id] = recorded_answer(record)
        if not answers:
            return TurnCompleted(
                new_messages=(), turn_error="the framework run state holds no pending tool call to resume"
            )
        messages = cast(Sequence[BaseMessage], snapshot.values.get("messages") or ())
        return Command(resume=answers), {message.id for message in messages}

    def _run_config(
        self, thread_id: str | None, session_id: str, guard: ModelStepGuard | None = None
    ) -> RunnableConfig:
        config: dict[str, Any] = dict(self._config)
        configurable = dict(cast(Mapping[str, Any], config.get("configurable") or {}))
        if thread_id is not None:
            configurable["thread_id"] = thread_id
        config["configurable"] = configurable
        # LangGraph copies the private thread's ID into the run's metadata unless it holds one, and
        # LangSmith groups traces into threads by it: the session ID keeps every Step of a session together.
        metadata = cast(Mapping[str, Any], config.get("metadata") or {})
        config["metadata"] = {"thread_id": session_id, **metadata}
        callbacks = list(cast(Sequence[Any], config.get("callbacks") or ()))
        if guard is not None:
            callbacks.extend(guard.handlers)
        config["callbacks"] = callbacks
        return cast(RunnableConfig, config)

    async def _stream_until_the_gate(
        self,
        graph_input: object,
        turn: AgentTurnContext,
        thread_id: str,
        thread_config: RunnableConfig,
        guard: ModelStepGuard,
        known_ids: set[str | None],
    ) -> None:
        """Run the graph until it ends or stops at interrupts other than `HumanInTheLoopMiddleware`'s.

        The middleware's interrupts are approved at once: its calls then stop at the gate, where the
        session's approval (which `ApprovalTools` requires for them) decides. Resuming runs no model call.
        """
        streamed_ids: set[str] = set()
        for _ in range(_MAX_MIDDLEWARE_REVIEWS):
            await self._stream(
                graph_input, turn.flow_id, thread_id, guard, known_ids, streamed_ids, turn.events
            )
            if not self._approval_tools.has_middleware:
                return
            pending = (await self._graph.aget_state(thread_config)).interrupts
            approvals = {
                interrupt.id: answer
                for interrupt in pending
                if (answer := self._approval_tools.answer(interrupt.value)) is not None
            }
            if not approvals:
                return
            graph_input = Command(resume=approvals)
        raise ModelStepViolation(
            f"HumanInTheLoopMiddleware interrupted {_MAX_MIDDLEWARE_REVIEWS} times in one model Step"
        )

    async def _stream(
        self,
        graph_input: object,
        session_id: str,
        thread_id: str,
        guard: ModelStepGuard,
        known_ids: set[str | None],
        streamed_ids: set[str],
        events: AgentEventWriter,
    ) -> None:
        """Run the graph until it ends or stops at interrupts, forwarding the model's text as it streams."""
        stream = cast(
            AsyncGenerator[Any, None],
            self._graph.astream(
                graph_input,
                self._run_config(thread_id, session_id, guard),
                context=self._context,
                stream_mode="messages",
                version="v2",
            ),
        )
        # Closing the stream when this coroutine is cancelled (cancel_turn) or fails stops the graph's
        # running model task, and with it the provider's streaming response.
        async with contextlib.aclosing(stream):
            async for part in stream:
                self._forward(part, known_ids, streamed_ids, events)

    @staticmethod
    def _forward(
        part: Mapping[str, Any], known_ids: set[str | None], streamed_ids: set[str], events: AgentEventWriter
    ) -> None:
        """Forward one streamed message part as text or reasoning deltas."""
        if part["type"] != "messages":
            return
        message, metadata = cast(tuple[BaseMessage, Mapping[str, Any]], part["data"])
        if is_middleware_model_call(metadata):
            return  # a middleware's own call (a tool selection, say) is not the agent's answer
        if isinstance(message, AIMessageChunk):
            if message.id:
                streamed_ids.add(message.id)
            _forward_chunk(message, events)
        elif isinstance(message, AIMessage) and message.id not in known_ids:
            # A model that does not stream still shows its answer once, as one delta.
            if message.id not in streamed_ids:
                events.write_text_delta(message.text)
            if message.id:
                streamed_ids.add(message.id)

    def _tool_calls_requested(
        self,
        turn: AgentTurnContext,
        thread_id: str,
        interrupts: Sequence[Interrupt],
        messages: Sequence[BaseMessage],
        history_ids: set[str | None],
        usage: AgentUsage,
        guard: ModelStepGuard,
    ) -> AgentTurnOutcome:
        gated: dict[str, Mapping[str, Any]] = {}
        questions: list[DeferredToolCall] = []
        for pending in interrupts:
            payload = gate_payload(pending.value)
            if payload is None:
                questions.append(graph_interrupt_call(pending))
            else:
                gated[str(payload.get("id"))] = payload
        order = _model_order(messages)
        invalid = _tool_call_id_problem(order)
        if invalid is not None:
            return TurnCompleted(new_messages=(), usage=usage, turn_error=invalid)
        missing = [tool_call_id for tool_call_id in gated if tool_call_id not in order]
        if missing:
            return TurnCompleted(
                new_messages=(),
                usage=usage,
                turn_error=(
                    f"the tool gate stopped for calls {missing} that the last model response did not make"
                ),
            )
        answered = {message.tool_call_id for message in messages if isinstance(message, ToolMessage)}
        ungated = [
            tool_call_id
            for tool_call_id in order
            if tool_call_id not in gated and tool_call_id not in answered
        ]
        # A node's interrupt can stop the graph before the calls reach the gate; they do once it resumes.
        if ungated and not questions:
            return TurnCompleted(
                new_messages=(),
                usage=usage,
                turn_error=(
                    f"tool calls {ungated} did not reach the tool gate; send each call to the tools node as "
                    "its own task (create_agent does; use route_tool_calls in your own graph)"
                ),
            )
        deferred = [
            *questions,
            *(
                self._deferred_call(turn, tool_call_id, gated[tool_call_id], guard)
                for tool_call_id in sorted(gated, key=order.index)
            ),
        ]
        state = LangGraphRunState(
            self._saver.export_thread(
                thread_id, stored_message_ids={message_id for message_id in history_ids if message_id}
            ),
            tuple(call.tool_call_id for call in deferred),
        )
        return ToolCallsRequested(framework_run_state=state.to_json(), tool_calls=deferred, usage=usage)

    def _deferred_call(
        self, turn: AgentTurnContext, tool_call_id: str, payload: Mapping[str, Any], guard: ModelStepGuard
    ) -> DeferredToolCall:
        """One gated call with its policy.

        A built-in's policy does not matter (the session routes it); a graph tool's comes from the session
        and the tool's metadata; the MCP source resolves its own (and adds the reference its tool Step
        calls by); a name nobody has gets `UNKNOWN_TOOL_POLICY`. A call whose streamed argument text is no
        JSON object keeps that text, not what LangChain made of it, so its tool Step fails to parse it and
        the model sees why.
        """
        name = str(payload.get("name"))
        malformed = guard.raw_tool_arguments.malformed(tool_call_id)
        arguments = malformed if malformed is not None else tool_arguments_json(payload.get("args") or {})
        tool = self._tool_node.tools_by_name.get(name)
        if name in turn.enabled_built_in_tools:
            policy = turn.resolve_tool_policy(name)
        elif tool is not None:
            # Any MCP server may annotate its tools as it likes, so the metadata counts only where the
            # Worker's code says it trusts it.
            declared = annotation_policy(tool) if self._trust_mcp_annotations else None
            policy = self._approval_tools.policy(
                name, turn.resolve_tool_policy(name, framework_policy=declared)
            )
        elif self._mcp_tools is not None and self._mcp_tools.tool(name) is not None:
            return self._mcp_tools.deferred_tool_call(
                turn, tool_call_id=tool_call_id, tool_name=name, arguments=arguments
            )
        else:
            policy = UNKNOWN_TOOL_POLICY
        return DeferredToolCall(tool_call_id, name, arguments, policy)


def _history(turn: AgentTurnContext) -> list[BaseMessage]:
    """The stored conversation as LangChain messages, after the session's summary when it has one."""
    history = history_from_stored_messages(turn.messages)
    if turn.context_summary is not None:
        history.insert(0, summary_message(turn.context_summary))
    return history


def _checked_graph(graph: object, saver: DexCheckpointSaver) -> Pregel[Any, Any, Any, Any]:
    if not isinstance(graph, Pregel):
        raise TypeError(
            "the graph factory must return a compiled graph (create_agent(...) or StateGraph.compile()), "
            f"got {type(graph).__name__}"
        )
    compiled = cast(Pregel[Any, Any, Any, Any], graph)
    if compiled.checkpointer is not saver:
        raise TypeError(
            "the graph factory must compile the graph with the checkpointer it receives "
            "(create_agent(..., checkpointer=checkpointer) or StateGraph.compile(checkpointer=checkpointer))"
        )
    refuse_conversation_rewriting_middleware(compiled)
    if "messages" not in compiled.channels:
        raise TypeError("the graph's state must keep its conversation in a 'messages' key")
    if compiled.interrupt_before_nodes or compiled.interrupt_after_nodes:
        raise TypeError(
            "the graph must not be compiled with interrupt_before or interrupt_after; "
            "the tool gate stops it for every tool call"
        )
    return compiled


def _model_order(messages: Sequence[BaseMessage]) -> list[str]:
    """The tool call IDs of the last model response, in model order."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return [call["id"] or "" for call in message.tool_calls]
    return []


def _tool_call_id_problem(tool_call_ids: Sequence[str]) -> str | None:
    """Why the model's tool call IDs cannot name tool Steps, or `None` when they can."""
    if any(not tool_call_id for tool_call_id in tool_call_ids):
        return "the model returned a tool call without an ID; every tool call needs the provider's call ID"
    slashed = [tool_call_id for tool_call_id in tool_call_ids if "/" in tool_call_id]
    if slashed:
        return f"the model returned tool call IDs containing '/', which a Dex tool call ID cannot: {slashed}"
    if len(set(tool_call_ids)) != len(tool_call_ids):
        return f"the model returned the same tool call ID twice in one response: {list(tool_call_ids)}"
    return None


def _forward_chunk(chunk: AIMessageChunk, events: AgentEventWriter) -> None:
    content: object = chunk.content
    if isinstance(content, str):
        events.write_text_delta(content)
        return
    for block in cast(Sequence[object], content):
        if isinstance(block, str):
            events.write_text_delta(block)
        elif isinstance(block, Mapping):
            typed = cast(Mapping[str, Any], block)
            kind = typed.get("type")
            if kind == "text" and isinstance(typed.get("text"), str):
                events.write_text_delta(typed["text"])
            elif kind in {"reasoning", "thinking"}:
                text = typed.get("reasoning") or typed.get("thinking") or ""
                if isinstance(text, str):
                    events.write_reasoning_delta(text)


def _render_json(value: object) -> str:
    """The structured response as display text: `create_agent` ends such a turn on a call without text."""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, sort_keys=True, default=str)


def _no_usage(guard: ModelStepGuard) -> AgentUsage:
    return AgentUsage(model_calls=guard.model_calls).plus(guard.middleware_usage)


def _model_call_usage(guard: ModelStepGuard, responses: Sequence[AIMessage]) -> AgentUsage:
    """The usage of this Step's model calls, the calls middleware made for itself included.

    The agent's tokens come from the `usage_metadata` of the response it produced.
    """
    agent_tokens = token_usage(responses[-1].usage_metadata if responses else None)
    return _no_usage(guard).plus(agent_tokens)
