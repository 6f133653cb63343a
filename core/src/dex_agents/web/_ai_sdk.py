"""Which AI SDK major a ``useChat`` client speaks, and what the UI message stream sends it.

The client names its major in the ``x-dex-ai-sdk`` request header or the ``ai_sdk`` query parameter (``5``,
``6`` or ``7``; the newest when it names none). Each major validates every chunk against its own schema and
fails the request on a chunk it does not know, so the stream sends each only what its schema accepts:

* ``reset-step`` (ai 7 only): older clients get a model call's text and reasoning once its attempt has
  committed, so a retried call never leaves the dead attempt's text on screen.
* ``tool-approval-request`` and ``tool-approval-response`` (ai 6 and 7): ai 5 shows a call that waits for
  approval as a tool part in ``input-available``; the browser answers with ``addToolResult`` and the output
  ``{"approved": true|false, "reason"?: str}``, which ``approvals_from_outputs`` (in ``_chat_request``) reads.
* ``tool-output-denied`` (ai 6 and 7): ai 5 gets ``tool-output-error`` whose ``errorText`` says why.
"""

from __future__ import annotations

from enum import IntEnum

from starlette.requests import Request

from dex_agents.web._requests import fail

__all__ = ["AI_SDK_HEADER", "AI_SDK_QUERY_PARAMETER", "AiSdkDialect", "requested_dialect"]

#: The request header that names the client's AI SDK major.
AI_SDK_HEADER = "x-dex-ai-sdk"
#: The query parameter that names it, for a client that cannot set headers.
AI_SDK_QUERY_PARAMETER = "ai_sdk"


class AiSdkDialect(IntEnum):
    """The AI SDK major a client speaks."""

    V5 = 5
    V6 = 6
    V7 = 7
    LATEST = 7

    @property
    def has_reset_step(self) -> bool:
        return self >= AiSdkDialect.V7

    @property
    def has_approvals(self) -> bool:
        return self >= AiSdkDialect.V6

    @property
    def has_denials(self) -> bool:
        return self >= AiSdkDialect.V6


def requested_dialect(request: Request) -> AiSdkDialect:
    """The AI SDK major the request names, or the newest.

    Raises:
        BadRequestError: 400 for a major the app does not speak.
    """
    named = request.headers.get(AI_SDK_HEADER) or request.query_params.get(AI_SDK_QUERY_PARAMETER)
    if named is None:
        return AiSdkDialect.LATEST
    majors = {str(dialect.value): dialect for dialect in AiSdkDialect}
    dialect = majors.get(named.strip())
    if dialect is None:
        fail(400, f"{AI_SDK_HEADER} names an AI SDK major: one of {', '.join(sorted(majors))}")
    return dialect
