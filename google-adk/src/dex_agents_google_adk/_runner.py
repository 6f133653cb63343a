"""`GoogleAdkRunner`: the session's runner contract for a Google ADK `App` or agent.

One `run_model_step` runs the user's application with an ADK `Runner` over a fresh in-memory session
service, restored from the stored messages (and, mid-turn, from the framework run state), and lets ADK
make exactly one model call:

- the response asks for tools: the adapter's gate plugin (`DexToolGate`) asks ADK for a confirmation of
  every call instead of running it, and ADK pauses the invocation. The invocation's events go into the
  framework run state, and every call becomes a `DeferredToolCall`;
- the response is the final answer: the invocation ends and the turn's messages are stored.

The next `run_model_step` of the turn resumes the paused invocation through ADK's own mechanism: a user
message of `adk_request_confirmation` responses, each carrying the call's recorded result (a rejection
with its message, a failure or unknown outcome with the session's text), which the gate hands to ADK as
the tool's answer before ADK makes the next model call itself.

A valid structured answer (ADK's `set_model_response`, see `_structured_answer`) ends the turn as ADK
ends it. When it came alone, the model Step completes the turn. When it came next to other tool calls,
those calls are deferred as usual, and the Step that resumes the turn completes it with their recorded
results and the structured answer, without running ADK again: ADK makes no model call after a structured
answer either.

A turn that ends without an answer (it failed, or steering or `cancel_turn` ended it) keeps its items:
`build_unfinished_turn_messages` projects the paused invocation's events with every call's recorded
result. `cancel_turn` cancels the `run_model_step` coroutine while it waits for ADK's next event; ADK's
`Runner.run_async` runs the agent in a task of its own and cancels that task when its consumer stops, so
the model's streaming call is cancelled at its current `await` and its response stream closed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence, Set
from enum import Enum
from typing import Any, cast

from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.values import (
    AgentMessage,
    AgentToolCall,
    AgentUsage,
    FrameworkMessage,
    MessageRole,
    ToolCallStatus,
)
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.run_config import (
    RunConfig,
    StreamingMode,  # pyright: ignore[reportPrivateImportUsage]
)
from google.adk.apps import App
from google.adk.code_executors.built_in_code_executor import BuiltInCodeExecutor
from google.adk.events import Event
from google.adk.sessions import InMemorySessionService
from google.adk.tools.set_model_response_tool import SetModelResponseTool
from google.genai import types

from dex_agents_google_adk._app import AdkServices, close_toolsets, iter_agents, resumable_app
from dex_agents_google_adk._effects import framework_effect
from dex_agents_google_adk._gate import CONFIRMATION_RESPONSE_KEY, DexToolGate
from dex_agents_google_adk._messages import (
    REQUEST_CONFIRMATION_FUNCTION_NAME,
    build_user_event,
    encode_event,
    events_from_stored_messages,
    project_turn_events,
    text_of,
    text_to_function_response,
    user_content_of,
)
from dex_agents_google_adk._state import GoogleAdkRunState
from dex_agents_google_adk._structured_answer import SET_MODEL_RESPONSE, find_structured_answer
from dex_agents_google_adk._tool_execution import TRANSFER_TO_AGENT, run_tool_call

__all__ = ["DEFAULT_USER_ID", "UNKNOWN_TOOL_POLICY", "GoogleAdkRunner"]

DEFAULT_USER_ID = "dex"
"""The ADK user ID of every session unless the runner is given another."""


class GoogleAdkRunner:
    """Runs a Google ADK application inside a durable Dex agent session, one Step per model and tool call.

    Give it the `App` or root agent you already have, with its ordinary tools, toolsets and plugins; the
    session turns every tool call into its own Step. Keep the runner stateless: a Worker builds it once
    and the session calls it from any Step, in any process.

    Args:
        app_or_agent: The application, or its root agent (then the application is named after it). No
            agent of its tree may have a `code_executor` that runs code outside the model provider.
        user_id: The ADK user ID of every session (`Context.user_id` in tools and callbacks).
        run_config: ADK's run configuration for model Steps; by default SSE streaming, so text deltas
            reach the session's event stream while the model writes.
        services: ADK services (`artifact_service`, `memory_service`, `credential_service`) for every
            Step. The session service is always a fresh in-memory one per Step, restored from the
            session's stored messages; give persistent services here when tools need artifacts, memory or
            credentials across Steps and Worker processes.

    Raises:
        TypeError: An agent's `code_executor` runs model-written code itself (anything but
            `BuiltInCodeExecutor`).
    """

    def __init__(
        self,
        app_or_agent: App | BaseAgent,
        *,
        user_id: str = DEFAULT_USER_ID,
        run_config: RunConfig | None = None,
        services: AdkServices | None = None,
    ) -> None:
        if isinstance(app_or_agent, App):
            self._app = app_or_agent
        else:
            self._app = App(name=app_or_agent.name, root_agent=app_or_agent)
        _refuse_local_code_executors(cast(BaseAgent, self._app.root_agent))
        self._user_id = user_id
        self._run_config = run_config or RunConfig(streaming_mode=StreamingMode.SSE)
        self._services = services or AdkServices()

    @property
    def app(self) -> App:
        """The application this runner drives."""
        return self._app

    async def close(self) -> None:
        """Close the application's toolsets, such as the MCP sessions its tools opened.

        Steps share the application's toolsets, as the calls of one ADK `Runner` do, and leave them open
        between Steps: call this when the Worker shuts down.
        """
        await close_toolsets(cast(BaseAgent, self._app.root_agent))

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message holding ``text`` as the ADK user event a `Runner` would append."""
        return FrameworkMessage(
            role=MessageRole.USER, framework_item=encode_event(build_user_event(text)), text=text
        )

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the application make one model call and return what the session does next.

        Args:
            turn: The committed state of the turn.

        Returns:
            `ToolCallsRequested` when the model asked for tools, else `TurnCompleted` with every message
            of the turn, or with `turn_error` for a failure that a retry would only repeat.
        """
        turn_message = _turn_user_message(turn)
        if turn_message is None:
            return TurnCompleted(new_messages=(), turn_error="the turn has no user message to answer")
        state: GoogleAdkRunState | None = None
        if turn.framework_run_state is not None:
            try:
                state = GoogleAdkRunState.from_json(turn.framework_run_state)
            except ValueError as error:
                return TurnCompleted(new_messages=(), turn_error=str(error))
            if find_structured_answer(state.turn_events) is not None:
                return _finish_with_structured_answer(state, turn)
        earlier = [message for message in turn.messages if message is not turn_message]

        gate = DexToolGate(turn.events, frozenset(turn.tool_calls))
        app = resumable_app(self._app, [gate])
        service = InMemorySessionService()
        runner = self._services.runner(app, service)
        session = await service.create_session(
            app_name=app.name, user_id=self._user_id, session_id=turn.flow_id
        )
        for event in events_from_stored_messages(earlier):
            await service.append_event(session, event)
        turn_start = len(session.events)
        if state is None:
            new_message: types.Content | None = user_content_of(turn_message)
            invocation_id: str | None = None
        else:
            answered_in_model_step = set(state.unknown_tool_call_ids) | {
                response.id
                for event in state.turn_events
                for response in event.get_function_responses()
                if response.name == SET_MODEL_RESPONSE and response.id
            }
            for event in _with_recorded_results(state.turn_events, turn, answered_in_model_step):
                await service.append_event(session, event)
            new_message = _recorded_confirmations(state, turn)
            invocation_id = state.invocation_id
        invocation_events: list[Event] = []
        model_error: Event | None = None
        try:
            async for event in runner.run_async(
                user_id=self._user_id,
                session_id=turn.flow_id,
                invocation_id=invocation_id,
                new_message=new_message,
                run_config=self._run_config,
            ):
                if event.error_code is not None and not event.partial:
                    # Stop at once: an agent that goes on after the failed call would make a second
                    # model call, whose refusal would hide this error.
                    model_error = event
                    break
                if not event.partial:
                    invocation_events.append(event)
        except Exception as error:
            if gate.model_requests > 1 or gate.refused_confirmation is not None:
                return TurnCompleted(new_messages=(), turn_error=str(error))
            raise
        if gate.refused_confirmation is not None:
            # ADK reports the gate's refusal as an error event; a retry would meet the same confirmation.
            return TurnCompleted(new_messages=(), turn_error=str(gate.refused_confirmation))
        if model_error is not None:
            # A failed model call was still a model call, unless a callback answered with the error.
            usage = AgentUsage() if gate.final_response is None else _model_call_usage(model_error)
            turn_error = _terminal_model_error(model_error)
            if turn_error is None:
                # Transient or unknown: fail the Step, and `RunModel` retries the call.
                code = _code_text(model_error.error_code)
                message = model_error.error_message or ""
                raise RuntimeError(f"the model call failed: {code}{': ' + message if message else ''}")
            return TurnCompleted(new_messages=(), usage=usage, turn_error=turn_error)

        stored = await service.get_session(app_name=app.name, user_id=self._user_id, session_id=turn.flow_id)
        if stored is None:
            raise RuntimeError(f"Google ADK lost session {turn.flow_id!r} during the model call")
        turn_events = list(stored.events[turn_start:])
        structured_answer = find_structured_answer(invocation_events)
        last_response = next(
            (
                event
                for event in reversed(invocation_events)
                if _is_model_response(event) and event is not structured_answer
            ),
            None,
        )
        if last_response is None:
            raise RuntimeError("Google ADK finished the model Step without a model response")
        gate.take_response(last_response)
        # A response an agent callback gave instead of the model is not a model call.
        usage = AgentUsage() if gate.answered_by_callback else _model_call_usage(last_response)
        if not gate.streamed_text:
            # A model that does not stream (or a non-streaming run_config) still shows its text live.
            turn.events.write_text_delta(text_of(last_response.content))
        deferred = self._deferred_calls(turn, gate)
        if deferred:
            return self._tool_calls_requested(gate, deferred, turn_events, state, usage)
        if structured_answer is not None:
            turn.events.write_text_delta(text_of(structured_answer.content))
        # The first event of the invocation is the turn's user message, which the session stored already.
        return TurnCompleted(new_messages=project_turn_events(turn_events[1:]), usage=usage)

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the items of a turn that ends without an answer, each tool call with its recorded result.

        The session calls it when a turn fails, is steered or is cancelled. The paused invocation's events
        in the run state are the turn's items; each call's answer is replaced by its final record, as the
        next model call would have seen it, and the events are projected as a completed turn's are. No
        model is called and no tool runs.

        Args:
            turn: The turn's committed state, every record final.

        Returns:
            The turn's messages after its user message; none before the turn's first tool calls.

        Raises:
            dex_agents.RunStateFormatError: If another runner wrote the run state; the session then
                stores its note instead.
        """
        if turn.framework_run_state is None:
            return ()
        state = GoogleAdkRunState.from_json(turn.framework_run_state)
        events = _with_recorded_results(state.turn_events, turn, set(turn.tool_calls))
        # The first event of the invocation is the turn's user message, which the session stored already.
        return project_turn_events(events[1:])

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run the application's real tool for one approved call, once.

        The tool runs through ADK's own pipeline (plugin and agent tool callbacks, error callbacks,
        `ToolContext`), and `dex_agents.current_tool_execution()` gives it the call and its idempotency
        key.

        Args:
            call: The approved call.

        Returns:
            The tool's result as text.

        Raises:
            ToolExecutionError: For a failure the model should see, such as a tool name the agent does not
                have.
        """
        record = call.tool_call
        output = await run_tool_call(
            self._app,
            self._services,
            user_id=self._user_id,
            session_id=call.flow_id,
            agent_name=_agent_name(record.tool_source_reference),
            tool_name=record.tool_name,
            tool_call_id=record.tool_call_id,
            arguments=record.arguments,
        )
        return ToolExecutionResult(output)

    def _deferred_calls(self, turn: AgentTurnContext, gate: DexToolGate) -> list[DeferredToolCall]:
        """Return a `DeferredToolCall` for every call of the response that needs a tool Step."""
        deferred: list[DeferredToolCall] = []
        for call in gate.tool_calls:
            if call.tool is None:
                policy = UNKNOWN_TOOL_POLICY
            elif isinstance(call.tool, SetModelResponseTool):
                if call.tool_call_id not in gate.invalid_structured_answers:
                    continue  # A valid structured answer: ADK has made it the turn's final answer.
                # Its tool Step only checks the answer again and records the error the model reads.
                policy = UNKNOWN_TOOL_POLICY
            elif call.tool_name == TRANSFER_TO_AGENT:
                # Its tool Step only records that transfers are not supported; nothing runs.
                policy = UNKNOWN_TOOL_POLICY
            else:
                policy = turn.resolve_tool_policy(call.tool_name, framework_effect(call.tool))
                if (
                    call.tool_call_id in gate.confirmation_required
                    and call.tool_name not in turn.tool_policies
                ):
                    # ADK's own `require_confirmation` becomes the session's approval, which survives
                    # restarts; an explicit policy still decides.
                    policy = dataclasses.replace(policy, requires_approval=True)
            deferred.append(
                DeferredToolCall(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    arguments=json.dumps(dict(call.arguments), ensure_ascii=False, sort_keys=True),
                    policy=policy,
                    tool_source_reference=json.dumps({"agent": call.agent_name}),
                )
            )
        return deferred

    def _tool_calls_requested(
        self,
        gate: DexToolGate,
        deferred: Sequence[DeferredToolCall],
        turn_events: Sequence[Event],
        earlier_state: GoogleAdkRunState | None,
        usage: AgentUsage,
    ) -> ToolCallsRequested:
        unknown = [
            *(earlier_state.unknown_tool_call_ids if earlier_state else ()),
            *(call.tool_call_id for call in gate.tool_calls if call.tool is None),
        ]
        state = GoogleAdkRunState(
            invocation_id=turn_events[0].invocation_id,
            turn_events=turn_events,
            unknown_tool_call_ids=tuple(unknown),
        )
        return ToolCallsRequested(framework_run_state=state.to_json(), tool_calls=deferred, usage=usage)


def _refuse_local_code_executors(root: BaseAgent) -> None:
    """Refuse every agent whose code executor would run model-written code inside the model Step.

    ADK runs such code in its response processor, between the model call and the next one, without any
    tool callback: the gate never sees it, so it would run unrecorded and again on every retry of the
    Step. `BuiltInCodeExecutor` only asks the provider to run the code inside the model call itself.
    """
    for agent in iter_agents(root):
        executor = agent.code_executor if isinstance(agent, LlmAgent) else None
        if executor is not None and not isinstance(executor, BuiltInCodeExecutor):
            raise TypeError(
                f"agent {agent.name!r} has code_executor={type(executor).__name__}, which runs "
                "model-written code inside the model call's Step, outside any tool Step; a durable Dex "
                "session cannot defer it. Remove the code_executor, use BuiltInCodeExecutor (the model "
                "provider runs the code), or offer code execution as a tool"
            )


def _turn_user_message(turn: AgentTurnContext) -> AgentMessage | None:
    for message in reversed(turn.messages):
        if message.role == MessageRole.USER and message.turn_id == turn.turn_id:
            return message
    return None


def _recorded_response(record: AgentToolCall) -> dict[str, Any]:
    """Return the function response the model sees for a final record."""
    if record.status is ToolCallStatus.SUCCEEDED:
        return text_to_function_response(record.output or "")
    # ADK's convention for a call that did not produce a result; the text is the session's own.
    return {"error": describe_tool_call_outcome(record)}


def _with_recorded_results(
    turn_events: Sequence[Event], turn: AgentTurnContext, call_ids: Set[str]
) -> list[Event]:
    """Return the paused invocation's events with the answer of each recorded call in ``call_ids`` replaced.

    ADK answered these calls itself in the model Step (a tool name the agent does not have, a structured
    answer that failed its check) or with the gate's placeholder; the session's record is what the model
    must see.
    """
    events: list[Event] = []
    for event in turn_events:
        content = event.content
        if (
            not call_ids
            or content is None
            or not any(
                part.function_response is not None and part.function_response.id in call_ids
                for part in content.parts or ()
            )
        ):
            events.append(event)
            continue
        parts: list[types.Part] = []
        for part in content.parts or ():
            response = part.function_response
            if (
                response is not None
                and response.id is not None
                and response.id in call_ids
                and response.id in turn.tool_calls
            ):
                recorded = types.FunctionResponse(
                    id=response.id,
                    name=response.name,
                    response=_recorded_response(turn.tool_calls[response.id]),
                )
                parts.append(types.Part(function_response=recorded))
            else:
                parts.append(part)
        events.append(event.model_copy(update={"content": types.Content(role=content.role, parts=parts)}))
    return events


def _finish_with_structured_answer(state: GoogleAdkRunState, turn: AgentTurnContext) -> TurnCompleted:
    """Complete a turn whose paused invocation already holds a valid structured answer.

    ADK ends an invocation after a structured answer, so resuming it would only hand over the recorded
    results; they replace the placeholders here, and no model call is made.
    """
    events = _with_recorded_results(state.turn_events, turn, set(turn.tool_calls))
    answer = find_structured_answer(events)
    turn.events.write_text_delta(text_of(answer.content if answer is not None else None))
    # The first event of the invocation is the turn's user message, which the session stored already.
    return TurnCompleted(new_messages=project_turn_events(events[1:]), usage=AgentUsage())


def _recorded_confirmations(state: GoogleAdkRunState, turn: AgentTurnContext) -> types.Content | None:
    """Return the confirmation responses that carry every recorded result back into ADK."""
    answered = {
        response.id
        for event in state.turn_events
        for response in event.get_function_responses()
        if response.id
    }
    parts: list[types.Part] = []
    for event in state.turn_events:
        for call in event.get_function_calls():
            if call.name != REQUEST_CONFIRMATION_FUNCTION_NAME or not call.id or call.id in answered:
                continue
            original = cast(Mapping[str, Any], (call.args or {}).get("originalFunctionCall") or {})
            record = turn.recorded_tool_call(str(original.get("id")))
            confirmation = {
                "confirmed": True,
                "payload": {CONFIRMATION_RESPONSE_KEY: _recorded_response(record)},
            }
            parts.append(
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call.id, name=REQUEST_CONFIRMATION_FUNCTION_NAME, response=confirmation
                    )
                )
            )
    # A turn whose calls all named unknown tools has nothing to confirm; resuming the invocation by its
    # ID alone makes ADK continue with the next model call.
    return types.Content(role="user", parts=parts) if parts else None


def _is_model_response(event: Event) -> bool:
    content = event.content
    if event.partial or content is None or content.role != "model" or not content.parts:
        return False
    return not all(
        part.function_call is not None and part.function_call.name == REQUEST_CONFIRMATION_FUNCTION_NAME
        for part in content.parts
    )


# Why the provider blocked the prompt (`prompt_feedback.block_reason`, which ADK puts in `error_code` with
# no `finish_reason`): the same prompt is blocked again on every attempt. Only
# BLOCKED_REASON_UNSPECIFIED, which names no reason, is left to the retry.
_TERMINAL_BLOCK_REASONS = frozenset(
    reason.value
    for reason in (
        types.BlockedReason.SAFETY,
        types.BlockedReason.OTHER,
        types.BlockedReason.BLOCKLIST,
        types.BlockedReason.PROHIBITED_CONTENT,
        types.BlockedReason.IMAGE_SAFETY,
        types.BlockedReason.MODEL_ARMOR,
        types.BlockedReason.JAILBREAK,
    )
)
# Finish reasons ADK reports as `error_code` (a response without content, or any non-STOP finish when
# streaming) that judge the request itself, so a retry pays for the same answer again: content filters,
# recitation, an unsupported language, and the output limit of the request's own configuration.
# Left to the retry are the reasons a new sample can cure or that say nothing: MALFORMED_FUNCTION_CALL,
# UNEXPECTED_TOOL_CALL and TOO_MANY_TOOL_CALLS (the model wrote a bad call this time), OTHER,
# FINISH_REASON_UNSPECIFIED, NO_IMAGE, IMAGE_OTHER, CONTINUATION, and every code that is not a finish
# reason (ADK's MODEL_RETURNED_NO_CONTENT, other providers' own codes).
_TERMINAL_FINISH_REASONS = frozenset(
    reason.value
    for reason in (
        types.FinishReason.SAFETY,
        types.FinishReason.RECITATION,
        types.FinishReason.LANGUAGE,
        types.FinishReason.BLOCKLIST,
        types.FinishReason.PROHIBITED_CONTENT,
        types.FinishReason.SPII,
        types.FinishReason.IMAGE_SAFETY,
        types.FinishReason.IMAGE_PROHIBITED_CONTENT,
        types.FinishReason.IMAGE_RECITATION,
        types.FinishReason.MAX_TOKENS,
    )
)


def _code_text(code: object) -> str:
    return code.value if isinstance(code, Enum) else str(code)


def _terminal_model_error(event: Event) -> str | None:
    """Return the turn error for a failed model call that a retry would repeat, else `None`."""
    code = _code_text(event.error_code)
    message = event.error_message or ""
    if event.finish_reason is None and code in _TERMINAL_BLOCK_REASONS:
        return f"the model provider blocked the prompt ({code}){': ' + message if message else ''}"
    if event.finish_reason is not None and code in _TERMINAL_FINISH_REASONS:
        if not message and code == types.FinishReason.MAX_TOKENS.value:
            message = "the answer reached the output token limit (max_output_tokens)"
        return f"the model call ended without a usable answer ({code}){': ' + message if message else ''}"
    return None


def _model_call_usage(response: Event) -> AgentUsage:
    metadata = response.usage_metadata
    if metadata is None:
        return AgentUsage(model_calls=1)
    return AgentUsage(
        model_calls=1,
        input_tokens=metadata.prompt_token_count or 0,
        output_tokens=(metadata.candidates_token_count or 0) + (metadata.thoughts_token_count or 0),
        cached_input_tokens=metadata.cached_content_token_count or 0,
        reasoning_tokens=metadata.thoughts_token_count or 0,
    )


def _agent_name(tool_source_reference: str | None) -> str | None:
    if not tool_source_reference:
        return None
    try:
        reference = json.loads(tool_source_reference)
    except json.JSONDecodeError:
        return None
    if isinstance(reference, dict):
        agent = cast(dict[str, Any], reference).get("agent")
        return agent if isinstance(agent, str) else None
    return None
