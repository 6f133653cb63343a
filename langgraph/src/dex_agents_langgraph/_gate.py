"""The tool gate: every tool call stops the graph with an interrupt instead of running in the model Step.

`DexToolGate` is a `create_agent` middleware, and `dex_tool_node` builds a `ToolNode` with the same gate
for graphs of your own. Inside `run_model_step` the gate calls `interrupt()` for each tool call, so the
graph stops after its one model call and the session runs each call in its own tool Step. When the turn
resumes, LangGraph runs the gate again and `interrupt()` returns the recorded result, which the gate turns
into the call's `ToolMessage`. In a tool Step the runner marks the one call it executes, and for that call
only the gate hands the request on to the real tool.

LangGraph re-runs a node from its start on resume, so the gate does nothing before `interrupt()` that
could matter twice.

`DexToolGate` also has a model hook: in a model Step it adds the session's tools (enabled built-ins, MCP
tools) to the model request and applies the model and instructions the turn's settings chose (see
`_turn_scope`). Outside a model Step of the runner it changes nothing.

`ModelStepGuard` is the backstop for a graph that does not stop at the gate: it rides along as a LangChain
callback handler on the model Step's graph run and, with `raise_error`, aborts the run *before* a second
model call of the agent reaches its provider or a tool body runs, so neither can ever happen silently
inside `RunModel`. A model call that a middleware makes for itself and that LangChain marks as internal to
the middleware (`LLMToolSelectorMiddleware` choosing the tools, for example) is part of the Step: it is
allowed, counted and its usage added to the Step's. The guard also stops the agent's call when the turn's
scope (the session's tools, the model and instructions its settings chose) did not reach it, and keeps
what the call's start reported for its `ModelCallMetadata`, and when its first streamed chunk came.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, TypedDict, cast
from uuid import UUID

from dex_agents.runner import describe_tool_call_outcome
from dex_agents.values import AgentToolCall, AgentUsage, ToolCallStatus
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.internal_call_transformer import (
    INTERNAL_CALL_METADATA_KEY,
    internal_call_metadata,
)
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, GenerationChunk, LLMResult
from langchain_core.tools import BaseTool
from langgraph.graph import END
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Send, interrupt

from dex_agents_langgraph._call_metadata import ModelCallStart, token_usage
from dex_agents_langgraph._provider_answers import RawToolArguments
from dex_agents_langgraph._turn_scope import TurnScope, current_turn_scope

__all__ = [
    "GATE_INTERRUPT_KEY",
    "DexToolGate",
    "GateAnswer",
    "ModelStepGuard",
    "ModelStepViolation",
    "answer_message",
    "dex_tool_node",
    "executing_tool_call",
    "gate_payload",
    "is_middleware_model_call",
    "recorded_answer",
    "route_tool_calls",
]

GATE_INTERRUPT_KEY = "dex_tool_call"
"""The key of the gate's interrupt value that holds the call; tells the gate's interrupts from others."""

_EXECUTING: ContextVar[str | None] = ContextVar("dex_agents_langgraph_executing", default=None)


class GateAnswer(TypedDict):
    """The resume value the runner gives the gate for one call: its recorded outcome.

    Attributes:
        succeeded: Whether the call succeeded; otherwise the model sees the text as an error.
        content: What the model sees.
    """

    succeeded: bool
    content: str


@contextlib.contextmanager
def executing_tool_call(tool_call_id: str) -> Iterator[None]:
    """Let the gate run the real tool for one call, inside a tool Step, for the duration of the block."""
    token = _EXECUTING.set(tool_call_id)
    try:
        yield
    finally:
        _EXECUTING.reset(token)


def gate_payload(value: object) -> Mapping[str, Any] | None:
    """Return the call an interrupt value of the gate carries, or `None` for someone else's interrupt."""
    if isinstance(value, Mapping):
        payload = cast(Mapping[str, Any], value).get(GATE_INTERRUPT_KEY)
        if isinstance(payload, Mapping):
            return cast(Mapping[str, Any], payload)
    return None


def _passes_through(request: ToolCallRequest) -> bool:
    executing = _EXECUTING.get()
    # A call without an ID never passes: outside a tool Step nothing is executing, and None == None.
    return executing is not None and executing == request.tool_call["id"]


def recorded_answer(record: AgentToolCall) -> GateAnswer:
    """Return the answer for a call whose record is final: the outcome the model sees."""
    return GateAnswer(
        succeeded=record.status is ToolCallStatus.SUCCEEDED, content=describe_tool_call_outcome(record)
    )


def answer_message(call: ToolCall, answer: GateAnswer) -> ToolMessage:
    """Return the `ToolMessage` that gives the model a call's answer, as the gate returns it on resume."""
    return ToolMessage(
        content=answer["content"],
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="success" if answer["succeeded"] else "error",
    )


def _stop_for_session(request: ToolCallRequest) -> ToolMessage:
    call = request.tool_call
    answer = cast(
        GateAnswer,
        interrupt({GATE_INTERRUPT_KEY: {"id": call["id"], "name": call["name"], "args": call["args"]}}),
    )
    return answer_message(call, answer)


def _gate(
    request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
) -> ToolMessage | Command[Any]:
    if _passes_through(request):
        return handler(request)
    return _stop_for_session(request)


async def _agate(
    request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
) -> ToolMessage | Command[Any]:
    if _passes_through(request):
        return await handler(request)
    return _stop_for_session(request)


def _with_turn_scope(request: ModelRequest[Any]) -> ModelRequest[Any]:
    scope = current_turn_scope()
    return request if scope is None else scope.apply(request)


def _with_invalid_calls_routed(response: ModelResponse[Any]) -> ModelResponse[Any]:
    """In a model Step, turn the answer's unparsable tool calls into calls the agent routes to the gate.

    `create_agent` routes only `AIMessage.tool_calls` to its tools, so a call whose arguments are no JSON
    would vanish and the answer's text would end the turn. As a call with empty arguments it stops at the
    gate like any other, and the runner gives its tool Step the provider's own text, which fails to parse,
    so the model hears about its arguments instead of the turn ending on a half answer.
    """
    if current_turn_scope() is None or not any(
        isinstance(message, AIMessage) and message.invalid_tool_calls for message in response.result
    ):
        return response
    return dataclasses.replace(
        response, result=[_route_invalid_calls(message) for message in response.result]
    )


def _route_invalid_calls(message: BaseMessage) -> BaseMessage:
    if not isinstance(message, AIMessage) or not message.invalid_tool_calls:
        return message
    routed = [call for call in message.invalid_tool_calls if call.get("id")]
    calls = [
        *message.tool_calls,
        *(
            ToolCall(name=call.get("name") or "", args={}, id=call.get("id"), type="tool_call")
            for call in routed
        ),
    ]
    unrouted = [call for call in message.invalid_tool_calls if not call.get("id")]
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": unrouted})


class DexToolGate(AgentMiddleware):
    """The `create_agent` middleware that defers every tool call to the Dex session.

    Add it to `create_agent(..., middleware=[...])`, first in the list. Tool middleware listed after it
    (retries, logging) then wraps the real tool in its tool Step only; tool middleware listed before it
    also runs in the model Step, and LangGraph re-runs its code before the gate when the turn resumes.

    Its model hook adds the session's tools (the enabled built-ins, the runner's MCP tools) to each model
    request of a model Step, and applies the model and instructions that the runner's
    ``model_for_settings`` and ``instructions_for_settings`` chose from the turn's session settings.
    """

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Add the session's tools and apply the turn's model and instructions, then call the model."""
        return _with_invalid_calls_routed(handler(_with_turn_scope(request)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Add the session's tools and apply the turn's model and instructions, then call the model."""
        return _with_invalid_calls_routed(await handler(_with_turn_scope(request)))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Stop the graph for the session, or run the tool inside its tool Step."""
        return _gate(request, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Stop the graph for the session, or run the tool inside its tool Step."""
        return await _agate(request, handler)


def dex_tool_node(
    tools: Sequence[BaseTool | Callable[..., Any]], *, name: str = "tools", **tool_node_options: Any
) -> ToolNode:
    """Return a `ToolNode` that defers every call to the Dex session, for a graph of your own.

    Route to it with `route_tool_calls`, which sends each call to the node as its own task, as
    `create_agent` does; the gate needs one interrupt per task.

    Args:
        tools: The tools.
        name: The node's name.
        **tool_node_options: Other `ToolNode` options, such as `handle_tool_errors`.

    Returns:
        The node.
    """
    return ToolNode(tools, name=name, wrap_tool_call=_gate, awrap_tool_call=_agate, **tool_node_options)


def route_tool_calls(
    state: Mapping[str, Any], *, tools_node: str = "tools", messages_key: str = "messages"
) -> list[Send] | str:
    """Route a model node to the tools node: one `Send` per tool call of the last message, else `END`.

    Use it as the conditional edge after your model node (wrap it with `functools.partial` for other
    node or key names).

    Args:
        state: The graph state.
        tools_node: The tools node's name.
        messages_key: The state key of the message list.

    Returns:
        The sends, or `END` when the last message calls no tool.
    """
    messages = cast(Sequence[AnyMessage], state.get(messages_key) or ())
    if not messages:
        return END
    calls: list[ToolCall] = list(getattr(messages[-1], "tool_calls", None) or ())
    if not calls:
        return END
    return [Send(tools_node, [call]) for call in calls]


class ModelStepViolation(Exception):
    """The graph tried to make a second model call or run a tool inside the model Step."""


def _mapping(value: object) -> Mapping[str, Any]:
    return dict(cast(Mapping[str, Any], value)) if isinstance(value, Mapping) else {}


def is_middleware_model_call(metadata: Mapping[str, Any] | None) -> bool:
    """Whether a model call's metadata marks it as a middleware's own call.

    LangChain's marker carries a token private to the process, so a graph's own metadata cannot fake it.
    """
    marker = internal_call_metadata()[INTERNAL_CALL_METADATA_KEY]
    return metadata is not None and metadata.get(INTERNAL_CALL_METADATA_KEY) == marker


class _ModelCallHandler(BaseCallbackHandler):
    """A callback handler that gets no event of graph nodes, chains, retrievers, retries or custom events.

    A synchronous handler that is not inline costs a hop to the thread pool per event it gets, and the
    guard needs none of these.
    """

    @property
    def ignore_chain(self) -> bool:
        """Graph nodes and chains are neither model calls nor tool runs."""
        return True

    @property
    def ignore_retriever(self) -> bool:
        """A retriever is neither a model call nor a tool run."""
        return True

    @property
    def ignore_retry(self) -> bool:
        """A retry's model call or tool run reports its own start."""
        return True

    @property
    def ignore_custom_event(self) -> bool:
        """Custom events are the graph's own."""
        return True


class ModelStepGuard(_ModelCallHandler):
    """Counts the model calls of one graph run and refuses a second call of the agent and every tool run.

    Pass `handlers` to the run, not the guard alone: the guard takes the start callbacks, which may refuse,
    and its `recorder` the streamed chunks and answers.

    Args:
        scope: The turn's scope, which must have reached the agent's model call.

    Attributes:
        model_calls: Every model call the run started (a call that fails counts too), the middleware's
            own included.
        middleware_usage: The summed tokens of the middleware's own calls that returned.
        model_call: What the agent's model call reported when it started (its LangSmith parameters,
            invocation parameters, input messages) and when its first chunk streamed, or `None` before it.
        agent_answer: The agent's model answer as the chat model returned it (before any middleware saw
            it), or `None` until the call ended.
        raw_tool_arguments: The argument text of each tool call of the agent's answer, as it streamed.
    """

    # Without `raise_error`, LangChain would log the guard's exception and carry on. The guard runs like any
    # other handler (not inline): an inline handler that raises leaves the other handlers' coroutines
    # unawaited. LangChain awaits every start callback before the model or tool runs, so it still stops both.
    # A handler that is not inline costs a hop to the thread pool per event, so the guard ignores every
    # event but the starts; the chunks and answers (about one event per streamed chunk) go to the inline
    # recorder, which never refuses a chat model's call.
    raise_error: bool = True
    run_inline: bool = False

    def __init__(self, scope: TurnScope | None = None) -> None:
        self.model_calls = 0
        self.middleware_usage = AgentUsage()
        self.model_call: ModelCallStart | None = None
        self.agent_answer: BaseMessage | None = None
        self.raw_tool_arguments = RawToolArguments()
        self._scope = scope
        self._agent_run: UUID | None = None
        self._agent_calls = 0
        self._middleware_runs: set[UUID] = set()
        self._recorder = _ModelCallRecorder(self)

    @property
    def handlers(self) -> tuple[BaseCallbackHandler, ...]:
        """The callback handlers a model Step's run gets: the guard and its inline recorder."""
        return (self, self._recorder)

    @property
    def ignore_llm(self) -> bool:
        """The recorder takes a completion model's start, and every model's chunks and end."""
        return True

    def model_call_starts(
        self,
        run_id: UUID,
        metadata: Mapping[str, Any] | None,
        serialized: Mapping[str, Any] | None,
        messages: Sequence[BaseMessage],
        invocation_parameters: object,
    ) -> None:
        """Count a starting model call; refuse the agent's second, or one the turn's scope missed."""
        if is_middleware_model_call(metadata):
            self._middleware_runs.add(run_id)
        elif self._agent_calls >= 1:
            raise ModelStepViolation(
                "the graph started a second model call in one model Step; every tool call must stop at "
                "DexToolGate (create_agent) or dex_tool_node (your own graph) before the next model call"
            )
        else:
            unapplied = None if self._scope is None else self._scope.unapplied()
            if unapplied is not None:
                raise ModelStepViolation(unapplied)
            self._agent_calls += 1
            self._agent_run = run_id
            arguments = None if serialized is None else serialized.get("kwargs")
            self.model_call = ModelCallStart(
                metadata=dict(metadata or {}),
                invocation_parameters=_mapping(invocation_parameters),
                constructor_arguments=_mapping(arguments),
                messages=tuple(messages),
                started_at=time.monotonic(),
            )
        self.model_calls += 1

    def chunk_streamed(self, run_id: UUID, chunk: GenerationChunk | ChatGenerationChunk | None) -> None:
        """Note when the agent's call streamed its first chunk, and the text of its tool calls."""
        if run_id != self._agent_run:
            return
        call = self.model_call
        if call is not None and call.first_chunk_at is None:
            call.first_chunk_at = time.monotonic()
        message = chunk.message if isinstance(chunk, ChatGenerationChunk) else None
        if isinstance(message, AIMessageChunk):
            self.raw_tool_arguments.add_chunk(message.tool_call_chunks)

    def call_answered(self, run_id: UUID, response: LLMResult) -> None:
        """Keep the agent's answer; add the usage of a middleware's own call.

        The agent's usage is read from its `AIMessage` in the graph state.
        """
        if run_id == self._agent_run:
            for generations in response.generations:
                for generation in generations:
                    if isinstance(generation, ChatGeneration):
                        self.agent_answer = generation.message
                        self.raw_tool_arguments.add_answer(generation.message)
            return
        if run_id not in self._middleware_runs:
            return
        usage: UsageMetadata | None = None
        for generations in response.generations:
            for generation in generations:
                if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
                    usage = generation.message.usage_metadata or usage
        self.middleware_usage = self.middleware_usage.plus(token_usage(usage))

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: Any,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Count a chat model call; refuse a second one of the agent."""
        batch = cast(Sequence[Sequence[BaseMessage]], messages or ())
        self.model_call_starts(
            run_id, metadata, serialized, batch[0] if batch else (), kwargs.get("invocation_params")
        )

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Refuse any tool run: tools run only in their own tool Steps."""
        name = serialized.get("name") if isinstance(serialized, dict) else None  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ModelStepViolation(
            f"tool {name or '?'!r} was about to run inside the model Step; every tool must stop at "
            "DexToolGate (create_agent) or dex_tool_node (your own graph), so it runs in its own tool Step"
        )


class _ModelCallRecorder(_ModelCallHandler):
    """The inline half of a `ModelStepGuard`: keeps what the model calls stream and answer.

    It runs inline, on the event loop, because it gets about one event per streamed chunk. It refuses only
    a completion model's (not a chat model's) second call, which LangChain reports to `on_llm_start` alone.

    Args:
        guard: The guard whose state it keeps.
    """

    raise_error: bool = True
    run_inline: bool = True

    def __init__(self, guard: ModelStepGuard) -> None:
        self._guard = guard

    @property
    def ignore_chat_model(self) -> bool:
        """The guard takes a chat model's start."""
        return True

    @property
    def ignore_agent(self) -> bool:
        """The guard takes the tool runs."""
        return True

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Count a completion model call; refuse a second one of the agent."""
        self._guard.model_call_starts(run_id, metadata, serialized, (), kwargs.get("invocation_params"))

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        """Pass a streamed chunk to the guard."""
        self._guard.chunk_streamed(run_id, chunk)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Pass a model call's answer to the guard."""
        self._guard.call_answered(run_id, response)
