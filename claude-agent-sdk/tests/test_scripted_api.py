"""The public scripted Messages API: the docs' standalone example with the real CLI, and its server."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, cast

import pytest
from claude_agent_sdk import SdkMcpTool, tool
from dex_agents import ToolCallsRequested, ToolCallStatus, ToolEffect, ToolPolicy, TurnCompleted
from dex_agents.testing import ProviderFault, ScriptedResponse, ScriptedToolCall, SessionSide

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from dex_agents_claude_agent_sdk.testing import (
    AnthropicApiServer,
    ApiReply,
    ApiRequest,
    ApiToolUse,
    ScriptedClaudeApi,
)
from dex_agents_claude_agent_sdk.testing._scripted_api import api_reply
from tests.matrix_spec import PACKAGE_DIR

# The docs site's page on testing this adapter holds the offline example.
TESTING_PAGE = PACKAGE_DIR.parent / "docs" / "pages" / "frameworks" / "claude-agent-sdk" / "testing.md"

_EXAMPLE = re.compile(r"<!-- offline-example[^>]*-->\n```python\n(.*?)```", re.DOTALL)


def page_example() -> dict[str, Any]:
    """Run the testing page's offline example block and return what it defined."""
    [code] = _EXAMPLE.findall(TESTING_PAGE.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {}
    exec(compile(code, str(TESTING_PAGE), "exec"), namespace)
    return namespace


async def test_the_docs_example_answers_a_turn_and_its_retry_the_same_way() -> None:
    example = page_example()
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
    example = page_example()
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


async def _post(server: AnthropicApiServer, body: dict[str, Any]) -> bytes:
    """One raw `POST /v1/messages`, and whatever came back before the server closed or reset."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    payload = json.dumps(body).encode()
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    received = b""
    try:
        while chunk := await reader.read(65536):
            received += chunk
    except ConnectionResetError:
        received += b"<reset>"
    writer.close()
    return received


async def test_a_reply_with_a_provider_fault_fails_the_way_the_api_does() -> None:
    use = ApiToolUse("toolu_1", "refund_order", {"order_id": "A-17"})
    replies = {
        "rate_limit": ApiReply(fault=ProviderFault("rate_limit", retry_after_seconds=2)),
        "overloaded": ApiReply(fault=ProviderFault("overloaded")),
        "context_length": ApiReply(fault=ProviderFault("context_length")),
        "cut_stream": ApiReply("It was an unfortunate mistake", fault=ProviderFault("cut_stream")),
        "unfinished_stream": ApiReply("It was", [use], fault=ProviderFault("unfinished_stream")),
        "malformed_arguments": ApiReply(tool_uses=[use], fault=ProviderFault("malformed_arguments")),
    }

    async def responder(request: ApiRequest) -> ApiReply:
        return replies[str(request.body["model"])]

    server = AnthropicApiServer(responder)
    await server.start()
    try:
        answers = {
            kind: (await _post(server, {"model": kind, "stream": True, "messages": []})).decode()
            for kind in replies
        }
        whole = await _post(server, {"model": "unfinished_stream", "messages": []})
    finally:
        await server.close()

    assert answers["rate_limit"].startswith("HTTP/1.1 429 ") and "retry-after: 2\r\n" in answers["rate_limit"]
    assert '"rate_limit_error"' in answers["rate_limit"]
    assert answers["overloaded"].startswith("HTTP/1.1 529 ") and '"overloaded_error"' in answers["overloaded"]
    assert answers["context_length"].startswith("HTTP/1.1 400 ")
    assert "prompt is too long" in answers["context_length"]
    # Part of the stream, then a reset connection: never the answer's end.
    assert "message_start" in answers["cut_stream"] and "message_stop" not in answers["cut_stream"]
    # A clean end without the stop reason.
    assert "message_stop" in answers["unfinished_stream"]
    assert "message_delta" not in answers["unfinished_stream"]
    assert json.loads(whole.split(b"\r\n\r\n", 1)[1])["stop_reason"] is None
    # Tool input in pieces that join to JSON cut before its last character.
    pieces = [
        cast(dict[str, Any], json.loads(line.removeprefix("data: ")))["delta"]["partial_json"]
        for line in answers["malformed_arguments"].splitlines()
        if "input_json_delta" in line and line.startswith("data: ")
    ]
    assert len(pieces) > 1 and "".join(pieces) == json.dumps({"order_id": "A-17"})[:-1]


def test_the_core_kits_responses_are_replies_with_a_left_out_id_generated_the_same_each_time() -> None:
    scripted = ScriptedResponse(
        text="Let me look.",
        tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "7"}, ""),),
        input_tokens=30,
    )
    reply = api_reply(scripted, 2)
    assert reply == ApiReply(
        text="Let me look.",
        tool_uses=[ApiToolUse("toolu_002_1", "lookup_order", {"order_id": "7"})],
        input_tokens=30,
    )
    assert api_reply(scripted, 2) == reply
    with_id = ScriptedToolCall("refund_order", {"order_id": "7"}, "refund-1")
    assert api_reply(ScriptedResponse(tool_calls=(with_id,)), 4).tool_uses[0].tool_use_id == "refund-1"
    assert api_reply(ScriptedResponse(turn_error="too long"), 0) == ApiReply(
        error_status=400, error_message="too long"
    )
    # A list may mix both shapes.
    api = ScriptedClaudeApi([scripted, ApiReply(text="Done.")])
    assert api._replies[0] == api_reply(scripted, 0)  # pyright: ignore[reportPrivateUsage]
