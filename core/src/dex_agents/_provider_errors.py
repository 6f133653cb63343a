"""What a model provider's error means for the turn: retry, refuse, compact, or wait first.

Every framework raises its own provider client's exceptions (``openai.APIStatusError``,
``anthropic.APIStatusError``, LiteLLM's, ``httpx.HTTPStatusError``), so these helpers read them by duck
typing: an HTTP status in ``status_code`` (or ``status``, or ``response.status_code``), the provider's message
in ``message``, ``body`` or the response text, and ``Retry-After`` in the response's headers. Each looks
through the error's ``__cause__`` and ``__context__`` chain too, because frameworks wrap the client's error in
their own (Pydantic AI's ``ModelHTTPError``, LangChain's, ADK's).

An adapter calls them where its model call fails (see ``ContextWindowExceeded``), and the session calls
`provider_retry_after` on every failed ``RunModel`` attempt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, cast

__all__ = [
    "CONTEXT_WINDOW_EXCEEDED_ERROR",
    "MAX_PROVIDER_RETRY_AFTER_SECONDS",
    "ContextWindowExceeded",
    "UnfinishedModelResponse",
    "is_context_window_refusal",
    "provider_refusal",
    "provider_retry_after",
]

#: How a turn's ``turn_error`` starts when the provider refused its input as too long and the session could
#: not compact it away.
CONTEXT_WINDOW_EXCEEDED_ERROR = (
    "the model provider refused the input as longer than the model's context window"
)

#: The longest a failed ``RunModel`` attempt waits for a provider's ``Retry-After``: a longer one is the
#: provider saying "not today", which the Step's retries cannot outwait anyway.
MAX_PROVIDER_RETRY_AFTER_SECONDS = 60.0

# Statuses a retry only repeats. 408 (timeout), 409 (conflict), 429 (rate limit) and every 5xx are worth
# another attempt; so is 413 unless it is a context-length refusal, which is handled apart.
_REFUSED_STATUSES = frozenset({400, 401, 403, 404, 405, 415, 422})
_RETRY_AFTER_STATUSES = frozenset({429, 503, 529})
_CONTEXT_STATUSES = frozenset({400, 413})
# What OpenAI, Anthropic, Google, Mistral, Groq and the OpenAI-compatible servers say when the input is
# longer than the model's context window (codes and messages, lower case).
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "input token count",
    "request too large",
)
_STATUS_ATTRIBUTES = ("status_code", "status", "http_status")
_BODY_LIMIT = 2000


class ContextWindowExceeded(Exception):
    """The provider refused the model input as longer than the model's context window.

    Raise it from ``run_model_step`` (``raise ContextWindowExceeded(str(error)) from error``, after
    `is_context_window_refusal`). With ``AgentSessionOptions.compaction`` set and a runner that is a
    ``ContextCompactionRunner``, the session summarizes the older messages and calls the model again;
    otherwise, or when nothing is left to summarize, it ends the turn with a ``turn_error`` that says so, and
    the session takes the next user message as usual.
    """


class UnfinishedModelResponse(RuntimeError):
    """The provider's answer ended before the provider said it was finished.

    A stream cut mid-body, or one that ends without a finish reason (OpenAI's ``finish_reason``, the
    Responses API's ``response.completed``, Anthropic's ``stop_reason``), is a partial answer: taking it as
    final would store half a reply and skip the tool calls the model had not sent yet. Raise this from
    ``run_model_step``; the attempt fails, ``RunModel`` retries it, and the next attempt's text replaces the
    partial text on the event stream.
    """


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _status(error: BaseException) -> int | None:
    for name in _STATUS_ATTRIBUTES:
        value = getattr(error, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _http_error(error: BaseException) -> tuple[BaseException, int] | None:
    """The first error of the chain that carries an HTTP status, with it."""
    for item in _chain(error):
        status = _status(item)
        if status is not None:
            return item, status
    return None


def _provider_message(error: BaseException) -> str:
    """The provider's own words: the error body's message where there is one, else the error's text."""
    body = getattr(error, "body", None)
    if isinstance(body, str | bytes):
        try:
            body = json.loads(body)
        except (ValueError, RecursionError):
            body = body.decode(errors="replace") if isinstance(body, bytes) else body
    message = _message_in(body)
    if message:
        return message
    text = getattr(error, "message", None)
    if isinstance(text, str) and text:
        return text
    return str(error) or type(error).__name__


def _message_in(body: object) -> str:
    if isinstance(body, str):
        return body
    if not isinstance(body, Mapping):
        return ""
    fields = cast(Mapping[str, Any], body)
    nested = fields.get("error")
    if isinstance(nested, Mapping):
        return _message_in(cast(Mapping[str, Any], nested))
    for key in ("message", "detail", "error"):
        value = fields.get(key)
        if isinstance(value, str) and value:
            code = fields.get("code") or fields.get("type")
            return f"{value} ({code})" if isinstance(code, str) and code not in value else value
    return ""


def _searchable_text(error: BaseException) -> str:
    parts = [str(error), _provider_message(error)]
    body = getattr(error, "body", None)
    if body is not None:
        parts.append(str(body)[:_BODY_LIMIT])
    return " ".join(parts).lower()


def is_context_window_refusal(error: BaseException) -> bool:
    """Whether ``error`` is a provider refusing the model input as longer than the context window.

    Args:
        error: What the framework's model call raised.

    Returns:
        ``True`` when the error, or one in its ``__cause__``/``__context__`` chain, is an HTTP 400 or 413
        answer whose code or message says the input is over the context length (OpenAI's
        ``context_length_exceeded``, Anthropic's ``prompt is too long``, and the like), or an error of the
        chain whose type says so (LiteLLM's ``ContextWindowExceededError``).
    """
    for item in _chain(error):
        if isinstance(item, ContextWindowExceeded) or "contextwindowexceeded" in type(item).__name__.lower():
            return True
        if _status(item) in _CONTEXT_STATUSES:
            text = _searchable_text(item)
            if any(marker in text for marker in _CONTEXT_MARKERS):
                return True
    return False


def provider_refusal(error: BaseException) -> str | None:
    """A ``turn_error`` for a provider answer that another attempt would only repeat, else ``None``.

    Args:
        error: What the framework's model call raised.

    Returns:
        For an HTTP 400, 401, 403, 404, 405, 415 or 422 answer in the error's chain (a bad request, a wrong
        key or model name) that is not a context-length refusal: ``"the model provider refused the call
        (HTTP <status>): <its message>"``. ``None`` for anything else (a rate limit, a 5xx, a timeout, a cut
        connection): re-raise it and ``RunModel`` retries.
    """
    if is_context_window_refusal(error):
        return None
    found = _http_error(error)
    if found is None or found[1] not in _REFUSED_STATUSES:
        return None
    item, status = found
    return f"the model provider refused the call (HTTP {status}): {_provider_message(item)[:_BODY_LIMIT]}"


_RETRY_AFTER_MS = "retry-after-ms"
_RETRY_AFTER = "retry-after"
_NUMBER = re.compile(r"^\s*\d+(\.\d+)?\s*$")


def provider_retry_after(error: BaseException) -> float | None:
    """How long the provider asked to wait before the next call, from a 429, 503 or 529 answer.

    Args:
        error: What the framework's model call raised.

    Returns:
        The seconds of the answer's ``retry-after-ms`` or ``retry-after`` header (a number or an HTTP date),
        at most `MAX_PROVIDER_RETRY_AFTER_SECONDS`; ``None`` when no error of the chain is such an answer
        with such a header.
    """
    for item in _chain(error):
        if _status(item) not in _RETRY_AFTER_STATUSES:
            continue
        seconds = _header_seconds(getattr(getattr(item, "response", None), "headers", None))
        if seconds is None:
            seconds = _header_seconds(getattr(item, "headers", None))
        if seconds is not None:
            return max(0.0, min(seconds, MAX_PROVIDER_RETRY_AFTER_SECONDS))
    return None


def _header_seconds(headers: object) -> float | None:
    get = getattr(headers, "get", None)
    if get is None:
        return None
    milliseconds = get(_RETRY_AFTER_MS)
    if isinstance(milliseconds, str) and _NUMBER.match(milliseconds):
        return float(milliseconds) / 1000
    value = get(_RETRY_AFTER)
    if not isinstance(value, str):
        return None
    if _NUMBER.match(value):
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return (moment - datetime.now(UTC)).total_seconds()
