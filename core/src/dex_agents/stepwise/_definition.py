"""`AgentDefinition`: what a Stepwise agent is, in a few lines of code.

The definition is code, not state: every `RunModel` reads it afresh, so a changed prompt, tool or model
takes effect at the next model call of a running session. Everything is checked when the definition is
built, so a mistake fails at import time in the Worker rather than in a customer's turn.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from dex_agents._tools._tasks import ToolTaskHandlers
from dex_agents.compaction import DEFAULT_SUMMARY_INSTRUCTIONS
from dex_agents.stepwise._model import LiteLLMModelClient, ModelClient, ModelSettings, ModelToolCall
from dex_agents.stepwise._tools import FunctionTool, FunctionToolSource, ToolDefinitionError, ToolSource

__all__ = [
    "END_TURN",
    "MAX_CONSECUTIVE_CONTINUATIONS",
    "AgentDefinition",
    "InstructionContext",
    "Instructions",
    "ModelResolver",
    "PlanningToolChoice",
    "TurnContinuation",
    "TurnContinuationContext",
    "TurnContinuationDecider",
    "TurnContinuationDecision",
]

MAX_CONSECUTIVE_CONTINUATIONS: Final = 8
"""The most continuations in a row; the next one ends the turn with ``turn_error``."""

END_TURN: Final = "end"
"""What ``decide_turn_continuation`` returns to end the turn once the requested tool calls have results."""


@dataclass(frozen=True)
class InstructionContext:
    """What an instructions function knows when it writes the instructions of one model call.

    Attributes:
        session_settings: The settings the turn started with; empty when there are none.
        flow_id: The session ID.
        turn_id: The turn.
    """

    session_settings: Mapping[str, object]
    flow_id: str
    turn_id: str


@dataclass(frozen=True)
class TurnContinuation:
    """Go on with another model call that reads ``message`` as the user's.

    Attributes:
        message: The user text the next model call ends with, such as ``"Check your work once more."``.
    """

    message: str

    def __post_init__(self) -> None:
        if not isinstance(self.message, str) or not self.message.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("a TurnContinuation needs a non-blank message")


@dataclass(frozen=True)
class TurnContinuationContext:
    """One model answer, for ``decide_turn_continuation``.

    Attributes:
        session_settings: The settings the turn started with.
        flow_id: The session ID.
        turn_id: The turn.
        answer: The answer's text.
        tool_calls: The tool calls the answer asks for; empty for a final answer.
        consecutive_continuations: How many continuations in a row came before this answer.
    """

    session_settings: Mapping[str, object]
    flow_id: str
    turn_id: str
    answer: str
    tool_calls: tuple[ModelToolCall, ...]
    consecutive_continuations: int

    @property
    def asks_for_tools(self) -> bool:
        """Whether the answer asks for tool calls, so the decision applies once they have results."""
        return bool(self.tool_calls)


PlanningToolChoice = Literal["auto", "required"]
"""How the first model call of a planning turn may use ``write_todos``: as it likes, or it must call it."""

_PLANNING_TOOL_CHOICES: Final = ("auto", "required")

TurnContinuationDecision = TurnContinuation | Literal["end"] | None
"""`None` for the usual loop, a `TurnContinuation`, or `END_TURN`."""

Instructions = str | Callable[[InstructionContext], str | Awaitable[str]]
"""Fixed text, or a function (sync or async) that writes the instructions of each model call."""

ModelResolver = Callable[[Mapping[str, object]], ModelClient | str]
"""Maps the turn's session settings to the model of a call: a `ModelClient` or a LiteLLM model string."""

TurnContinuationDecider = Callable[
    [TurnContinuationContext], TurnContinuationDecision | Awaitable[TurnContinuationDecision]
]
"""Decides, after each model answer, whether the turn goes on (sync or async)."""


def _as_model_client(model: object, where: str) -> ModelClient:
    if isinstance(model, str):
        return LiteLLMModelClient(model)
    if isinstance(model, ModelClient):
        return model
    raise TypeError(f"{where} must be a LiteLLM model string or a ModelClient, got {type(model).__name__}")


@dataclass(frozen=True)
class AgentDefinition:
    """A Stepwise agent: its model, instructions, tools and loop hooks.

    Args:
        name: The agent's name, for errors and logs.
        model: A LiteLLM model string (``"openai/gpt-4.1-mini"``) or a `ModelClient`. Required unless
            ``resolve_model`` is given.
        instructions: The system message of every model call: text, or a function of
            `InstructionContext` (sync or async) that may read the session settings.
        tools: Plain functions (sync or async, type-hinted), `FunctionTool` objects from `function_tool`
            with their effects, and `ToolSource` objects.
        model_settings: Sampling and limits of every call.
        resolve_model: Chooses each call's model from the turn's session settings; when it is set,
            ``model`` is only its documentation default and is not used.
        summary_instructions: The instructions of the context summary call, when the session compacts
            (`AgentSessionOptions.compaction`); blank for none.
        decide_turn_continuation: Called after every model answer. `None` keeps the usual loop (tools
            run, then the model goes on; an answer without tools ends the turn). A `TurnContinuation`
            makes another model call that ends with its message as user text: after an answer, in a new
            `RunModel` of the same turn; after tool calls, right after their results.
            `END_TURN` after tool calls ends the turn once they have results, with no further model call.
            More than `MAX_CONSECUTIVE_CONTINUATIONS` continuations in a row end the turn as failed.
        planning_tool_choice: In plan mode, ``"auto"`` (the default) lets a planning turn answer in text,
            such as with a clarifying question, and end without a draft; ``"required"`` forces
            ``write_todos`` on the first model call of a planning turn while no draft exists. Only a model
            whose client's ``supports_forced_tool_choice(model_settings)`` is true can be forced: the
            definition refuses ``"required"`` for its ``model``, and a planning turn whose
            ``resolve_model`` returns such a model fails with ``turn_error``.
        task_handlers: Poll and cancel the tasks of function tools (by name) that have no
            ``function_tool(task_handler=...)`` of their own.

    Raises:
        ValueError: If the name is blank, neither ``model`` nor ``resolve_model`` is given, or
            ``planning_tool_choice`` is unknown or ``"required"`` for a model that cannot be forced.
        TypeError: If a field has the wrong kind of value.
        ToolDefinitionError: If a tool cannot be offered to a model, two functions share a name, or
            ``task_handlers`` names a tool that is not a function of this agent.
    """

    name: str
    model: str | ModelClient | None = None
    instructions: Instructions | None = None
    tools: Sequence[Callable[..., Any] | FunctionTool | ToolSource] = ()
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    resolve_model: ModelResolver | None = None
    decide_turn_continuation: TurnContinuationDecider | None = None
    summary_instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS
    planning_tool_choice: PlanningToolChoice = "auto"
    task_handlers: ToolTaskHandlers | None = None
    tool_sources: tuple[ToolSource, ...] = field(init=False, repr=False)
    _default_client: ModelClient | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("an AgentDefinition needs a non-blank name")
        where = f"agent {self.name!r}"
        if self.model is None and self.resolve_model is None:
            raise ValueError(
                f"{where} needs a model (a LiteLLM model string or a ModelClient) or resolve_model"
            )
        default_client = None if self.model is None else _as_model_client(self.model, f"{where}: model")
        for hook_name in ("resolve_model", "decide_turn_continuation"):
            hook = getattr(self, hook_name)
            if hook is not None and not callable(hook):
                raise TypeError(f"{where}: {hook_name} must be a function, got {type(hook).__name__}")
        if self.instructions is not None and not (
            isinstance(self.instructions, str) or callable(self.instructions)
        ):
            raise TypeError(
                f"{where}: instructions must be text or a function of InstructionContext, "
                f"got {type(self.instructions).__name__}"
            )
        if not isinstance(self.summary_instructions, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"{where}: summary_instructions must be text, got {type(self.summary_instructions).__name__}"
            )
        if not isinstance(self.model_settings, ModelSettings):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"{where}: model_settings must be ModelSettings, got {type(self.model_settings).__name__}"
            )
        if isinstance(self.tools, str | bytes) or not isinstance(self.tools, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"{where}: tools must be a list of functions, FunctionTools or ToolSources")
        functions: list[Callable[..., Any] | FunctionTool] = []
        sources: list[ToolSource] = []
        for tool in self.tools:
            if isinstance(tool, FunctionTool):
                functions.append(tool)
            elif isinstance(tool, ToolSource):
                sources.append(tool)
            elif callable(tool):
                functions.append(tool)
            else:
                raise ToolDefinitionError(
                    f"{where}: a tool must be a function, a FunctionTool or a ToolSource, "
                    f"got {type(tool).__name__}"
                )
        if functions or self.task_handlers is not None:
            sources.insert(0, FunctionToolSource(functions, task_handlers=self.task_handlers))
        self._check_planning_tool_choice(default_client)
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "tool_sources", tuple(sources))
        object.__setattr__(self, "_default_client", default_client)

    def _check_planning_tool_choice(self, default_client: ModelClient | None) -> None:
        if self.planning_tool_choice not in _PLANNING_TOOL_CHOICES:
            raise ValueError(
                f"agent {self.name!r}: planning_tool_choice must be 'auto' or 'required', got "
                f"{self.planning_tool_choice!r}"
            )
        if self.resolve_model is None and default_client is not None:
            problem = self.forced_planning_problem(default_client)
            if problem is not None:
                raise ValueError(problem)

    def forced_planning_problem(self, client: ModelClient) -> str | None:
        """Say why ``planning_tool_choice="required"`` cannot force ``client``, or return `None`.

        Args:
            client: The model client of a planning turn.

        Returns:
            The error, when the choice is ``"required"`` and the client cannot force a tool choice with
            the definition's ``model_settings``; else `None`.
        """
        if self.planning_tool_choice != "required" or client.supports_forced_tool_choice(self.model_settings):
            return None
        return (
            f"agent {self.name!r}: planning_tool_choice='required' must force write_todos, but model "
            f"{client.model_name!r} does not accept a forced tool choice with these model_settings "
            "(supports_forced_tool_choice is false); use planning_tool_choice='auto' or another model"
        )

    def model_client_for(self, session_settings: Mapping[str, object]) -> ModelClient:
        """Return the model client of a call in a turn with these session settings.

        Args:
            session_settings: The turn's settings.

        Returns:
            What ``resolve_model`` returns for them, else the definition's model.

        Raises:
            TypeError: If ``resolve_model`` returns neither a model string nor a `ModelClient`.
        """
        if self.resolve_model is None:
            assert self._default_client is not None
            return self._default_client
        return _as_model_client(
            self.resolve_model(session_settings), f"agent {self.name!r}: resolve_model's result"
        )

    async def instructions_for(self, context: InstructionContext) -> str | None:
        """Return the instructions of one model call.

        Args:
            context: The call's context.

        Returns:
            The text, or `None` when there are none.

        Raises:
            TypeError: If an instructions function returns something other than text.
        """
        if self.instructions is None or isinstance(self.instructions, str):
            return self.instructions or None
        written = self.instructions(context)
        if inspect.isawaitable(written):
            written = await cast(Awaitable[object], written)
        if not isinstance(written, str):
            raise TypeError(
                f"agent {self.name!r}: the instructions function returned {type(written).__name__}, not text"
            )
        return written or None

    async def decide_continuation(self, context: TurnContinuationContext) -> TurnContinuationDecision:
        """Ask ``decide_turn_continuation`` about one answer.

        Args:
            context: The answer.

        Returns:
            The decision; `None` without a hook.

        Raises:
            TypeError: If the hook returns something other than a decision.
        """
        if self.decide_turn_continuation is None:
            return None
        decision = self.decide_turn_continuation(context)
        if inspect.isawaitable(decision):
            decision = await cast(Awaitable[object], decision)
        if decision is None or decision == END_TURN or isinstance(decision, TurnContinuation):
            return cast(TurnContinuationDecision, decision)
        raise TypeError(
            f"agent {self.name!r}: decide_turn_continuation returned {decision!r}; return None, "
            f"TurnContinuation(message) or {END_TURN!r}"
        )
