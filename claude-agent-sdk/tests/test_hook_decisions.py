"""Unit tests of the `PreToolUse` decisions, fed a scripted stream the way the CLI delivers it.

The CLI calls the hook for a tool use while the response is still streaming; the hook must decide with
the whole response in view. These tests stream events into a run by hand and check each decision.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ResultMessage,
    StreamEvent,
    TextBlock,
    ToolAnnotations,
    tool,
)
from claude_agent_sdk.types import HookContext, HookInput
from dex_agents import (
    ASK_USER,
    AgentEvent,
    AgentEventWriter,
    AgentTurnContext,
    ModelCallMetadata,
    ModelToolDescription,
    ToolEffect,
    ToolPolicy,
    UnfinishedModelResponse,
)

from dex_agents_claude_agent_sdk import REFUSED_TOOL_CALL_MESSAGE
from dex_agents_claude_agent_sdk._call_metadata import RunRequest, run_request
from dex_agents_claude_agent_sdk._gate import UNFINISHED_RESPONSE_MESSAGE, HarnessRun
from dex_agents_claude_agent_sdk._turn_tools import gather_run_tools


@tool("lookup", "Read.", {"id": str}, annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "found"}]}


@tool("refund", "Write.", {"id": str})
async def refund(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "refunded"}]}


async def _heartbeat() -> None:
    return None


async def make_run(
    policies: dict[str, ToolPolicy] | None = None, built_ins: tuple[str, ...] = ()
) -> tuple[HarnessRun, list[AgentEvent]]:
    events: list[AgentEvent] = []
    writer = AgentEventWriter(events.append, "turn-1", 1, "RunModel-1")
    turn = AgentTurnContext(
        flow_id="s",
        turn_id="turn-1",
        attempt=1,
        messages=(),
        framework_run_state=None,
        tool_calls={},
        events=writer,
        tool_policies=policies or {"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)},
        default_tool_effect=ToolEffect.UNCLASSIFIED,
        heartbeat_function=_heartbeat,
        enabled_built_in_tools=built_ins,
    )
    tools = await gather_run_tools(turn, {"lookup": lookup, "refund": refund}, ())
    return HarnessRun(turn=turn, tools=tools, inline_read_tools=True), events


def stream(
    run: HarnessRun, *uses: tuple[str, str], text: str = "", stop_reason: str | None = "tool_use"
) -> list[StreamEvent]:
    """The stream events of one response with ``text`` and tool uses ``(id, CLI name)``."""
    raw: list[dict[str, Any]] = [{"type": "message_start", "message": {"id": "msg_1"}}]
    if text:
        raw.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
    raw += [
        {"type": "content_block_start", "content_block": {"type": "tool_use", "id": i, "name": n}}
        for i, n in uses
    ]
    if stop_reason is not None:
        raw.append({"type": "message_delta", "delta": {"stop_reason": stop_reason}})
    raw.append({"type": "message_stop"})
    return [StreamEvent(uuid=str(n), session_id="cli", event=event) for n, event in enumerate(raw)]


async def decide(run: HarnessRun, tool_use_id: str, name: str) -> dict[str, Any]:
    """The hook's `hookSpecificOutput` for one call (empty when the hook makes no decision)."""
    data = cast(HookInput, {"tool_name": name, "tool_input": {"id": "A"}, "tool_use_id": tool_use_id})
    output = await run.pre_tool_use(data, tool_use_id, cast(HookContext, {"signal": None}))
    return cast(dict[str, Any], cast(dict[str, Any], output).get("hookSpecificOutput", {}))


async def test_the_hook_waits_for_the_whole_response_and_defers_its_last_tool_use() -> None:
    run, _ = await make_run()
    events = stream(run, ("w1", "mcp__dex__refund"), ("w2", "mcp__dex__refund"), ("r1", "mcp__dex__lookup"))
    # The CLI asks about w1 while the response still streams: the hook must not decide yet.
    first = asyncio.ensure_future(decide(run, "w1", "mcp__dex__refund"))
    for event in events[:2]:
        run.observe(event, run.turn.events)
    await asyncio.sleep(0)
    assert not first.done()
    for event in events[2:]:
        run.observe(event, run.turn.events)
    assert await first == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": REFUSED_TOOL_CALL_MESSAGE.format(tool="refund"),
    }
    assert (await decide(run, "w2", "mcp__dex__refund"))["permissionDecision"] == "deny"
    # The last tool use is a read; it is deferred so the CLI can resume the run.
    assert (await decide(run, "r1", "mcp__dex__lookup"))["permissionDecision"] == "defer"
    assert [call.tool_use_id for call in run.deferrals] == ["r1"]


async def test_reads_alone_run_inline_and_tools_the_runner_does_not_own_get_no_decision() -> None:
    run, _ = await make_run()
    uses = [("r1", "mcp__dex__lookup"), ("b1", "Bash"), ("x1", "mcp__other__delete_everything")]
    for event in stream(run, *uses, ("r2", "mcp__dex__lookup")):
        run.observe(event, run.turn.events)
    assert (await decide(run, "r1", "mcp__dex__lookup"))["permissionDecision"] == "allow"
    # Not the runner's to allow: the user's permission mode, allowed tools and can_use_tool decide.
    assert await decide(run, "b1", "Bash") == {}
    assert await decide(run, "x1", "mcp__other__delete_everything") == {}
    assert (await decide(run, "r2", "mcp__dex__lookup"))["permissionDecision"] == "allow"
    assert run.deferrals == []


async def test_a_write_before_a_built_in_is_refused_and_nothing_is_deferred() -> None:
    run, _ = await make_run()
    for event in stream(run, ("r1", "mcp__dex__lookup"), ("w1", "mcp__dex__refund"), ("b1", "Bash")):
        run.observe(event, run.turn.events)
    assert (await decide(run, "r1", "mcp__dex__lookup"))["permissionDecision"] == "allow"
    assert (await decide(run, "w1", "mcp__dex__refund"))["permissionDecision"] == "deny"
    assert await decide(run, "b1", "Bash") == {}
    assert run.deferrals == []


async def test_text_deltas_are_forwarded_as_they_stream() -> None:
    run, events = await make_run()
    for event in stream(run, text="Hello"):
        run.observe(event, run.turn.events)
    assert [(event.type, event.payload) for event in events] == [("text_delta", '{"text":"Hello"}')]


async def test_a_read_that_needs_approval_is_deferred_like_a_write() -> None:
    run, _ = await make_run({"lookup": ToolPolicy(ToolEffect.READ, requires_approval=True)})
    for event in stream(run, ("r1", "mcp__dex__lookup")):
        run.observe(event, run.turn.events)
    assert (await decide(run, "r1", "mcp__dex__lookup"))["permissionDecision"] == "defer"


async def test_without_inline_reads_every_call_of_the_runner_is_deferred_or_refused() -> None:
    run, _ = await make_run()
    run.inline_read_tools = False
    for event in stream(run, ("r1", "mcp__dex__lookup"), ("r2", "mcp__dex__lookup")):
        run.observe(event, run.turn.events)
    assert (await decide(run, "r1", "mcp__dex__lookup"))["permissionDecision"] == "deny"
    assert (await decide(run, "r2", "mcp__dex__lookup"))["permissionDecision"] == "defer"


async def test_a_built_in_call_is_always_deferred_and_a_user_tool_of_its_name_is_not_offered() -> None:
    run, _ = await make_run(built_ins=(ASK_USER,))
    assert run.tools.by_name[ASK_USER].is_built_in
    # The session carries a built-in out: even beside reads only, it never runs inline.
    for event in stream(run, ("r1", "mcp__dex__lookup"), ("a1", "mcp__dex__ask_user")):
        run.observe(event, run.turn.events)
    assert (await decide(run, "r1", "mcp__dex__lookup"))["permissionDecision"] == "allow"
    assert (await decide(run, "a1", "mcp__dex__ask_user"))["permissionDecision"] == "defer"
    assert [call.tool_name for call in run.deferrals] == [ASK_USER]


async def test_a_response_that_stops_without_a_stop_reason_fails_the_run_and_its_calls_are_refused() -> None:
    run, _ = await make_run()
    events = stream(run, ("w1", "mcp__dex__refund"), text="I will refund", stop_reason=None)
    waiting = asyncio.ensure_future(decide(run, "w1", "mcp__dex__refund"))
    for event in events[:-1]:
        run.observe(event, run.turn.events)
    with pytest.raises(UnfinishedModelResponse, match="msg_1 stopped without a stop_reason"):
        run.observe(events[-1], run.turn.events)
    # The hook that waited for the response neither defers nor allows the call of a partial answer.
    assert await waiting == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": UNFINISHED_RESPONSE_MESSAGE,
    }
    assert run.deferrals == []


def _assistant(message_id: str, model: str = "claude-x") -> AssistantMessage:
    return AssistantMessage(content=[TextBlock("It was")], model=model, message_id=message_id)


async def test_a_stream_that_broke_off_fails_the_run_whatever_the_cli_does_next() -> None:
    def cut_stream() -> list[StreamEvent]:
        return stream(run, text="It was")[:2]  # message_start and a delta, then nothing

    # The CLI starts another response (it asks the model to resume).
    run, _ = await make_run()
    for event in cut_stream():
        run.observe(event, run.turn.events)
    with pytest.raises(UnfinishedModelResponse, match="msg_1 ended without message_stop"):
        run.observe(stream(run, text="again")[0], run.turn.events)

    # The CLI asks again without streaming: a whole answer, but the events hold the partial text.
    run, _ = await make_run()
    for event in cut_stream():
        run.observe(event, run.turn.events)
    with pytest.raises(UnfinishedModelResponse, match="without streaming"):
        run.observe(_assistant("msg_fallback"), run.turn.events)

    # The CLI ends the run.
    run, _ = await make_run()
    for event in cut_stream():
        run.observe(event, run.turn.events)
    result = ResultMessage("success", 1, 1, is_error=False, num_turns=1, session_id="cli", stop_reason=None)
    with pytest.raises(UnfinishedModelResponse, match="msg_1 ended without message_stop"):
        run.observe(result, run.turn.events)

    # The streamed response's own assistant messages and the CLI's own texts are no such thing.
    run, _ = await make_run()
    for event in stream(run, text="Done.", stop_reason="end_turn"):
        run.observe(event, run.turn.events)
    run.observe(_assistant("msg_1"), run.turn.events)
    run.observe(_assistant("synthetic-1", model="<synthetic>"), run.turn.events)
    assert run.unfinished is None


async def test_the_run_reports_the_last_model_responses_metadata() -> None:
    run, _ = await make_run()
    for event in [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x-1"}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
        {
            "type": "message_start",
            "message": {"id": "msg_2", "model": "claude-x-1", "usage": {"cache_creation_input_tokens": 12}},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]:
        run.observe(StreamEvent(uuid="u", session_id="cli", event=event), run.turn.events)
    metadata = run.model_call_metadata(RunRequest(model="claude-x"))
    assert metadata == ModelCallMetadata(
        "claude-x",
        "claude-x-1",
        "anthropic",
        "msg_2",
        ("end_turn",),
        is_streaming=True,
        cache_creation_input_tokens=12,
    )


def test_a_runs_request_names_its_endpoint_prompt_and_tools_from_its_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://worker-default.example")
    lookup = ModelToolDescription("lookup_order", "Look up an order.", '{"type":"object"}')
    options = ClaudeAgentOptions(
        model="claude-x",
        system_prompt={"type": "custom", "prompt": "You are the order desk."},
        env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:8123/run-1"},
    )
    # The options' env wins over the Worker's, as the SDK starts the CLI.
    assert run_request(options, [lookup]) == RunRequest(
        "claude-x", "127.0.0.1", 8123, "You are the order desk.", (lookup,)
    )
    # Claude Code's preset prompt is the CLI's own text; an endpoint without a port has its scheme's.
    preset = ClaudeAgentOptions(system_prompt={"type": "preset", "preset": "claude_code", "append": "Hi."})
    assert run_request(preset, []) == RunRequest(None, "worker-default.example", 443)
    # On Bedrock the CLI does not call the Messages API at ANTHROPIC_BASE_URL.
    bedrock = ClaudeAgentOptions(env={"CLAUDE_CODE_USE_BEDROCK": "1"})
    assert run_request(bedrock, []).server_address is None
