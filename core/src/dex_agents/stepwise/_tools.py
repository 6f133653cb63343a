"""Tools of a Stepwise agent: what the model is offered, and what runs when the session runs a call.

A `ToolSource` lists its tools, turns a model's call of one of them into the session's `DeferredToolCall`
(its policy, and whatever the source needs to find the tool again), recognizes that call's record in the
tool Step, and runs it there. Plain Python functions become a `FunctionToolSource`;
`dex_agents.mcp.McpToolSource` is a source as it is. The runner never runs a tool itself in `RunModel`: it
offers the tools, defers every call as its own Step through the source that offers it, and hands the
source the call inside that Step.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, overload, runtime_checkable

import pydantic
import pydantic_core

from dex_agents._tools._arguments import parse_tool_arguments
from dex_agents._tools._tasks import (
    ToolTaskCancellation,
    ToolTaskHandler,
    ToolTaskHandlers,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    combined_task_handlers,
)
from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.stepwise._schema import (
    ArgumentsModel,
    ToolDefinitionError,
    build_arguments_model,
    parse_docstring,
)
from dex_agents.stepwise._tasks import without_tool_tasks
from dex_agents.values import AgentToolCall, ToolEffect

__all__ = [
    "FunctionTool",
    "FunctionToolSource",
    "ListedTool",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolSource",
    "chat_tool",
    "function_tool",
    "is_async_callable",
    "render_tool_output",
]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@runtime_checkable
class ListedTool(Protocol):
    """A tool as a source lists it for the model: `ToolDefinition`, or `dex_agents.mcp.McpToolDefinition`."""

    @property
    def name(self) -> str:
        """The name the model calls it by: 1 to 64 letters, digits, ``_`` or ``-``."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def input_schema(self) -> Mapping[str, object]:
        """The JSON schema of the arguments, an object schema."""
        ...


def chat_tool(tool: ListedTool) -> dict[str, object]:
    """Return a listed tool in the OpenAI chat format that LiteLLM takes.

    Args:
        tool: The tool.

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"}}``.
    """
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.input_schema),
        },
    }


@dataclass(frozen=True)
class ToolDefinition:
    """A function tool as the model is offered it.

    Attributes:
        name: The tool's name: 1 to 64 letters, digits, ``_`` or ``-``, as model APIs require.
        description: What the tool does, for the model.
        input_schema: The JSON schema of the arguments, an object schema.
        policy: How the session runs the tool, unless the session's own ``tool_policies`` name it; `None`
            leaves it to the session's ``default_tool_effect``.
    """

    name: str
    description: str
    input_schema: Mapping[str, object]
    policy: ToolPolicy | None = None


@runtime_checkable
class ToolSource(Protocol):
    """Where a Stepwise agent's tools come from, and how one call of them runs.

    Every method may run in any Worker and run again after a crash. ``list_tools`` and
    ``deferred_tool_call`` run in `RunModel`; ``owns_tool_call`` and ``call_tool`` run in the call's tool
    Step, which may be another Worker that never listed the source, so a source keeps whatever it needs to
    find the tool again in the call (``DeferredToolCall.tool_source_reference``) rather than in memory.
    `dex_agents.mcp.McpToolSource` implements this protocol as it is.

    A source whose tools start remote tasks (`dex_agents.ToolTaskStarted`) also implements
    `dex_agents.ToolTaskPoller` and, optionally, `dex_agents.ToolTaskCanceller` for the calls it owns; the
    runner passes each poll and cancellation of such a call to it. The tools of a source without
    ``poll_tool_task`` run with ``supports_tool_tasks`` false.

    A source that knows its tools' names without I/O also implements ``agent_tool_names`` (as
    `dex_agents.ToolNamesRunner` has it), so the session checks ``tool_policies`` against them; the runner
    lists no names while one of its sources returns `None` or lacks the method.
    """

    async def list_tools(self) -> Sequence[ListedTool]:
        """Return the tools this source offers the model now."""
        ...

    def deferred_tool_call(
        self, turn: AgentTurnContext, *, tool_call_id: str, tool_name: str, arguments: str
    ) -> DeferredToolCall:
        """Return the session's deferred call for the model's call of one of this source's tools.

        It carries the call's policy (the session's ``tool_policies`` for the name win; use
        ``turn.resolve_tool_policy``) and, when the source needs it, a ``tool_source_reference``.
        """
        ...

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        """Whether ``record`` is a call this source deferred, so `call_tool` runs it."""
        ...

    async def call_tool(self, execution: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one approved call in its tool Step and return what the model sees.

        ``execution.idempotency_key`` is the same on every attempt of the call: hand it to what the tool
        changes.

        Raises:
            ToolExecutionError: For a failure the model should see, such as invalid arguments.
        """
        ...


def is_async_callable(function: object) -> bool:
    """Whether calling ``function`` returns a coroutine: an async function, or an async ``__call__``."""
    # A callable object with an async __call__ is as async as an async function.
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__)


def render_tool_output(value: object) -> str:
    """Return a tool's return value as the text the model sees: a string as it is, anything else as JSON.

    Args:
        value: What the tool returned.

    Returns:
        The text.

    Raises:
        TypeError: If the value has no JSON form.
    """
    if isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError as error:
        raise TypeError(f"a {type(value).__name__} has no JSON form: {error}") from error


def _describe_validation_error(error: pydantic.ValidationError) -> str:
    problems = [
        f"{'.'.join(str(part) for part in problem['loc']) or 'arguments'}: {problem['msg']}"
        for problem in error.errors(include_url=False)
    ]
    return "; ".join(problems)


class FunctionTool:
    """A Python function, sync or async, offered to the model as a tool.

    The function's type hints become the JSON schema of its arguments, its docstring's text before the
    first section the tool's description, and the ``Args:`` entries the arguments' descriptions. A call's
    arguments are validated against the same schema before the function runs; invalid arguments reach the
    model as a failed call. A sync function runs in a worker thread, so a slow one does not stop the
    Step's heartbeat; the thread sees the current tool call, so it may call `dex_agents.ask_user_input`,
    and it hands a task over by returning ``start_tool_task(...)``, which is awaited on the event loop.

    Args:
        function: The tool's code. It returns text, or a value with a JSON form.
        name: The tool's name; defaults to the function's name.
        description: What the tool does; defaults to the docstring.
        effect: What running the tool may change, which decides its Step, retries and default approval.
            `None` leaves it to the session's ``default_tool_effect`` (``unclassified``: one attempt and
            an approval).
        requires_approval: Whether a call waits for approval; `None` uses the effect's default.
        task_handler: Polls, and optionally cancels, the remote tasks the function hands to the session
            with `dex_agents.start_tool_task`; without it the function runs with ``supports_tool_tasks``
            false and must finish its work inside the call.

    Raises:
        ToolDefinitionError: If the function cannot be offered to a model.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        effect: ToolEffect | str | None = None,
        requires_approval: bool | None = None,
        task_handler: ToolTaskHandler | None = None,
    ) -> None:
        if not callable(function):
            raise ToolDefinitionError(f"a tool must be a function, got {type(function).__name__}")
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if not isinstance(tool_name, str) or not _TOOL_NAME.match(tool_name):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ToolDefinitionError(
                f"tool name {tool_name!r} is not 1 to 64 letters, digits, '_' or '-'; pass name=... to "
                "function_tool"
            )
        if effect is None and requires_approval is not None:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: requires_approval needs an effect too, such as effect='read'"
            )
        try:
            policy = None if effect is None else ToolPolicy(ToolEffect(effect), requires_approval)
        except ValueError as error:
            choices = ", ".join(member.value for member in ToolEffect)
            raise ToolDefinitionError(
                f"tool {tool_name!r}: effect {effect!r} is not one of {choices}"
            ) from error
        if task_handler is not None and not isinstance(task_handler, ToolTaskHandler):  # pyright: ignore[reportUnnecessaryIsInstance]
            kind = type(task_handler).__name__
            raise ToolDefinitionError(f"tool {tool_name!r}: task_handler must be ToolTaskHandler, got {kind}")
        self.task_handler = task_handler
        docstring_description, argument_descriptions = parse_docstring(inspect.getdoc(function))
        self._function = function
        self._arguments: ArgumentsModel = build_arguments_model(function, tool_name, argument_descriptions)
        self._is_async = is_async_callable(function)
        self.definition = ToolDefinition(
            name=tool_name,
            description=description if description is not None else docstring_description,
            input_schema=self._arguments.json_schema,
            policy=policy,
        )

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.definition.name

    @property
    def function(self) -> Callable[..., Any]:
        """The tool's code."""
        return self._function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly, as if it were not a tool."""
        return self._function(*args, **kwargs)

    async def call(self, arguments: Mapping[str, object]) -> str:
        """Validate the arguments, run the function once, and return its output as text.

        Args:
            arguments: The arguments the model sent.

        Returns:
            The text the model sees.

        Raises:
            ToolExecutionError: If the arguments do not match the parameters (the function does not run),
                or as the function raises it.
            TypeError: If the function returned a value with no JSON form.
        """
        try:
            keyword_arguments = self._arguments.validate(arguments)
        except pydantic.ValidationError as error:
            raise ToolExecutionError(
                f"invalid arguments for tool {self.name!r}: {_describe_validation_error(error)}"
            ) from error
        if self._is_async:
            result = await cast(Callable[..., Awaitable[object]], self._function)(**keyword_arguments)
        else:
            result = await asyncio.to_thread(functools.partial(self._function, **keyword_arguments))
            if inspect.isawaitable(result):
                result = await result
        try:
            return render_tool_output(result)
        except TypeError as error:
            raise TypeError(f"tool {self.name!r} returned a value the model cannot read: {error}") from error


@overload
def function_tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | str | None = None,
    requires_approval: bool | None = None,
    task_handler: ToolTaskHandler | None = None,
) -> FunctionTool: ...


@overload
def function_tool(
    function: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | str | None = None,
    requires_approval: bool | None = None,
    task_handler: ToolTaskHandler | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | str | None = None,
    requires_approval: bool | None = None,
    task_handler: ToolTaskHandler | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a function a tool with an effect, as a call (``function_tool(f, effect="read")``) or decorator.

    Args:
        function: The tool's code; omit it to use ``function_tool(...)`` as a decorator.
        name: The tool's name; defaults to the function's name.
        description: What the tool does; defaults to the docstring.
        effect: What running the tool may change (see `ToolEffect`).
        requires_approval: Whether a call waits for approval; `None` uses the effect's default.
        task_handler: Polls (and optionally cancels) the tasks the function starts (see `FunctionTool`).

    Returns:
        The tool, or a decorator that makes one.

    Raises:
        ToolDefinitionError: If the function cannot be offered to a model.
    """

    def make(target: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            target,
            name=name,
            description=description,
            effect=effect,
            requires_approval=requires_approval,
            task_handler=task_handler,
        )

    return make if function is None else make(function)


@dataclass
class FunctionToolSource:
    """A `ToolSource` over Python functions; the form every plain function of an agent takes.

    It is the `dex_agents.ToolTaskPoller` and `dex_agents.ToolTaskCanceller` of its functions' tasks: each
    poll goes to the function's `ToolTaskHandler` (``function_tool(task_handler=...)``) or to
    ``task_handlers``. A function with neither runs with ``supports_tool_tasks`` false.

    Args:
        tools: Functions or `FunctionTool` objects.
        task_handlers: Task handlers by function name, for functions that have none of their own.

    Raises:
        ToolDefinitionError: If a function cannot be a tool, two tools share a name, or ``task_handlers``
            names a function that is not here or has a handler of its own.
    """

    tools: Iterable[FunctionTool | Callable[..., Any]]
    task_handlers: ToolTaskHandlers | None = None
    _by_name: dict[str, FunctionTool] = field(init=False, repr=False)
    _task_handlers: ToolTaskHandlers = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {}
        for item in self.tools:
            tool = item if isinstance(item, FunctionTool) else FunctionTool(item)
            if tool.name in self._by_name:
                raise ToolDefinitionError(f"two tools are named {tool.name!r}; tool names must be unique")
            self._by_name[tool.name] = tool
        self.tools = tuple(self._by_name.values())
        own = {
            name: tool.task_handler for name, tool in self._by_name.items() if tool.task_handler is not None
        }
        self._task_handlers = combined_task_handlers(ToolTaskHandlers(own), self._checked_task_handlers(own))

    def describe_tool(self, tool_name: str) -> str | None:
        """Return function tool ``tool_name``'s description, or `None` when it has none or is not here."""
        tool = self._by_name.get(tool_name)
        return tool.definition.description or None if tool is not None else None

    def _checked_task_handlers(self, own: Mapping[str, ToolTaskHandler]) -> ToolTaskHandlers | None:
        shared = self.task_handlers
        if shared is None:
            return None
        if not isinstance(shared, ToolTaskHandlers):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ToolDefinitionError(f"task_handlers must be ToolTaskHandlers, got {type(shared).__name__}")
        for name in sorted(shared.tool_names):
            if name not in self._by_name:
                known = ", ".join(self._by_name) or "none"
                raise ToolDefinitionError(
                    f"task_handlers has a handler for {name!r}, which is not a function tool of this agent "
                    f"(its function tools: {known}); an MCP source polls its own tasks"
                )
            if name in own:
                raise ToolDefinitionError(
                    f"tool {name!r} has a task_handler of its own and one in task_handlers; give it one"
                )
        return shared

    def polls_tasks_of(self, tool_name: str) -> bool:
        """Whether the function ``tool_name`` has a task handler, so it may start tasks."""
        return tool_name in self._task_handlers.tool_names

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll a function's task once with its handler.

        Args:
            poll: The poll.

        Returns:
            The handler's outcome.

        Raises:
            LookupError: If the function has no task handler (any more); the call is recorded by its effect.
        """
        record = poll.tool_call
        if not self.polls_tasks_of(record.tool_name):
            raise LookupError(
                f"tool {record.tool_name!r} started task {record.task_id!r}, but it has no task handler; "
                "give it function_tool(task_handler=...) or AgentDefinition(task_handlers=...)"
            )
        return await self._task_handlers.poll_tool_task(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel a function's task with its handler's ``cancel``; a task without one is left alone.

        Args:
            cancellation: The abandoned task.
        """
        await self._task_handlers.cancel_tool_task(cancellation)

    @property
    def names(self) -> tuple[str, ...]:
        """The tools' names, in the order given."""
        return tuple(self._by_name)

    def agent_tool_names(self) -> tuple[str, ...]:
        """Return the tools' names (`dex_agents.ToolNamesRunner`), so the session checks its policies."""
        return self.names

    async def list_tools(self) -> Sequence[ToolDefinition]:
        """Return every function's definition."""
        return self.definitions

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """Every function's definition, in the order given; known without a call."""
        return tuple(tool.definition for tool in self._by_name.values())

    def deferred_tool_call(
        self, turn: AgentTurnContext, *, tool_call_id: str, tool_name: str, arguments: str
    ) -> DeferredToolCall:
        """Return the deferred call of one of these functions, with its policy.

        The session's ``tool_policies`` for the name win, then the function's own (`function_tool`'s
        ``effect`` and ``requires_approval``), then the session's ``default_tool_effect``. A name these
        functions lack gets `UNKNOWN_TOOL_POLICY`, so its Step only records the failure.

        Args:
            turn: The turn the model call belongs to.
            tool_call_id: The call's ID.
            tool_name: The tool the model called.
            arguments: The call's arguments as JSON text.

        Returns:
            The deferred call.
        """
        tool = self._by_name.get(tool_name)
        if tool is None:
            policy = UNKNOWN_TOOL_POLICY
        elif tool_name in turn.tool_policies or tool.definition.policy is None:
            policy = turn.resolve_tool_policy(tool_name)
        else:
            policy = tool.definition.policy
        return DeferredToolCall(tool_call_id, tool_name, arguments, policy)

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        """Whether ``record`` calls one of these functions (and no other source's tool of that name)."""
        return record.tool_source_reference is None and record.tool_name in self._by_name

    async def call_tool(self, execution: DeferredToolExecution) -> ToolExecutionResult:
        """Run one call of a function: validate its arguments, then run it once.

        A function without a task handler runs with ``supports_tool_tasks`` false.

        Args:
            execution: The approved call.

        Returns:
            The function's output as the text the model sees.

        Raises:
            ToolExecutionError: For an unknown name, arguments that are not a JSON object or do not match
                the function's parameters, or as the function raises it.
        """
        record = execution.tool_call
        tool = self._by_name.get(record.tool_name)
        if tool is None:
            raise ToolExecutionError(f"unknown tool {record.tool_name!r}")
        arguments = parse_tool_arguments(record.arguments, tool_name=record.tool_name)
        if self.polls_tasks_of(tool.name):
            return ToolExecutionResult(await tool.call(arguments))
        with without_tool_tasks(execution):
            return ToolExecutionResult(await tool.call(arguments))
