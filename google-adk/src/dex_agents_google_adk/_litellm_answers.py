"""Whether a LiteLLM answer ended because the provider said it finished, for ADK's `LiteLlm` model.

LiteLLM fills in a missing finish reason: a stream that ends without one (OpenAI's ``finish_reason``,
Anthropic's ``message_delta`` ``stop_reason``) gets a last chunk with ``"stop"`` (``"tool_calls"`` after a
call), and a non-streamed answer whose ``finish_reason`` or ``stop_reason`` is null becomes ``"stop"``.
ADK's `LiteLlm` adds its own ``"stop"`` on top. So by the time the adapter sees ADK's `LlmResponse`, half an
answer reads like a finished one, and the turn would store it as final.

The evidence survives only inside LiteLLM: its stream wrapper remembers whether the provider sent a finish
reason (``received_finish_reason``, ``intermittent_finish_reason``), and its ``logger_fn`` hook receives the
provider's raw answer before LiteLLM rewrites it. While `watching_litellm_answers` is active (the model
Step's ADK run), ADK's `LiteLLMClient.acompletion` consults both and raises
`dex_agents.UnfinishedModelResponse` for an answer the provider did not finish, so the Step fails and
``RunModel`` makes a new attempt. Outside a model Step, and for a `LiteLlm` given an ``llm_client`` of its
own, nothing changes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

from dex_agents import UnfinishedModelResponse

__all__ = ["install_litellm_answer_check", "provider_finished", "watching_litellm_answers"]

_LITE_LLM_MODULE = "google.adk.models.lite_llm"
_PATCHED = "__dex_agents_unfinished_answer_check__"
_WATCHING: ContextVar[bool] = ContextVar("dex_agents_google_adk_watching_litellm_answers", default=False)


@contextmanager
def watching_litellm_answers() -> Iterator[None]:
    """Judge every LiteLLM answer of this context (and the tasks it starts) by the provider's finish."""
    install_litellm_answer_check()
    token = _WATCHING.set(True)
    try:
        yield
    finally:
        _WATCHING.reset(token)


def install_litellm_answer_check() -> None:
    """Wrap ADK's `LiteLLMClient.acompletion` once per process, if an application loaded ADK's `LiteLlm`.

    ADK's LiteLLM module imports LiteLLM itself, which is slow and optional, so it is never imported here:
    an application that uses `LiteLlm` has imported it before its first model Step.
    """
    module = sys.modules.get(_LITE_LLM_MODULE)
    client_class: object = getattr(module, "LiteLLMClient", None)
    if not isinstance(client_class, type) or getattr(client_class, _PATCHED, False):
        return
    original = cast(Callable[..., Any], client_class.acompletion)  # pyright: ignore[reportUnknownMemberType]

    async def acompletion(self: object, model: Any, messages: Any, tools: Any, **kwargs: Any) -> Any:
        if not _WATCHING.get():
            return await original(self, model, messages, tools, **kwargs)
        if kwargs.get("stream"):
            return _FinishCheckedStream(await original(self, model, messages, tools, **kwargs))
        raw_answers: list[str] = []
        kwargs["logger_fn"] = _raw_answer_logger(raw_answers, kwargs.get("logger_fn"))
        response = await original(self, model, messages, tools, **kwargs)
        if raw_answers and provider_finished(raw_answers[-1]) is False:
            raise UnfinishedModelResponse(
                "the model provider's answer has no finish reason (finish_reason / stop_reason is null), "
                "so it may be cut short; LiteLLM reported it as 'stop'"
            )
        return response

    acompletion.__doc__ = original.__doc__
    setattr(client_class, "acompletion", acompletion)  # noqa: B010
    setattr(client_class, _PATCHED, True)


def provider_finished(raw_answer: str) -> bool | None:
    """Whether a provider's raw, non-streamed answer says it finished.

    Args:
        raw_answer: The answer's JSON as the provider sent it.

    Returns:
        For an OpenAI Chat Completions answer, whether its first choice has a ``finish_reason``; for an
        Anthropic message, whether it has a ``stop_reason``; `None` for anything else, whose finish LiteLLM
        alone judges.
    """
    try:
        body: object = json.loads(raw_answer)
    except ValueError:
        return None
    if not isinstance(body, Mapping):
        return None
    fields = cast(Mapping[str, object], body)
    choices = fields.get("choices")
    if isinstance(choices, list) and choices:
        first: object = cast(list[object], choices)[0]
        if isinstance(first, Mapping) and "finish_reason" in first:
            return cast(Mapping[str, object], first)["finish_reason"] is not None
    if fields.get("type") == "message" and "stop_reason" in fields:
        return fields["stop_reason"] is not None
    return None


def _raw_answer_logger(raw_answers: list[str], user_logger: object) -> Callable[[Mapping[str, Any]], None]:
    """A LiteLLM ``logger_fn`` that keeps each raw answer, then calls the application's own, if any."""

    def log(details: Mapping[str, Any]) -> None:
        answer = details.get("original_response")
        if details.get("log_event_type") == "post_api_call" and isinstance(answer, str):
            raw_answers.append(answer)
        if callable(user_logger):
            user_logger(details)

    return log


class _FinishCheckedStream:
    """LiteLLM's stream, which fails at its end when the provider never sent a finish reason."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._chunks = cast(AsyncIterator[Any], stream.__aiter__())

    def __aiter__(self) -> _FinishCheckedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            if _unfinished(self._stream):
                raise UnfinishedModelResponse(
                    "the model provider's stream ended without a finish reason (no finish_reason, no "
                    "stop_reason), so the answer may be cut short; LiteLLM reported it as 'stop'"
                ) from None
            raise

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _unfinished(stream: object) -> bool:
    """Whether LiteLLM's stream wrapper ended without the provider's finish reason.

    A stream object without LiteLLM's two attributes (another LiteLLM release, another client) is trusted.
    """
    missing = object()
    received = getattr(stream, "received_finish_reason", missing)
    intermittent = getattr(stream, "intermittent_finish_reason", missing)
    if received is missing or intermittent is missing:
        return False
    return received is None and intermittent is None
