"""The public scripted Messages API: the README's standalone example with the real CLI, and its server."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, cast

import pytest
from claude_agent_sdk import SdkMcpTool, tool
from dex_agents import ToolCallsRequested, ToolCallStatus, ToolEffect, ToolPolicy, TurnCompleted
from dex_agents.testing import SessionSide

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from dex_agents_claude_agent_sdk.testing import (
    AnthropicApiServer,
    ApiReply,
    ApiRequest,
    ApiToolUse,
    ScriptedClaudeApi,
)
from tests.matrix_spec import PACKAGE_DIR

_EXAMPLE = re.compile(r"<!-- offline-example[^>]*-->\n```python\n(.*?)```", re.DOTALL)


def readme_example() -> dict[str, Any]:
    """Run the README's offline example block and return what it defined."""
    [code] = _EXAMPLE.findall((PACKAGE_DIR / "README.md").read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    return namespace


async def test_the_readme_example_answers_a_turn_and_its_retry_the_same_way() -> None:
    example = readme_example()
    runner = cast(ClaudeAgentRunner, example["runner"])
    api = cast(ScriptedClaudeApi, example["api"])
    session = SessionSide()
    try:
        session.start_turn(runner.build_user_message("Where is A-17?"))
        outcome = await runner.run_model_step(session.context())
        # A retried RunModel gets the same replies: each follows from what its request holds.
        session.attempt = 2
        retried = await runner.run_model_step(session.context())
    finally:
        await api.aclose()

    for result in (outcome, retried):
        assert isinstance(result, TurnCompleted) and result.turn_error is None, result
        assert result.new_messages[-1].text == "Order A-17 shipped on Monday.", result.new_messages
        assert [m.tool_output for m in result.new_messages if m.tool_output] == ["A-17 shipped on Monday"]
    assert len(api.requests) == 4
    assert api.requests[1].tool_results == {"lookup-1": ("A-17 shipped on Monday", False)}


async def test_a_list_of_replies_goes_on_across_a_deferral_and_says_when_it_ran_out() -> None:
    refund = ApiToolUse("refund-1", "refund_order", {"order_id": "A-17"})
    api = ScriptedClaudeApi([ApiReply(text="Refunding.", tool_uses=[refund]), ApiReply(text="Refunded.")])
    example = readme_example()
    runner = ClaudeAgentRunner(api.options(), [example["lookup_order"], _refund_order()])
    session = SessionSide(tool_policies={"refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)})
    try:
        session.start_turn(runner.build_user_message("Refund A-17"))
        requested = await runner.run_model_step(session.context())
        assert isinstance(requested, ToolCallsRequested), requested
        assert [call.tool_call_id for call in requested.tool_calls] == ["refund-1"]
        session.defer(requested)
        session.finish("refund-1", ToolCallStatus.SUCCEEDED, output="refunded 40 EUR")
        completed = await runner.run_model_step(session.context())
        assert isinstance(completed, TurnCompleted) and completed.turn_error is None, completed
        assert completed.new_messages[-1].text == "Refunded."
        session.store(completed.new_messages)

        # A third model call has no reply: the API answers 500, naming the problem, and the attempt fails.
        session.start_turn(runner.build_user_message("And now?"))
        with pytest.raises(RuntimeError, match=r"status 500.*no reply for this model call"):
            await runner.run_model_step(session.context())
    finally:
        await api.aclose()
    assert api.requests[-1].tool_results["refund-1"] == ("refunded 40 EUR", False)


def _refund_order() -> SdkMcpTool[Any]:
    @tool("refund_order", "Refund an order.", {"order_id": str})
    async def refund_order(arguments: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a deferred call runs in its tool Step, never in the model step")

    return refund_order


async def test_a_reply_whose_client_hangs_up_is_cancelled() -> None:
    waiting = asyncio.Event()
    cancelled = asyncio.Event()

    async def wait_forever(request: ApiRequest) -> ApiReply:
        waiting.set()
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    server = AnthropicApiServer(wait_forever)
    await server.start()
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        body = json.dumps({"model": "claude", "stream": True, "messages": []}).encode()
        head = f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        await asyncio.wait_for(waiting.wait(), 30)
        writer.close()
        await writer.wait_closed()
        await asyncio.wait_for(cancelled.wait(), 30)
    finally:
        await server.close()


def test_a_tool_use_names_the_runners_tools_by_their_own_names() -> None:
    assert ApiToolUse("t1", "lookup_order", {}).cli_name == "mcp__dex__lookup_order"
    assert ApiToolUse("t2", "Bash", {}).cli_name == "Bash"
    assert ApiToolUse("t3", "mcp__inventory__count_items", {}).cli_name == "mcp__inventory__count_items"
