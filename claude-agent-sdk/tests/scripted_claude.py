"""The scripted model in the Claude harness's own model slot: the Messages API the real CLI calls.

Each Worker process runs one `AnthropicApiServer` on loopback. `scripted_options` is the runner's options
factory: it registers the `RunModel` call in progress (session, turn, attempt, Step execution) under a
token and points the CLI's `ANTHROPIC_BASE_URL` at `/scope/<token>`, so every request the CLI makes names
the call it belongs to. The server renders what the model sees as texts and answers from
`dex_agents.testing`'s script store. A `RunModel` of the harness may make several model calls (reads run
inline), so the position in the turn's script also counts the tool results the request already holds.

The matrix tools become SDK `@tool` tools. They run for real only inside `execute_deferred_tool_call`
(through `run_scripted_tool`) or, for reads, inline in the CLI (through `run_inline_scripted_tool`, which
logs the run with the model call's attempt), so tests can count every real run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, ToolAnnotations, tool
from dex_agents import AgentTurnContext, current_tool_execution
from dex_agents.testing import (
    ModelCallScope,
    ScriptStore,
    current_model_call,
    model_call_scope,
    run_inline_scripted_tool,
    run_scripted_tool,
    scripted_model_response,
)

from dex_agents_claude_agent_sdk import OptionsFactory
from dex_agents_claude_agent_sdk.testing import AnthropicApiServer, ApiReply, ApiRequest, ApiToolUse

TOOL_PREFIX = "mcp__dex__"
TEST_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-dummy-local-test",
    # A scripted failure is a 500; the CLI would otherwise retry it itself with back-off.
    "CLAUDE_CODE_MAX_RETRIES": "0",
}

_scopes: dict[str, ModelCallScope] = {}
_tokens = itertools.count(1)
_servers: dict[int, AnthropicApiServer] = {}
"""This process's server (one at most, under key 0)."""
_server_locks: dict[int, asyncio.Lock] = {}


def _render(request: ApiRequest) -> tuple[list[str], set[str]]:
    """Return the texts a request shows the model, and the IDs of the tool calls it has results for."""
    texts: list[str] = []
    answered: set[str] = set()
    names: dict[str, str] = {}
    for message in request.messages:
        content = message.get("content")
        blocks = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else cast(list[dict[str, Any]], content)
        )
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                text = str(block.get("text", ""))
                if text.lstrip().startswith("<system-reminder>"):
                    continue
                texts.append(f"{message.get('role')}: {text}")
            elif kind == "tool_use":
                name = str(block.get("name", "")).removeprefix(TOOL_PREFIX)
                names[str(block.get("id"))] = name
                arguments = json.dumps(block.get("input", {}), sort_keys=True, separators=(",", ":"))
                texts.append(f"assistant calls {name} {arguments} [{block.get('id')}]")
            elif kind == "tool_result":
                call_id = str(block.get("tool_use_id"))
                answered.add(call_id)
                outcome = "error" if block.get("is_error") else "ok"
                texts.append(f"tool {names.get(call_id, '?')} [{call_id}] {outcome}: {_result_text(block)}")
    return texts, answered


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    parts = cast(list[dict[str, Any]], content or [])
    return "\n".join(
        str(part.get("text", ""))
        for part in parts
        if part.get("type") == "text"
        and not str(part.get("text", "")).lstrip().startswith("<system-reminder>")
    )


async def _respond(request: ApiRequest) -> ApiReply:
    scope = _scopes.get(request.prefix.removeprefix("/scope/"))
    if scope is None:
        raise RuntimeError(f"no RunModel call is registered under {request.prefix!r}")
    texts, answered = _render(request)
    call_scope = dataclasses.replace(scope, recorded_tool_call_ids=scope.recorded_tool_call_ids | answered)
    with model_call_scope(call_scope):
        response = await scripted_model_response(texts)
    if response.turn_error is not None:
        # A request the API refuses, which a retry would only repeat.
        return ApiReply(error_status=400, error_message=response.turn_error)
    return ApiReply(
        text=response.text,
        tool_uses=[
            ApiToolUse(call.tool_call_id, _cli_tool_name(call.tool_name), dict(call.arguments))
            for call in response.tool_calls
        ],
        input_tokens=response.input_tokens,
        output_tokens=response.output_tokens,
    )


def unexpected_requests_log(state_dir: Path) -> Path:
    """Where a Worker's scripted API logs every request other than `POST /v1/messages`."""
    return state_dir / "unexpected-api-requests.log"


def _log_unexpected(request: str) -> None:
    path = unexpected_requests_log(ScriptStore.from_environment().state_dir)
    with path.open("a", encoding="utf-8") as log:
        log.write(request + "\n")


def _cli_tool_name(name: str) -> str:
    # The harness's built-in tools start with a capital letter; the runner's tools live on its MCP server.
    return name if name[:1].isupper() else f"{TOOL_PREFIX}{name}"


async def scripted_server() -> AnthropicApiServer:
    """Return this process's scripted API server, started on first use."""
    lock = _server_locks.setdefault(0, asyncio.Lock())
    async with lock:
        if 0 not in _servers:
            server = AnthropicApiServer(_respond, on_unexpected=_log_unexpected)
            await server.start()
            _servers[0] = server
    return _servers[0]


def base_options() -> ClaudeAgentOptions:
    """The options every scripted run starts from (no built-in tools, nothing but loopback)."""
    return ClaudeAgentOptions(model="claude-sonnet-4-5", env=dict(TEST_ENV), setting_sources=[])


async def scripted_options(turn: AgentTurnContext) -> ClaudeAgentOptions:
    """The runner's options factory: route this `RunModel` call's requests to the scripted model."""
    return await _routed(base_options(), turn)


def scripted_options_with(**changes: Any) -> OptionsFactory:
    """An options factory like `scripted_options`, starting from options with ``changes``."""

    async def factory(turn: AgentTurnContext) -> ClaudeAgentOptions:
        return await _routed(dataclasses.replace(base_options(), **changes), turn)

    return factory


async def _routed(options: ClaudeAgentOptions, turn: AgentTurnContext) -> ClaudeAgentOptions:
    del turn
    scope = current_model_call()
    if scope is None:
        raise RuntimeError("the scripted options ran outside a RunModel call scope")
    server = await scripted_server()
    token = f"t{os.getpid()}-{next(_tokens)}"
    _scopes[token] = scope
    options.env["ANTHROPIC_BASE_URL"] = server.base_url(f"/scope/{token}")
    return options


async def _run_matrix_tool(name: str, arguments: Mapping[str, Any]) -> str:
    if current_tool_execution() is not None:
        return await run_scripted_tool(name, arguments)
    # An inline read: the CLI runs it inside RunModel, so it logs itself with the model call's attempt.
    return await run_inline_scripted_tool(name, arguments)


def matrix_tool(name: str, description: str, *, read_only: bool | None = None) -> SdkMcpTool[Any]:
    """An SDK tool taking ``order_id`` that runs the matrix's scripted tool of that name."""
    annotations = ToolAnnotations(readOnlyHint=read_only) if read_only is not None else None

    @tool(name, description, {"order_id": str}, annotations=annotations)
    async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        text = await _run_matrix_tool(name, arguments)
        return {"content": [{"type": "text", "text": text}]}

    return handler


def matrix_tools() -> Sequence[SdkMcpTool[Any]]:
    """The matrix's four tools as SDK tools (their effects come from the matrix's session policies)."""
    return (
        matrix_tool("lookup_order", "Look up an order's status.", read_only=True),
        matrix_tool("send_receipt", "Email the receipt of an order."),
        matrix_tool("refund_order", "Refund an order."),
        matrix_tool("cancel_order", "Cancel an order."),
    )
