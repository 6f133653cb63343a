"""The plugin that stops ADK after one model call and answers every tool call from the session.

`DexToolGate` is added in front of the application's own plugins for one `run_model_step`. Plugin
callbacks run before an agent's own callbacks and cover every tool ADK calls for any agent in the
application (function tools, including ADK's own such as `load_memory`, MCP toolsets, agent tools), so no
such tool runs inside a model Step. Two kinds of tool never reach a tool callback: a provider's built-in
tools (`google_search`, `url_context`, `BuiltInCodeExecutor`, Vertex AI Search), which the provider runs
inside the model call itself (a documented limit), and an agent's local `code_executor`, which
`GoogleAdkRunner` refuses when it is built.

- On the first pass, every call to a tool the agent has asks ADK for a confirmation and answers with a
  placeholder; ADK then pauses the invocation after the model call. A call to a tool name the agent does
  not have cannot be confirmed, so it gets a "not found" answer marked `skip_summarization`, which
  also keeps ADK from calling the model again.
- When the turn resumes, the confirmation carries the session's recorded result, and the gate answers the
  call with it: a result, or the failure, rejection or unknown outcome as an ``{"error": ...}`` response.
  The session's rejection message therefore reaches the model unchanged, unlike ADK's built-in
  `require_confirmation`, which replaces it with a fixed text.
- A confirmation without the session's recorded result (ADK's own confirmation reply, sent by a client
  that answers `adk_request_confirmation` itself) raises `UnrecordedConfirmationError`: ADK would run
  the confirmed tool right here, inside the model Step, with no record, no policy and no retry rule.
- ADK's `set_model_response`, the tool ADK adds when an agent has both an `output_schema` and tools, only
  checks the model's structured answer against the schema. The gate runs that check itself, in the model
  Step, so a valid answer ends the turn as ADK ends it, with no tool Step and no approval. An answer that
  fails the check is marked `skip_summarization`, so the model reads the validation error at its next
  call, in the next model Step.
- ADK's `transfer_to_agent`, called alone with an agent it may transfer to, is carried out in the model
  Step: it only sets the event's transfer action, which has no effect outside the invocation. ADK would
  then run the target agent, whose model call is the next Step's: the runner stops at the transfer
  (`transfer_target`). A transfer next to other calls, or to an agent it may not reach, is deferred and
  fails in its tool Step with a text the model reads.
- No other plugin's or agent's tool callback runs in a model Step: they run once, around the real call,
  in its tool Step.
- Every model response gets tool call IDs that are non-empty, free of `/`, and unique within the turn, and
  a call whose arguments nest deeper than `MAX_JSON_NESTING_DEPTH` gets `{NESTING_ERROR_KEY: <why>}`
  instead, which its tool Step records as the call's failure.
- A second model request in one `run_model_step` never reaches the model, so a model call is never hidden
  inside another call's Step. In a tree of `LlmAgent`s and `SequentialAgent`s, which ADK resumes from
  their recorded agent states, the gate raises `NextModelCallBoundary` and the runner continues the turn
  with that call in the next Step; in any other tree (a custom agent that runs several `LlmAgent`s) it
  raises `SecondModelCallError`, which ends the turn.
- The request gets the instructions the turn's session settings chose after the agent's own, and the
  gate keeps the model the request named, for the call's tracing metadata.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from dex_agents.events import AgentEventWriter
from dex_agents.limits import MAX_JSON_NESTING_DEPTH, nests_deeper_than
from google.adk.agents.callback_context import CallbackContext
from google.adk.events import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.set_model_response_tool import SetModelResponseTool
from google.adk.tools.tool_context import ToolContext
from google.adk.tools.transfer_to_agent_tool import TransferToAgentTool
from google.genai import types

from dex_agents_google_adk._call_metadata import ModelCallTiming
from dex_agents_google_adk._messages import REQUEST_CONFIRMATION_FUNCTION_NAME

__all__ = [
    "CONFIRMATION_HINT",
    "CONFIRMATION_RESPONSE_KEY",
    "DEFERRED_PLACEHOLDER",
    "NESTING_ERROR_KEY",
    "TOO_DEEP",
    "DexToolGate",
    "ModelToolCall",
    "NextModelCallBoundary",
    "SecondModelCallError",
    "UnrecordedConfirmationError",
]

CONFIRMATION_HINT = "Dex runs this tool call in its own Step and answers with the recorded result."
"""The hint of every confirmation the gate asks for."""
CONFIRMATION_RESPONSE_KEY = "dex_tool_response"
"""The key of the confirmation payload that holds the function response the model sees."""
DEFERRED_PLACEHOLDER: Mapping[str, str] = {"status": "deferred: Dex runs this tool call in its own Step"}
"""The placeholder that answers a call until its recorded result arrives; the model never sees it."""


NESTING_ERROR_KEY = "dex_nesting_error"
"""The only argument of a call whose arguments nested too deeply; its tool Step fails with the text."""
TOO_DEEP = f"arrays and objects nest more than {MAX_JSON_NESTING_DEPTH} levels deep"


class SecondModelCallError(RuntimeError):
    """ADK was about to make a second model request within one `run_model_step`."""


class NextModelCallBoundary(BaseException):
    """ADK is about to make the next model call of a resumable agent tree; it belongs to the next Step.

    A `BaseException`, as ADK's own `NodeInterruptedError` is, so ADK's plugin manager and error handlers
    (which catch `Exception`, log it as an error and wrap it) let it through to the runner unchanged.
    """


class UnrecordedConfirmationError(RuntimeError):
    """ADK was about to run a tool inside a model Step, on a confirmation the session did not write.

    Args:
        tool_name: The tool ADK was about to run.
        tool_call_id: The call's ID.
    """

    def __init__(self, tool_name: str, tool_call_id: str | None) -> None:
        super().__init__(
            f"Google ADK resumed tool call {tool_call_id!r} of {tool_name!r} with a confirmation that "
            "carries no result recorded by the Dex session, and would have run the tool inside the model "
            "Step; the adapter refused to run it. In a durable session every tool call runs in its own "
            "Step: approve calls with AgentSessionClient.resolve_interrupt, not with an "
            "adk_request_confirmation reply"
        )


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call of the model response, as the gate saw it.

    Attributes:
        tool_call_id: The call's ID after the gate made it valid.
        tool_name: The tool's name.
        arguments: The call's arguments.
        tool: The tool ADK offered under that name, or `None` when the agent has no such tool.
        agent_name: The agent whose model made the call.
    """

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    tool: BaseTool | None
    agent_name: str


class DexToolGate(BasePlugin):
    """The per-model-call plugin described in the module docstring.

    Args:
        events: The turn's event writer, for text deltas.
        used_tool_call_ids: IDs the turn has used already, which new calls must not repeat.
        instructions: Instructions the request gets after the agent's own (chosen by the turn's session
            settings), or `None`.
    """

    def __init__(
        self,
        events: AgentEventWriter,
        used_tool_call_ids: frozenset[str],
        instructions: str | None = None,
        *,
        is_streaming: bool = False,
        resumes_next_model_call: bool = False,
        only_tools: frozenset[str] | None = None,
        plan_note: str | None = None,
        turn_text: str | None = None,
    ) -> None:
        super().__init__(name="dex_tool_gate")
        self._only_tools = only_tools
        self._plan_note = plan_note
        self._turn_text = turn_text
        self._resumes_next_model_call = resumes_next_model_call
        self._is_streaming = is_streaming
        self._requested_at: float | None = None
        self._first_response_at: float | None = None
        self._events = events
        self._used_ids = set(used_tool_call_ids)
        self._instructions = instructions
        self._offered_tools: dict[str, BaseTool] = {}
        self.model_requests = 0
        """Model requests ADK made (or was refused) in this model Step."""
        self.request: LlmRequest | None = None
        """The model request; the model receives this object, so it holds every callback's changes."""
        self.tool_calls: list[ModelToolCall] = []
        """The tool calls of the model response, in model order (see `take_response`)."""
        self.confirmation_required: set[str] = set()
        """IDs of calls whose tool asks ADK for a confirmation itself (`require_confirmation`)."""
        self.invalid_structured_answers: set[str] = set()
        """IDs of `set_model_response` calls whose answer failed the output schema check."""
        self.refused_confirmation: UnrecordedConfirmationError | None = None
        """The confirmation the gate refused, if any; ADK reports the raised error as an error event."""
        self.final_response: LlmResponse | None = None
        """The model's complete (non-partial) response."""
        self.answered_by_callback = False
        """Whether an agent's `before_model_callback` answered instead of the model."""
        self.streamed_text = False
        """Whether text deltas were written while the model streamed."""
        self.model_exception: Exception | None = None
        """What the model call raised, which ADK turns into an error event with only its type's name."""
        self.stopped_before_next_model_call = False
        """Whether the gate stopped ADK before the next model call of a resumable tree (see the module)."""
        self.transfer_target: str | None = None
        """The agent the model's `transfer_to_agent` call handed the conversation to in this Step."""
        self._calls_in_response = 0

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Count the request, refuse a second one, add the turn's instructions, and note the tools."""
        del callback_context
        self.model_requests += 1
        if self.model_requests > 1 and self._resumes_next_model_call:
            self.stopped_before_next_model_call = True
            raise NextModelCallBoundary("the next model call belongs to the next Step")
        if self.model_requests > 1:
            raise SecondModelCallError(
                "Google ADK asked for a second model call within one Dex model Step; the adapter stops "
                "the turn rather than hide a model call inside another call's Step"
            )
        if self._instructions:
            llm_request.append_instructions([self._instructions])
        if self._only_tools is not None:
            _offer_only(llm_request, self._only_tools)
        if self._plan_note is not None:
            _insert_plan_note(llm_request, self._plan_note, self._turn_text)
        self.request = llm_request
        self._requested_at = time.monotonic()
        self._offered_tools = dict(llm_request.tools_dict)
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """Forward streamed text, and give every tool call of the complete response a valid, unique ID."""
        if self._first_response_at is None:
            self._first_response_at = time.monotonic()
        if llm_response.partial:
            text = "".join(
                part.text
                for part in (llm_response.content.parts or () if llm_response.content else ())
                if part.text and not part.thought
            )
            if text:
                self.streamed_text = True
                self._events.write_text_delta(text)
            for part in llm_response.content.parts or () if llm_response.content else ():
                if part.text and part.thought:
                    self._events.write_reasoning_delta(part.text)
            return None
        self.final_response = llm_response
        for part in llm_response.content.parts or () if llm_response.content else ():
            call = part.function_call
            if call is None:
                continue
            self._calls_in_response += 1
            if call.args and nests_deeper_than(call.args, MAX_JSON_NESTING_DEPTH):
                # ADK copies events deeply and recursively (its session service, the request it builds):
                # such arguments would fail every later Step. The call's tool Step records the error.
                call.args = {NESTING_ERROR_KEY: f"the arguments of {call.name!r} nest too deeply: {TOO_DEEP}"}
            if not call.id or "/" in call.id or call.id in self._used_ids:
                # The `adk-` prefix makes ADK strip the ID from model requests, as it does for IDs it mints.
                call.id = f"adk-{uuid.uuid4()}"
            self._used_ids.add(call.id)
        return None

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> LlmResponse | None:
        """Keep the model call's exception, whose HTTP answer decides: a retry, a refusal or compaction."""
        del callback_context, llm_request
        self.model_exception = error
        return None

    @property
    def timing(self) -> ModelCallTiming:
        """Whether the model call streamed, and how long its first response took."""
        first: float | None = None
        if self._requested_at is not None and self._first_response_at is not None:
            first = max(0.0, self._first_response_at - self._requested_at)
        return ModelCallTiming(is_streaming=self._is_streaming, time_to_first_chunk_seconds=first)

    def take_response(self, event: Event) -> None:
        """Read the tool calls of the model response from the event ADK stored for it.

        The stored event is what the model Step answered with after every callback, including an agent's
        `after_model_callback` that changed the response, or its `before_model_callback` that answered
        instead of the model (then no after-model callback ran, and the calls keep ADK's IDs).

        Args:
            event: The stored response event.
        """
        self.answered_by_callback = self.final_response is None
        self.tool_calls = [
            ModelToolCall(
                tool_call_id=call.id or "",
                tool_name=call.name or "",
                arguments=dict(call.args or {}),
                tool=self._offered_tools.get(call.name or ""),
                agent_name=event.author,
            )
            for call in event.get_function_calls()
            if call.name != REQUEST_CONFIRMATION_FUNCTION_NAME
        ]

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Answer the call: with its recorded result when the turn resumes, else with a placeholder."""
        confirmation = tool_context.tool_confirmation
        if confirmation is not None:
            payload = confirmation.payload
            if isinstance(payload, dict) and CONFIRMATION_RESPONSE_KEY in payload:
                return dict(cast(Mapping[str, Any], cast(dict[str, Any], payload)[CONFIRMATION_RESPONSE_KEY]))
            # Answering None would let ADK run the tool here; the gate fails closed instead.
            self.refused_confirmation = UnrecordedConfirmationError(tool.name, tool_context.function_call_id)
            raise self.refused_confirmation
        if isinstance(tool, SetModelResponseTool):
            return await self._check_structured_answer(tool, tool_args, tool_context)
        if isinstance(tool, TransferToAgentTool) and self.can_transfer(tool, tool_args):
            # Only sets the transfer action; ADK wraps the function's None result as {"result": None}.
            await tool.run_async(args=tool_args, tool_context=tool_context)
            self.transfer_target = str(tool_args["agent_name"])
            return {"result": None}
        if tool.name not in self._offered_tools:
            # ADK cannot confirm a tool it does not have; this answer is replaced by the recorded
            # failure when the turn resumes, and skip_summarization keeps ADK from calling the model now.
            tool_context.actions.skip_summarization = True
            return {"error": f"Tool '{tool.name}' not found."}
        if tool_context.function_call_id and await tool.check_require_confirmation(tool_args, tool_context):
            self.confirmation_required.add(tool_context.function_call_id)
        tool_context.request_confirmation(hint=CONFIRMATION_HINT, payload=None)
        return dict(DEFERRED_PLACEHOLDER)

    def can_transfer(self, tool: TransferToAgentTool, tool_args: Mapping[str, Any]) -> bool:
        """Whether a `transfer_to_agent` call is carried out in the model Step (see the module docstring).

        The first call of the Step's response only, and only when the response made no other call: ADK
        resumes a paused invocation with the agent whose calls it answers, so a transfer next to
        deferred calls would be lost when they resume.
        """
        target = tool_args.get("agent_name")
        offered = tool._agent_names  # pyright: ignore[reportPrivateUsage]
        return (
            self.transfer_target is None
            and self._calls_in_response == 1
            and isinstance(target, str)
            and target in offered
        )

    async def _check_structured_answer(
        self, tool: SetModelResponseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any]:
        """Check the model's structured answer against the output schema, as ADK's own tool does.

        The check has no effects, so running it in the model Step (and again on a retry) is harmless, and
        the application's tool callbacks stay out of the model Step as for every other call.
        """
        result = cast(object, await tool.run_async(args=tool_args, tool_context=tool_context))
        if tool_context.actions.set_model_response is None and tool_context.function_call_id:
            # The answer failed the check: ADK would send the error to the model at once, in a second
            # model call. Stopping here defers that call to the next model Step.
            tool_context.actions.skip_summarization = True
            self.invalid_structured_answers.add(tool_context.function_call_id)
        # ADK wraps a result that is not a dict (a list schema's answer) as {"result": ...}.
        return cast(dict[str, Any], result) if isinstance(result, dict) else {"result": result}

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Keep the placeholder or recorded result as it is, so no other after-tool callback runs here.

        ADK runs after-tool callbacks even when a before-tool callback answered the call. The real result
        already went through them in its tool Step; running them again on the placeholder, or on the
        recorded result, would apply them twice. Returning the result stops the plugin chain and skips
        the agent's own after-tool callbacks.
        """
        del tool, tool_args, tool_context
        return result


def _offer_only(llm_request: LlmRequest, names: frozenset[str]) -> None:
    """Leave only the function tools named ``names`` in the request (a planning turn's ``write_todos``).

    A provider's built-in tools go too: a planning turn offers nothing that acts.
    """
    llm_request.tools_dict = {name: tool for name, tool in llm_request.tools_dict.items() if name in names}
    kept: list[types.Tool] = []
    for tool in llm_request.config.tools or ():
        declarations = [
            declaration
            for declaration in (getattr(tool, "function_declarations", None) or ())
            if declaration.name in names
        ]
        if declarations:
            kept.append(types.Tool(function_declarations=declarations))
    llm_request.config.tools = cast(Any, kept) or None


def _insert_plan_note(llm_request: LlmRequest, note: str, turn_text: str | None) -> None:
    """Show the model the plan note as user text just before the turn's user message."""
    contents = llm_request.contents
    position = len(contents)
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        text = "".join(part.text or "" for part in content.parts or ())
        if content.role == "user" and turn_text is not None and text == turn_text:
            position = index
            break
    contents.insert(position, types.Content(role="user", parts=[types.Part(text=note)]))
