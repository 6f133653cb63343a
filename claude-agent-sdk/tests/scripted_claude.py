"""The tests' Claude harness agents: the public scripted Messages API in script-store mode, the matrix tools.

Every run starts the real bundled Claude Code CLI, which calls `SCRIPTED_API`
(`dex_agents_claude_agent_sdk.testing.ScriptedClaudeApi.from_script_store`) on loopback. The matrix tools
become SDK `@tool` tools. They run for real only inside `execute_deferred_tool_call` (through
`run_scripted_tool`) or, for reads, inline in the CLI (through `run_inline_scripted_tool`, which logs the
run with the model call's attempt), so tests can count every real run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, ToolAnnotations, tool
from dex_agents import current_tool_execution
from dex_agents.testing import ScriptStore, run_inline_scripted_tool, run_scripted_tool

from dex_agents_claude_agent_sdk import OptionsFactory
from dex_agents_claude_agent_sdk.testing import ScriptedClaudeApi


def unexpected_requests_log(state_dir: Path) -> Path:
    """Where a Worker's scripted API logs every request other than `POST /v1/messages`."""
    return state_dir / "unexpected-api-requests.log"


def _log_unexpected(request: str) -> None:
    with unexpected_requests_log(ScriptStore.from_environment().state_dir).open("a", encoding="utf-8") as log:
        log.write(request + "\n")


SCRIPTED_API = ScriptedClaudeApi.from_script_store(on_unexpected=_log_unexpected)
"""This process's scripted model: answers every run from the stack's script store."""

BASE_OPTIONS = ClaudeAgentOptions(model="claude-sonnet-4-5", setting_sources=[])
"""The options every scripted run starts from (no built-in tools, no settings files)."""

scripted_options = SCRIPTED_API.options(BASE_OPTIONS)
"""The runner's options factory: route each `RunModel` call's requests to the scripted model."""


def scripted_options_with(**changes: Any) -> OptionsFactory:
    """An options factory like `scripted_options`, starting from options with ``changes``."""
    return SCRIPTED_API.options(dataclasses.replace(BASE_OPTIONS, **changes))


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
