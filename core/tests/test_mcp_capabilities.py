"""The source's client capabilities against the official server-everything, in process (no session).

The session's side is played by `SessionSide`, and a question's answer is put on the record as
`AwaitQuestionAnswer` puts it, so each case runs exactly the tool Steps a session would run. The servers are
the pinned npm packages of ``tests/mcp_servers``; ``sampling-anyway.mjs`` there sends sampling undeclared.
"""

import asyncio
import dataclasses
import os
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from dex_agents import (
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
)
from dex_agents.mcp import McpHttpServer, McpServer, McpStdioServer, McpToolSource
from dex_agents.mcp._capabilities import SAMPLING_REFUSAL
from dex_agents.runner import DeferredToolExecution
from dex_agents.testing import ScriptedRunner, SessionSide, wait_until
from dex_agents.values import QuestionAnswer
from tests.mcp_everything_agent import EVERYTHING_BIN

pytestmark = pytest.mark.asyncio(loop_scope="module")

_SERVERS_DIR = EVERYTHING_BIN.parents[2]
_FORM_TOOL = "trigger-elicitation-request"


def everything(
    *, roots: Sequence[str] = (), effect: ToolEffect = ToolEffect.READ, url: str | None = None
) -> McpServer:
    policies = {_FORM_TOOL: ToolPolicy(effect, requires_approval=False)}
    if url is not None:
        return McpHttpServer("everything", url, tool_policies=policies, roots=roots)
    return McpStdioServer("everything", str(EVERYTHING_BIN), ["stdio"], tool_policies=policies, roots=roots)


async def execution(source: McpToolSource, tool_name: str, arguments: str = "{}") -> DeferredToolExecution:
    """List, defer one call as `RunModel` does, and return its tool Step's execution."""
    await source.list_tools()
    side = SessionSide()
    side.start_turn(ScriptedRunner(tools=()).build_user_message("Go"))
    call = source.deferred_tool_call(
        side.context(), tool_call_id="call-1", tool_name=tool_name, arguments=arguments
    )
    side.defer(ToolCallsRequested(framework_run_state="{}", tool_calls=[call]))
    return side.execution("call-1")


def answered(run: DeferredToolExecution, asked: ToolInputRequested, answer: str) -> DeferredToolExecution:
    """The next tool Step's execution once the user answered ``asked``, as the session stores it."""
    record = run.tool_call
    interrupt_id = f"{record.tool_call_id}-input-{len(record.input_answers) + 1}"
    record = dataclasses.replace(
        record,
        input_continuation=asked.continuation,
        input_answers=(*record.input_answers, QuestionAnswer(interrupt_id, asked.question, answer)),
    )
    return dataclasses.replace(run, tool_call=record)


async def test_the_capabilities_decide_which_of_server_everythings_tools_are_offered() -> None:
    with_roots = {
        tool.mcp_name for tool in await McpToolSource([everything(roots=["file:///srv"])]).list_tools()
    }
    without = {tool.mcp_name for tool in await McpToolSource([everything()]).list_tools()}

    elicitation = {"trigger-elicitation-request", "trigger-url-elicitation"}
    assert elicitation <= with_roots and elicitation <= without
    assert "get-roots-list" in with_roots and "get-roots-list" not in without, "roots only where configured"
    # Sampling is never declared, and the *-async tools need the client to run tasks for the server.
    hidden = {
        "trigger-sampling-request",
        "trigger-sampling-request-async",
        "trigger-elicitation-request-async",
    }
    assert not hidden & (with_roots | without)


async def test_the_answers_decline_and_cancel_reach_the_server() -> None:
    source = McpToolSource([everything()])
    for answer, told in (("decline", "❌ User declined"), ("cancel", "⚠️ User cancelled")):
        run = await execution(source, f"everything__{_FORM_TOOL}")
        asked = await source.call_tool(run)
        assert isinstance(asked, ToolInputRequested), asked
        outcome = await source.call_tool(answered(run, asked, answer))
        assert isinstance(outcome, ToolExecutionResult), outcome
        assert outcome.output.startswith(told), outcome.output
        assert f'"action": "{answer}"' in outcome.output


async def test_a_write_that_must_not_run_twice_gets_cancel_and_asks_nothing() -> None:
    source = McpToolSource([everything(effect=ToolEffect.NON_IDEMPOTENT_WRITE)])
    run = await execution(source, f"everything__{_FORM_TOOL}")
    assert run.tool_call.effect is ToolEffect.NON_IDEMPOTENT_WRITE

    outcome = await source.call_tool(run)

    assert isinstance(outcome, ToolExecutionResult), outcome
    assert outcome.output.startswith("⚠️ User cancelled the elicitation dialog."), outcome.output


async def test_sampling_sent_anyway_is_refused_with_the_reason() -> None:
    server = McpStdioServer(
        "summarizer",
        "node",
        [str(_SERVERS_DIR / "sampling-anyway.mjs")],
        tool_policies={"summarize": ToolPolicy(ToolEffect.READ, requires_approval=False)},
    )
    source = McpToolSource([server])
    run = await execution(source, "summarizer__summarize")

    with pytest.raises(ToolExecutionError) as raised:
        await source.call_tool(run)

    assert f"MCP error -32601: {SAMPLING_REFUSAL}" in raised.value.message, raised.value.message


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def everything_http(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    port = _free_port()
    log = (tmp_path_factory.mktemp("everything-http") / "server.log").open("w")
    process = await asyncio.create_subprocess_exec(
        str(EVERYTHING_BIN),
        "streamableHttp",
        env={**os.environ, "PORT": str(port)},
        stdout=log,
        stderr=asyncio.subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    async def listening() -> bool:
        try:
            async with httpx.AsyncClient() as client:
                await client.get(url, timeout=1)
        except httpx.TransportError:
            return False
        return True

    try:
        await wait_until("server-everything on Streamable HTTP", listening)
        yield url
    finally:
        process.kill()
        await process.wait()
        log.close()


async def test_over_streamable_http_the_elicitation_is_asked_and_the_answer_reaches_the_server(
    everything_http: str,
) -> None:
    source = McpToolSource([everything(url=everything_http, roots=[Path("/srv/shared").as_uri()])])
    run = await execution(source, f"everything__{_FORM_TOOL}")
    asked = await source.call_tool(run)
    assert isinstance(asked, ToolInputRequested), asked

    outcome = await source.call_tool(answered(run, asked, '{"name": "Grace"}'))

    assert isinstance(outcome, ToolExecutionResult), outcome
    assert outcome.output.startswith(
        "✅ User provided the requested information!\nUser inputs:\n- Name: Grace\n"
    )


async def test_an_input_required_answer_is_asked_then_the_call_is_sent_afresh_and_given_the_answer(
    tmp_path: Path,
) -> None:
    log = tmp_path / "desk.log"
    server = McpStdioServer(
        "desk",
        sys.executable,
        [str(Path(__file__).with_name("mcp_input_required_server.py")), str(log)],
        roots=["file:///srv/desk"],
        # input_required means the server ran nothing yet, so even a write is asked about.
        tool_policies={"ship": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)},
    )
    source = McpToolSource([server])
    run = await execution(source, "desk__ship", '{"sku": "A-1"}')
    asked = await source.call_tool(run)
    assert isinstance(asked, ToolInputRequested), asked
    assert (asked.question, asked.choices, asked.allows_free_text) == (
        "Which carrier ships A-1?",
        ("decline", "cancel"),
        True,
    )
    assert not log.exists(), "the tool ran before it had its input"

    outcome = await source.call_tool(answered(run, asked, "DHL"))

    assert isinstance(outcome, ToolExecutionResult), outcome
    assert outcome.output == "shipped A-1 with DHL from file:///srv/desk"
    assert log.read_text().splitlines() == ["shipped A-1 DHL"]
