"""The demo's scripted model: the package's offline Messages API, answering from what the request holds.

The real Claude Code CLI calls it exactly as it would call the Anthropic API. It runs in the Worker
process, and each answer depends only on the request, so a rerun of a model call gets the same answer and
a replacement Worker goes on where the conversation is.
"""

from __future__ import annotations

from dex_agents_claude_agent_sdk.testing import ApiReply, ApiRequest, ApiToolUse, ScriptedClaudeApi


async def answer(request: ApiRequest) -> ApiReply:
    """Look the order up, then refund it, then report what happened."""
    results = request.tool_results
    if "lookup-1" not in results:
        return ApiReply(
            text="Let me look up order A-17 first.",
            tool_uses=[ApiToolUse("lookup-1", "lookup_order", {"order_id": "A-17"})],
        )
    if "refund-1" not in results:
        return ApiReply(
            text="It arrived broken, so I will refund the 40 EUR you paid.",
            tool_uses=[ApiToolUse("refund-1", "refund_order", {"order_id": "A-17", "amount_eur": 40})],
        )
    _, refund_failed = results["refund-1"]
    if refund_failed:
        return ApiReply(text="The refund was not made; a colleague will get back to you.")
    return ApiReply(text="Done: Refunded 40 EUR for order A-17.")


SCRIPTED_API = ScriptedClaudeApi(answer)
"""The scripted Messages API of this process (a Worker starts its server on the first run)."""
