"""The SDK's OpenAI models, made to fail an answer the provider never said it finished.

A streamed answer is final only when the provider says so: a ``finish_reason`` on the Chat Completions
API, a terminal event (``response.completed``, ``response.incomplete``, ``response.failed``, ``error``) on
the Responses API. The SDK does not always insist:

- `OpenAIChatCompletionsModel` requires a ``finish_reason`` only from ``api.openai.com``. From any other
  base URL (an OpenAI-compatible server, a proxy, a gateway) a stream that stops without one, cut short
  after a few words and closed with ``data: [DONE]``, becomes a completed response holding the partial
  text, and the run takes it for the final answer, or for a complete set of tool calls;
- a connection cut mid-body surfaces as the client's `APIConnectionError` (or the transport's error), like a
  failure to connect at all.

Each Step's run therefore uses a copy of each of these models (the agents' own, the run configuration's,
and those its provider resolves by name) whose stream raises `UnfinishedModelResponse` when the answer
ended before the provider said it finished; the session fails the attempt and `RunModel` makes the call
again. The user's model objects are not modified, and the copies keep their class and client, so tracing
reads them as it reads the originals.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from agents import (
    Model,
    ModelProvider,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    OpenAIResponsesWSModel,
    RunConfig,
)
from dex_agents import UnfinishedModelResponse
from openai.types.chat import ChatCompletionChunk

__all__ = ["FinishCheckedProvider", "finish_checked_model", "finish_checked_run_config"]

# The events after which the SDK has the provider's last word on a response, good or bad.
_TERMINAL_EVENT_TYPES = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "error", "response.error"}
)
_CHECKED_ATTRIBUTE = "_dex_finish_checked"


class _FinishReasonCheck:
    """A Chat Completions chunk stream that fails when it ends without choice 0's ``finish_reason``.

    It stands in for the client's `AsyncStream` where the SDK's model reads it: it passes every chunk on,
    keeps the stream's HTTP ``response`` (the SDK reads its request ID) and closes the stream when the
    SDK closes it.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._chunks: AsyncIterator[ChatCompletionChunk] = stream.__aiter__()
        self._finished = False
        self.response: object = getattr(stream, "response", None)

    def __aiter__(self) -> _FinishReasonCheck:
        return self

    async def __anext__(self) -> ChatCompletionChunk:
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            if self._finished:
                raise
            raise UnfinishedModelResponse(
                "the Chat Completions stream ended without a finish_reason: the provider never said the "
                "answer was finished, so its partial text and tool calls are not taken as final"
            ) from None
        except Exception as error:
            raise _cut(error) from error
        if any(choice.index == 0 and choice.finish_reason is not None for choice in chunk.choices):
            self._finished = True
        return chunk

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None) or getattr(self._stream, "close", None)
        if callable(close):
            closed = close()
            if inspect.isawaitable(closed):
                await closed


def _cut(error: Exception) -> Exception:
    """The error to raise for a failure in the middle of a streamed answer."""
    if isinstance(error, UnfinishedModelResponse):
        return error
    return UnfinishedModelResponse(
        f"the model's streamed answer was cut before the provider said it finished "
        f"({type(error).__name__}: {error})"
    )


def _checked_stream_response(stream_response: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    """Wrap a model's ``stream_response`` so that a stream without a terminal event fails."""

    async def stream_checked(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        terminal = False
        started = False
        try:
            async for event in stream_response(*args, **kwargs):
                started = True
                terminal = terminal or getattr(event, "type", None) in _TERMINAL_EVENT_TYPES
                yield event
        except UnfinishedModelResponse:
            raise
        except Exception as error:
            # Before the first event the request itself failed (a status, a refused connection): the
            # client's own error says more than "cut". After a terminal event the provider had its say.
            if not started or terminal:
                raise
            raise _cut(error) from error
        if not terminal:
            raise UnfinishedModelResponse(
                "the model's streamed answer ended without a terminal event (no response.completed): "
                "the provider never said it was finished, so the partial answer is not taken as final"
            )

    return stream_checked


def _checked_fetch_response(fetch_response: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a Chat Completions model's request so that its streamed chunks are checked."""

    async def fetch_checked(*args: Any, **kwargs: Any) -> object:
        fetched: object = await fetch_response(*args, **kwargs)
        if kwargs.get("stream") is not True or not isinstance(fetched, tuple):
            return fetched
        # A streamed request returns the response being built and the provider's chunk stream.
        parts = cast(tuple[object, ...], fetched)
        return (parts[0], _FinishReasonCheck(parts[1])) if len(parts) == 2 else parts

    return fetch_checked


def finish_checked_model(model: Model) -> Model:
    """Return a copy of one of the SDK's OpenAI models that fails an unfinished streamed answer.

    Args:
        model: Any model; only `OpenAIResponsesModel` and `OpenAIChatCompletionsModel` (and their
            subclasses but the websocket `OpenAIResponsesWSModel`) are copied.

    Returns:
        The copy, or ``model`` itself when it is another model or already checked.
    """
    if not isinstance(model, (OpenAIResponsesModel, OpenAIChatCompletionsModel)):
        return model
    if isinstance(model, OpenAIResponsesWSModel) or getattr(model, _CHECKED_ATTRIBUTE, False):
        # The websocket model keeps its open connection on the object the provider caches, so a copy
        # would open connections of its own; the SDK fails its stream closed before a terminal event.
        return model
    checked = copy.copy(model)
    # The copy's own bound methods, looked up before the instance attributes below shadow them.
    stream_response = checked.stream_response
    fetch_response = getattr(checked, "_fetch_response", None)
    setattr(checked, "stream_response", _checked_stream_response(stream_response))  # noqa: B010
    if isinstance(checked, OpenAIChatCompletionsModel) and callable(fetch_response):
        # The finish reason is in the provider's chunks, which only the model's own request returns.
        setattr(checked, "_fetch_response", _checked_fetch_response(fetch_response))  # noqa: B010
    setattr(checked, _CHECKED_ATTRIBUTE, True)
    return checked


class FinishCheckedProvider(ModelProvider):
    """Resolves model names as ``provider`` does, with the SDK's OpenAI models finish-checked.

    Args:
        provider: The run configuration's model provider.
    """

    def __init__(self, provider: ModelProvider) -> None:
        self.provider = provider

    def get_model(self, model_name: str | None) -> Model:
        """Return ``provider``'s model for ``model_name``, finish-checked (`finish_checked_model`)."""
        return finish_checked_model(self.provider.get_model(model_name))

    async def aclose(self) -> None:
        """Close ``provider``."""
        await self.provider.aclose()


def finish_checked_run_config(config: RunConfig) -> RunConfig:
    """Return ``config`` with its model and the models its provider resolves finish-checked.

    Args:
        config: A Step's run configuration.
    """
    provider = config.model_provider
    if not isinstance(provider, FinishCheckedProvider):
        provider = FinishCheckedProvider(provider)
    model = config.model
    return dataclasses.replace(
        config,
        model=finish_checked_model(model) if isinstance(model, Model) else model,
        model_provider=provider,
    )
