"""The demo's scripted model: a Messages API on loopback, answering from what the request already holds.

The real Claude Code CLI calls it exactly as it would call the Anthropic API. It runs in the Worker
process, and each answer depends only on the request, so a rerun of a model call gets the same answer.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from dex_agents_claude_agent_sdk.testing import AnthropicApiServer, ApiReply, ApiRequest, ApiToolUse

_servers: dict[int, AnthropicApiServer] = {}
_lock = asyncio.Lock()


def _tool_results(request: ApiRequest) -> list[tuple[str, bool]]:
    """The `(tool_use_id, is_error)` of every tool result in the request, oldest first."""
    results: list[tuple[str, bool]] = []
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, list):
            for block in cast(list[dict[str, Any]], content):
                if block.get("type") == "tool_result":
                    results.append((str(block.get("tool_use_id")), bool(block.get("is_error"))))
    return results


async def answer(request: ApiRequest) -> ApiReply:
    """Look the order up, then refund it, then report what happened."""
    results = dict(_tool_results(request))
    if "lookup-1" not in results:
        return ApiReply(
            text="Let me look up order A-17 first.",
            tool_uses=[ApiToolUse("lookup-1", "mcp__dex__lookup_order", {"order_id": "A-17"})],
        )
    if "refund-1" not in results:
        return ApiReply(
            text="It arrived broken, so I will refund the 40 EUR you paid.",
            tool_uses=[
                ApiToolUse("refund-1", "mcp__dex__refund_order", {"order_id": "A-17", "amount_eur": 40})
            ],
        )
    if results["refund-1"]:
        return ApiReply(text="The refund was not made; a colleague will get back to you.")
    return ApiReply(text="Done: Refunded 40 EUR for order A-17.")


async def scripted_api_url() -> str:
    """Start this process's scripted API on first use and return its base URL."""
    async with _lock:
        if 0 not in _servers:
            server = AnthropicApiServer(answer)
            await server.start()
            _servers[0] = server
    return _servers[0].base_url()
