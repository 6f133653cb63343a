"""What a provider's error means for the turn, read from the OpenAI client's real exceptions."""

from __future__ import annotations

from collections.abc import Mapping

import httpx2
import openai
import pytest

from dex_agents import (
    MAX_PROVIDER_RETRY_AFTER_SECONDS,
    ContextWindowExceeded,
    is_context_window_refusal,
    provider_refusal,
    provider_retry_after,
)

_REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def _openai_error(
    status: int, body: Mapping[str, object], headers: dict[str, str] | None = None
) -> Exception:
    response = httpx2.Response(status, json=dict(body), headers=headers, request=_REQUEST)
    client = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    return client._make_status_error_from_response(response)  # pyright: ignore[reportPrivateUsage]


def _wrapped(error: Exception) -> Exception:
    """The client's error inside a framework's own, as Pydantic AI and LangChain raise them."""
    try:
        try:
            raise error
        except Exception as inner:
            raise RuntimeError("the framework's model call failed") from inner
    except RuntimeError as outer:
        return outer


OPENAI_CONTEXT = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "130000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC_CONTEXT = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum",
    },
}


@pytest.mark.parametrize("body", [OPENAI_CONTEXT, ANTHROPIC_CONTEXT])
def test_a_context_length_refusal_is_recognised_inside_a_framework_error(body: Mapping[str, object]) -> None:
    error = _wrapped(_openai_error(400, body))
    assert is_context_window_refusal(error)
    # It is not a plain refusal: the session compacts or says why, rather than reporting a bad request.
    assert provider_refusal(error) is None
    assert is_context_window_refusal(ContextWindowExceeded("too long"))


def test_a_bad_request_or_a_wrong_key_is_a_refusal_that_names_the_status_and_the_providers_words() -> None:
    error = _wrapped(
        _openai_error(
            401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        )
    )
    assert provider_refusal(error) == (
        "the model provider refused the call (HTTP 401): Incorrect API key provided (invalid_request_error)"
    )
    assert not is_context_window_refusal(error)
    unknown_model = _openai_error(404, {"error": {"message": "The model `gpt-9` does not exist"}})
    assert "HTTP 404" in (provider_refusal(unknown_model) or "")


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
def test_errors_worth_another_attempt_are_not_refusals(status: int) -> None:
    error = _openai_error(status, {"error": {"message": "try again"}})
    assert provider_refusal(error) is None
    assert not is_context_window_refusal(error)
    assert provider_refusal(httpx2.ReadError("peer closed connection")) is None


def test_retry_after_is_read_in_seconds_milliseconds_or_an_http_date_and_bounded() -> None:
    limited = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
    assert provider_retry_after(_wrapped(_openai_error(429, limited, {"retry-after": "2"}))) == 2.0
    assert provider_retry_after(_openai_error(429, limited, {"retry-after-ms": "1500"})) == 1.5
    assert provider_retry_after(_openai_error(529, limited, {"retry-after": "100000"})) == (
        MAX_PROVIDER_RETRY_AFTER_SECONDS
    )
    past = {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}
    dated = provider_retry_after(_openai_error(503, limited, past))
    assert dated == 0.0  # a date in the past: no wait
    assert provider_retry_after(_openai_error(429, limited)) is None
    assert provider_retry_after(_openai_error(500, limited, {"retry-after": "3"})) is None
