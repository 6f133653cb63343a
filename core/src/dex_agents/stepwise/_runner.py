"""`StepwiseRunner`: the core's own agent loop, one LiteLLM call per `RunModel`.

The boundary it keeps: `run_model_step` makes exactly one model call and runs no tool. Every tool call the
model asks for is deferred to its own Step with the policy from the definition; a name the agent does not
have is deferred too, with `UNKNOWN_TOOL_POLICY`, and its tool Step records it failed with a message the
model reads at its next call, so no answer ever hides a second model call.

Each answer's messages are stored as soon as the answer is: with its tool calls (`ToolCallsRequested`), with
a continuation (`TurnContinued`), or when the turn ends. Between model calls the run state
(`StepwiseRunState`) holds only which calls' results come next and what the loop decided, so a turn that ends
without an answer needs only those results from `build_unfinished_turn_messages`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import cast

from dex_agents._run_state import RunStateFormatError
from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    TurnContinued,
    describe_tool_call_outcome,
)
from dex_agents.stepwise._definition import (
    END_TURN,
    MAX_CONSECUTIVE_CONTINUATIONS,
    AgentDefinition,
    InstructionContext,
    TurnContinuation,
    TurnContinuationContext,
    TurnContinuationDecision,
)
from dex_agents.stepwise._messages import (
    ChatMessage,
    replay_chat_messages,
    response_messages,
    tool_result_message,
    user_message,
)
from dex_agents.stepwise._model import ModelRequest, ModelResponse, ModelToolCall
from dex_agents.stepwise._run_state import StepwiseRunState
from dex_agents.stepwise._tools import ToolDefinition, ToolDefinitionError, ToolSource
from dex_agents.values import AgentUsage, FrameworkMessage

__all__ = ["StepwiseRunner"]


def _strict_json_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _parse_arguments(text: str) -> dict[str, object]:
    try:
        arguments = json.loads(text or "{}", parse_constant=_strict_json_constant)
    except ValueError as error:
        raise ToolExecutionError(f"arguments must be a JSON object: {error}") from error
    if not isinstance(arguments, dict):
        raise ToolExecutionError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    return cast(dict[str, object], arguments)


def _with_usable_tool_call_ids(response: ModelResponse, turn: AgentTurnContext) -> ModelResponse:
    """Give every call an ID the session accepts: non-empty, without '/', unique within the turn."""
    taken = set(turn.tool_calls)
    counter = len(taken)
    calls: list[ModelToolCall] = []
    for call in response.tool_calls:
        tool_call_id = call.tool_call_id.replace("/", "_")
        while not tool_call_id or tool_call_id in taken:
            counter += 1
            tool_call_id = f"call-{counter}"
        taken.add(tool_call_id)
        calls.append(ModelToolCall(tool_call_id, call.tool_name, call.arguments))
    if [call.tool_call_id for call in calls] == [call.tool_call_id for call in response.tool_calls]:
        return response
    message = {**response.message, "tool_calls": [call.to_chat() for call in calls]}
    return dataclasses.replace(response, message=message, tool_calls=tuple(calls))


class StepwiseRunner:
    """The `AgentFrameworkRunner` of a Stepwise `AgentDefinition`.

    Register it like any adapter's runner::

        flow = AgentSessionFlow(StepwiseRunner(definition), flow_type="OrderDesk")

    Args:
        definition: The agent.

    Raises:
        TypeError: If ``definition`` is not an `AgentDefinition`.
    """

    def __init__(self, definition: AgentDefinition) -> None:
        if not isinstance(definition, AgentDefinition):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"StepwiseRunner takes an AgentDefinition, got {type(definition).__name__}")
        self._definition = definition

    @property
    def definition(self) -> AgentDefinition:
        """The agent."""
        return self._definition

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user chat message holding ``text``.

        Args:
            text: The user's text, or a note the session writes.

        Returns:
            The message.
        """
        return user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make exactly one model call, or none when the turn ends with its tool results.

        Args:
            turn: The turn's committed state.

        Returns:
            `ToolCallsRequested` for an answer with tool calls, `TurnContinued` for an answer that
            ``decide_turn_continuation`` continues, else `TurnCompleted`. A run state this release did not
            write ends the turn with its error as ``turn_error``, before any model call.
        """
        try:
            state = StepwiseRunState.from_json(turn.framework_run_state)
        except RunStateFormatError as error:
            # Another release or runner wrote it, so a retry would fail the same way. The recorded results
            # stay in the session's turn-failure note.
            return TurnCompleted(new_messages=(), usage=AgentUsage(), turn_error=str(error))
        items = self._tool_results(turn, state.pending_tool_call_ids)
        if state.end_turn:
            return TurnCompleted(new_messages=items, usage=AgentUsage(), turn_error=state.turn_error)
        if state.continuation is not None:
            items.append(user_message(state.continuation))
        definition = self._definition
        client = definition.model_client_for(turn.session_settings)
        tools = [tool for tool, _ in (await self._offered_tools()).values()]
        request = ModelRequest(
            messages=await self._model_input(turn, items),
            tools=tools,
            settings=definition.model_settings,
            events=turn.events,
        )
        response = _with_usable_tool_call_ids(await client.complete(request), turn)
        items.extend(response_messages(response))
        decision, turn_error = await self._decide(turn, response, state.consecutive_continuations)
        continuation = decision if isinstance(decision, TurnContinuation) and turn_error is None else None
        consecutive = state.consecutive_continuations + 1 if continuation is not None else 0
        if response.tool_calls:
            next_state = StepwiseRunState(
                pending_tool_call_ids=tuple(call.tool_call_id for call in response.tool_calls),
                continuation=None if continuation is None else continuation.message,
                end_turn=decision == END_TURN or turn_error is not None,
                turn_error=turn_error,
                consecutive_continuations=consecutive,
            )
            return ToolCallsRequested(
                framework_run_state=next_state.to_json(),
                tool_calls=self._defer(turn, response.tool_calls, tools),
                usage=response.usage,
                new_messages=items,
            )
        if continuation is not None:
            return TurnContinued(
                framework_run_state=StepwiseRunState(consecutive_continuations=consecutive).to_json(),
                new_messages=[*items, user_message(continuation.message)],
                usage=response.usage,
            )
        return TurnCompleted(new_messages=items, usage=response.usage, turn_error=turn_error)

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the results of the last answer's tool calls when the turn ends without an answer.

        Everything else of the turn is stored already, so these close every stored call with its result.

        Args:
            turn: The turn's committed state; every tool call record is final.

        Returns:
            A result for each call of the last answer, in order.

        Raises:
            RunStateFormatError: If this release did not write the run state; the session then stores its
                note of the results instead.
        """
        state = StepwiseRunState.from_json(turn.framework_run_state)
        return self._tool_results(turn, state.pending_tool_call_ids)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one tool call once, through the tool source that offers it.

        Args:
            call: The approved call.

        Returns:
            The text the model sees.

        Raises:
            ToolExecutionError: For an unknown tool, arguments that are not a JSON object or do not match
                the tool's parameters, or as the tool raises it.
        """
        name = call.tool_call.tool_name
        arguments = _parse_arguments(call.tool_call.arguments)
        offered = await self._offered_tools()
        if name not in offered:
            names = ", ".join(sorted(offered)) or "none"
            raise ToolExecutionError(f"unknown tool {name!r}; the tools of this agent are: {names}")
        _, source = offered[name]
        return ToolExecutionResult(await source.call_tool(name, arguments))

    @staticmethod
    def _tool_results(turn: AgentTurnContext, tool_call_ids: Sequence[str]) -> list[FrameworkMessage]:
        results: list[FrameworkMessage] = []
        for tool_call_id in tool_call_ids:
            record = turn.recorded_tool_call(tool_call_id)
            results.append(tool_result_message(record, describe_tool_call_outcome(record)))
        return results

    async def _model_input(
        self, turn: AgentTurnContext, items: Sequence[FrameworkMessage]
    ) -> list[ChatMessage]:
        instructions = await self._definition.instructions_for(
            InstructionContext(
                session_settings=turn.session_settings, flow_id=turn.flow_id, turn_id=turn.turn_id
            )
        )
        messages: list[ChatMessage] = (
            [] if instructions is None else [{"role": "system", "content": instructions}]
        )
        messages.extend(replay_chat_messages([*turn.messages, *items]))
        return messages

    async def _offered_tools(self) -> dict[str, tuple[ToolDefinition, ToolSource]]:
        """Every tool of every source by name, in the sources' order."""
        offered: dict[str, tuple[ToolDefinition, ToolSource]] = {}
        for source in self._definition.tool_sources:
            for tool in await source.list_tools():
                if tool.name in offered:
                    raise ToolDefinitionError(
                        f"agent {self._definition.name!r} offers two tools named {tool.name!r}; tool names "
                        "must be unique across its tool sources"
                    )
                offered[tool.name] = (tool, source)
        return offered

    @staticmethod
    def _defer(
        turn: AgentTurnContext, calls: Sequence[ModelToolCall], tools: Sequence[ToolDefinition]
    ) -> list[DeferredToolCall]:
        offered: Mapping[str, ToolDefinition] = {tool.name: tool for tool in tools}
        deferred: list[DeferredToolCall] = []
        for call in calls:
            tool = offered.get(call.tool_name)
            policy: ToolPolicy
            if tool is None:
                # Nothing runs for a name the agent lacks; its Step only records the failure for the model.
                policy = UNKNOWN_TOOL_POLICY
            elif call.tool_name in turn.tool_policies or tool.policy is None:
                policy = turn.resolve_tool_policy(call.tool_name)
            else:
                policy = tool.policy
            deferred.append(
                DeferredToolCall(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    arguments=call.arguments or "{}",
                    policy=policy,
                )
            )
        return deferred

    async def _decide(
        self, turn: AgentTurnContext, response: ModelResponse, consecutive: int
    ) -> tuple[TurnContinuationDecision, str | None]:
        """Ask the continuation hook about an answer; return its decision and the turn's error, if any."""
        context = TurnContinuationContext(
            session_settings=turn.session_settings,
            flow_id=turn.flow_id,
            turn_id=turn.turn_id,
            answer=response.text,
            tool_calls=response.tool_calls,
            consecutive_continuations=consecutive,
        )
        try:
            decision = await self._definition.decide_continuation(context)
        except Exception as error:
            return None, f"decide_turn_continuation raised {type(error).__name__}: {error}"
        if isinstance(decision, TurnContinuation) and consecutive >= MAX_CONSECUTIVE_CONTINUATIONS:
            return decision, (
                f"decide_turn_continuation asked for more than {MAX_CONSECUTIVE_CONTINUATIONS} continuations "
                "in a row, so the turn ended"
            )
        return decision, None
