"""A scripted model for Stepwise agents that runs through LiteLLM's own code path, with no key.

`scripted_model` registers `ScriptedLiteLLM` as a LiteLLM custom provider (``litellm.custom_provider_map``)
and returns a `LiteLLMModelClient` for it, so a test's agent is the real Stepwise runner calling the real
``litellm.acompletion(stream=True)``: LiteLLM routes the call to the provider, wraps its chunks in its
stream wrapper, and the runner reads them as it reads any provider's stream.

On each call the provider renders what the model sees as texts (``system: ...``, ``user: ...``,
``assistant: ...``, ``assistant calls <tool> <arguments> [<id>]``, ``tool <tool> [<id>]: <result>``),
hands them with the names of the offered tools to `dex_agents.testing.scripted_model_response`, which logs
the call (``Invocation.offered_tools``) and honours the script's gates and failures, and streams the
scripted answer: its ``partial_text`` at once, its text in word chunks, each tool call in two argument
chunks, and a last chunk with the scripted usage. A call with ``tool_choice="required"`` whose scripted
answer calls no tool fails, as no provider answers so. Like every
scripted model, it needs the `RunModel` scope that `dex_agents.testing.with_model_call_scope` (and the
matrix harness) provides. There a context summary call (``summarize_context``) answers from the
session's summary script (`dex_agents.testing.ScriptStore.set_summaries`), with
`dex_agents.testing.DEFAULT_SCRIPTED_SUMMARY` when the script gives no text::

    definition = AgentDefinition(name="orders", model=scripted_model(), tools=[...])
    flow = AgentSessionFlow(with_model_call_scope(StepwiseRunner(definition)), flow_type="Orders")
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, cast

from litellm.llms.custom_llm import CustomLLM, CustomLLMError
from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)

from dex_agents.stepwise._litellm import litellm
from dex_agents.stepwise._messages import render_chat_transcript
from dex_agents.stepwise._model import LiteLLMModelClient
from dex_agents.testing import (
    DEFAULT_SCRIPTED_SUMMARY,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    current_model_call,
    scripted_model_response,
)

__all__ = ["SCRIPTED_PROVIDER", "ScriptedLiteLLM", "render_model_input", "scripted_chunks", "scripted_model"]

SCRIPTED_PROVIDER = "dex-scripted"
"""The LiteLLM provider name of the scripted model; its model strings are ``dex-scripted/<name>``."""

# Each chunk keeps its trailing whitespace, so the chunks add up to the scripted text exactly.
_WORDS = re.compile(r"\S+\s*|\s+")


def render_model_input(messages: Sequence[Mapping[str, object]]) -> list[str]:
    """Render the chat messages of one call as one text per message, or per tool call.

    Args:
        messages: The call's messages in the OpenAI chat format.

    Returns:
        The texts a test reads in the invocation log (see `dex_agents.stepwise` transcripts).
    """
    return render_chat_transcript(messages)


def _chunk(delta: Delta) -> ModelResponseStream:
    return ModelResponseStream(choices=[StreamingChoices(index=0, delta=delta)])


def _tool_call_chunks(index: int, call: ScriptedToolCall) -> Iterator[ModelResponseStream]:
    # Two pieces, as providers stream them: the call's ID and name with the first half of the arguments,
    # then the rest, so the runner's joining of argument pieces is exercised on every call.
    arguments = call.arguments_json
    half = len(arguments) // 2
    yield _chunk(
        Delta(
            tool_calls=[
                ChatCompletionDeltaToolCall(
                    id=call.tool_call_id,
                    index=index,
                    type="function",
                    function=Function(name=call.tool_name, arguments=arguments[:half]),
                )
            ]
        )
    )
    yield _chunk(
        Delta(
            tool_calls=[
                ChatCompletionDeltaToolCall(index=index, function=Function(arguments=arguments[half:]))
            ]
        )
    )


def _last_chunk(response: ScriptedResponse) -> dict[str, object]:
    # LiteLLM's generic chunk is the form whose usage it takes from a custom provider as given.
    return {
        "text": "",
        "tool_use": None,
        "is_finished": True,
        "finish_reason": "tool_calls" if response.tool_calls else "stop",
        "index": 0,
        "usage": {
            "prompt_tokens": response.input_tokens,
            "completion_tokens": response.output_tokens,
            "total_tokens": response.input_tokens + response.output_tokens,
        },
    }


def scripted_chunks(response: ScriptedResponse) -> Iterator[object]:
    """Return the stream chunks of a scripted answer, for a LiteLLM custom provider's ``astreaming`` to yield.

    The text comes in word chunks, each tool call in two chunks (its ID and name with the first half of the
    arguments, then the rest), and a last chunk carries the finish reason and the scripted usage. A provider
    of your own that decides its answers from the conversation, as a demo's scripted model does, streams
    them with this.

    Args:
        response: The answer; only its text, tool calls and usage are used.

    Returns:
        The chunks, in order.
    """
    for words in _WORDS.findall(response.text):
        yield _chunk(Delta(content=words))
    for index, call in enumerate(response.tool_calls):
        yield from _tool_call_chunks(index, call)
    yield _last_chunk(response)


def _offered_tool_names(request: Mapping[str, Any]) -> list[str]:
    tools = cast(list[Mapping[str, Any]], request.get("tools") or [])
    return [str(cast(Mapping[str, Any], tool.get("function") or {}).get("name")) for tool in tools]


class ScriptedLiteLLM(CustomLLM):
    """A LiteLLM custom provider that answers from a `ScriptStore`; it only streams, as Stepwise calls it.

    Each model name (``dex-scripted/<name>``) has its own store, set by `scripted_model`; a name without
    one uses the store named by ``DEX_AGENTS_TEST_STATE_DIR``, which `AgentTestStack` sets for Workers.
    """

    def __init__(self) -> None:
        super().__init__()
        self._stores: dict[str, tuple[ScriptStore | None, Sequence[Sequence[ScriptedResponse]] | None]] = {}

    def use_store(
        self, name: str, store: ScriptStore | None, default_turns: Sequence[Sequence[ScriptedResponse]] | None
    ) -> None:
        """Answer the model ``name`` from ``store`` (or the environment's store with ``default_turns``)."""
        self._stores[name] = (store, default_turns)

    def _store(self, name: str) -> ScriptStore:
        store, default_turns = self._stores.get(name, (None, None))
        return store or ScriptStore.from_environment(default_turns)

    # LiteLLM declares astreaming as a coroutine that returns an iterator, but it iterates whatever the call
    # returns, so the async generator its documentation shows is what it takes.
    async def astreaming(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, model: str, messages: list[Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Answer one streaming call from the script, logging the names of the tools it offers."""
        request = cast(Mapping[str, Any], kwargs.get("optional_params") or {})
        partial: asyncio.Queue[str] = asyncio.Queue()
        answering = asyncio.ensure_future(
            scripted_model_response(
                render_model_input(messages),
                self._store(model),
                on_partial_text=partial.put_nowait,
                offered_tools=_offered_tool_names(request),
            )
        )
        waiting: asyncio.Future[str] | None = None
        try:
            # Partial text streams while the answer waits at its gate, so a UI sees it before a kill.
            while not answering.done():
                waiting = asyncio.ensure_future(partial.get())
                await asyncio.wait({answering, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if waiting.done():
                    yield _chunk(Delta(content=waiting.result()))
                else:
                    waiting.cancel()
            while not partial.empty():
                yield _chunk(Delta(content=partial.get_nowait()))
            response = answering.result()
            scope = current_model_call()
            if scope is not None and scope.is_summary and not response.text:
                # The summary script leaves the text to the model; a summary is never blank.
                response = dataclasses.replace(response, text=DEFAULT_SCRIPTED_SUMMARY)
        finally:
            answering.cancel()
            if waiting is not None:
                waiting.cancel()
        if request.get("tool_choice") == "required" and not response.tool_calls:
            # A provider never answers a forced call without one, so such a script would test nothing real.
            raise CustomLLMError(
                status_code=400, message="tool_choice was 'required', but the scripted answer calls no tool"
            )
        for chunk in scripted_chunks(response):
            yield chunk

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Refuse a call without streaming: Stepwise always streams."""
        raise CustomLLMError(status_code=400, message="the scripted model only answers stream=True calls")


_PROVIDER = ScriptedLiteLLM()


def scripted_model(
    name: str = "model",
    store: ScriptStore | None = None,
    *,
    default_turns: Sequence[Sequence[ScriptedResponse]] | None = None,
) -> LiteLLMModelClient:
    """Register the scripted provider with LiteLLM and return a model client for ``dex-scripted/<name>``.

    Args:
        name: The model's name; each name may answer from its own store.
        store: The script store; by default the one named by ``DEX_AGENTS_TEST_STATE_DIR``, opened when a
            call needs it, so a Worker can build its agent before the variable is read.
        default_turns: The script of sessions that have none of their own (with the default store).

    Returns:
        The client, which accepts a forced tool choice.
    """
    _PROVIDER.use_store(name, store, default_turns)
    provider_map = cast(list[dict[str, Any]], litellm.custom_provider_map)
    if not any(entry.get("provider") == SCRIPTED_PROVIDER for entry in provider_map):
        provider_map.append({"provider": SCRIPTED_PROVIDER, "custom_handler": _PROVIDER})
    return LiteLLMModelClient(f"{SCRIPTED_PROVIDER}/{name}", forced_tool_choice=True)
