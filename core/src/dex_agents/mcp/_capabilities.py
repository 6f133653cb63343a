"""What the source's MCP client declares and how it answers the requests a server sends it.

The MCP SDK declares a client capability exactly when it is given the callback for it, so these callbacks
are the declaration:

- **Elicitation** (form and URL modes) on every connection. A ``tools/call`` connection passes its own
  handler (`dex_agents.mcp._call_questions`), which asks the user through the session; any other connection
  (a listing, a task's poll) has no user to ask and answers ``cancel``.
- **Roots** only to a server whose configuration names roots (`McpRoot`), answered from that configuration.
- **Sampling** is never declared. A server that sends ``sampling/createMessage`` anyway gets a JSON-RPC error
  that says why, instead of the SDK's bare "Sampling not supported".
"""

from __future__ import annotations

import logging

from mcp.client.session import ClientRequestContext, ClientSession
from mcp.types import (
    METHOD_NOT_FOUND,
    CreateMessageRequestParams,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
)

__all__ = [
    "SAMPLING_REFUSAL",
    "cancel_elicitation",
    "refuse_sampling",
    "refuse_sampling_on",
]

_logger = logging.getLogger("dex_agents.mcp")

SAMPLING_REFUSAL = (
    "dex-agents does not support sampling/createMessage: it declares no sampling capability, because an MCP "
    "server may not use the agent's model"
)
"""The message of the JSON-RPC error (-32601) a server's ``sampling/createMessage`` gets."""


async def cancel_elicitation(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    """Answer ``cancel`` to an elicitation on a connection that has no user to ask."""
    _logger.warning(
        "an MCP server asked for input (%s: %r) outside a tool call, where nobody answers; answered cancel",
        params.mode or "form",
        params.message,
    )
    return ElicitResult(action="cancel")


async def refuse_sampling(context: ClientRequestContext, params: CreateMessageRequestParams) -> ErrorData:
    """Refuse ``sampling/createMessage`` with `SAMPLING_REFUSAL`."""
    return ErrorData(code=METHOD_NOT_FOUND, message=SAMPLING_REFUSAL)


def refuse_sampling_on(session: ClientSession) -> None:
    """Make ``session`` answer ``sampling/createMessage`` with `refuse_sampling`, declaring nothing more.

    The capabilities went out with the handshake, which is over: swapping the SDK's default refusal for this
    one now changes the answer and not the declaration. mcp 2.3 keeps the callback as ``_sampling_callback``;
    should a later SDK not, the session keeps the SDK's own refusal (``tests/test_mcp_capabilities.py`` pins
    this).
    """
    if hasattr(session, "_sampling_callback"):
        setattr(session, "_sampling_callback", refuse_sampling)  # noqa: B010 - the SDK has no public setter
