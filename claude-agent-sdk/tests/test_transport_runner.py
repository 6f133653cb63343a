"""`ClaudeAgentRunner` through a scripted CLI `Transport`: the runner's own decisions, with no subprocess.

Each test drives `run_model_step` as the session would, with `tests.scripted_transport.ScriptedCli` playing
the CLI's stream-JSON control protocol (initialize, hook callbacks, `mcp_message` tool calls, stream
events, results). What the model reads is asserted on the scripted CLI's log.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    CanUseToolShadowedWarning,
    ClaudeAgentOptions,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolAnnotations,
    ToolPermissionContext,
    tool,
)
from dex_agents import (
    DEFAULT_REJECTION_TOOL_RESULT,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentEvent,
    AgentEventWriter,
    AgentMessage,
    AgentToolCall,
    AgentTurnContext,
    ContextWindowExceeded,
    MessageRole,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.mcp import McpHttpServer, McpToolSource
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import start_mcp_inventory_http_server

from dex_agents_claude_agent_sdk import REFUSED_TOOL_CALL_MESSAGE, ClaudeAgentRunner, ClaudeRunState
from dex_agents_claude_agent_sdk import (
    _gate as gate_module,  # pyright: ignore[reportPrivateUsage]
)
from dex_agents_claude_agent_sdk.testing import ApiReply, ApiToolUse
from tests.scripted_transport import LOST_TOOL_RESULT, ScriptedCli

ran: list[tuple[str, dict[str, Any]]] = []


@tool("lookup", "Look an order up.", {"id": str}, annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
    ran.append(("lookup", arguments))
    return {"content": [{"type": "text", "text": f"order {arguments['id']} shipped"}]}


@tool("refund", "Refund an order.", {"id": str})
async def refund(arguments: dict[str, Any]) -> dict[str, Any]:
    ran.append(("refund", arguments))
    return {"content": [{"type": "text", "text": "refunded"}]}


@tool(
    "reindex",
    "Rebuild the search index.",
    {},
    annotations=ToolAnnotations(idempotentHint=True, destructiveHint=False),
)
async def reindex(arguments: dict[str, Any]) -> dict[str, Any]:
    ran.append(("reindex", arguments))
    return {"content": [{"type": "text", "text": "reindexed"}]}


def cached(text: str = "", tool_uses: Sequence[ApiToolUse] = ()) -> ApiReply:
    """A reply that reports cache use too: 10 input, 3 cache-read, 2 cache-write and 5 output tokens."""
    return ApiReply(text, tool_uses, cache_read_input_tokens=3, cache_creation_input_tokens=2)


@pytest.fixture(autouse=True)
def clear_ran() -> None:
    ran.clear()


async def _heartbeat() -> None:
    return None


def turn(
    events: list[AgentEvent],
    run_state: str | None = None,
    tool_calls: dict[str, AgentToolCall] | None = None,
    attempt: int = 1,
) -> AgentTurnContext:
    prompt = AgentMessage(
        sequence=1,
        turn_id="turn-1",
        role=MessageRole.USER,
        text="Refund order A",
        tool_call_id=None,
        tool_name=None,
        tool_arguments=None,
        tool_output=None,
        framework_item=json.dumps({"type": "user", "text": "Refund order A"}),
        created_at="2026-11-29T00:00:00Z",
    )
    return AgentTurnContext(
        flow_id="session-1",
        turn_id="turn-1",
        attempt=attempt,
        messages=(prompt,),
        framework_run_state=run_state,
        tool_calls=tool_calls or {},
        events=AgentEventWriter(events.append, "turn-1", attempt, "RunModel-1"),
        tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)},
        default_tool_effect=ToolEffect.UNCLASSIFIED,
        heartbeat_function=_heartbeat,
    )


def runner(cli: ScriptedCli, **kwargs: Any) -> ClaudeAgentRunner:
    return ClaudeAgentRunner(tools=[lookup, refund, reindex], transport_factory=cli.transport, **kwargs)


def use(tool_use_id: str, name: str, **arguments: Any) -> ApiToolUse:
    return ApiToolUse(tool_use_id, name, arguments)


def record(call_id: str, status: ToolCallStatus, tool_name: str = "refund", **fields: Any) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name=tool_name,
        arguments='{"id": "A"}',
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=status,
        **fields,
    )


async def test_a_write_ends_the_run_and_becomes_the_one_deferred_call_with_its_policy() -> None:
    cli = ScriptedCli([ApiReply("Refunding.", [use("toolu_w", "refund", id="A")])])
    outcome = await runner(cli).run_model_step(turn([]))

    assert isinstance(outcome, ToolCallsRequested)
    [call] = outcome.tool_calls
    assert (call.tool_call_id, call.tool_name, json.loads(call.arguments)) == (
        "toolu_w",
        "refund",
        {"id": "A"},
    )
    assert call.policy == ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)
    assert call.policy.is_approval_required
    assert ran == []  # the write never ran inside the model step
    assert cli.prompts == ["Refund order A"]
    assert cli.hook_decisions == [("toolu_w", "defer", None)]
    # The CLI sees every tool through the runner's shims.
    assert sorted(cli.listed_tools[0]) == ["lookup", "refund", "reindex"]
    state = ClaudeRunState.from_json(outcome.framework_run_state)
    assert state.pending.tool_use_id == "toolu_w"
    assert [item["type"] for item in state.turn_items] == ["text", "tool_use"]
    # The run's transcript travels in the state, not on disk.
    assert any(entry.get("type") == "assistant" for entry in state.turn_entries)


async def test_an_annotated_idempotent_write_is_deferred_with_the_effect_its_hint_declares() -> None:
    cli = ScriptedCli([ApiReply(tool_uses=[use("toolu_i", "reindex")])])
    outcome = await runner(cli).run_model_step(turn([]))

    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)
    assert not outcome.tool_calls[0].policy.is_approval_required


async def test_an_annotated_tool_that_is_not_said_to_be_harmless_asks_for_approval() -> None:
    # The application's own annotations count, but as MCP defines them: without destructiveHint=False a
    # write may destroy something, so it asks first, however safe it is to retry.
    @tool("purge_cache", "Empty the cache.", {}, annotations=ToolAnnotations(idempotentHint=True))
    async def purge_cache(arguments: dict[str, Any]) -> dict[str, Any]:
        ran.append(("purge_cache", arguments))
        return {"content": [{"type": "text", "text": "purged"}]}

    cli = ScriptedCli([ApiReply(tool_uses=[use("toolu_p", "purge_cache")])])
    outcome = await ClaudeAgentRunner(tools=[purge_cache], transport_factory=cli.transport).run_model_step(
        turn([])
    )

    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)
    assert ran == []


async def test_an_mcp_sources_read_only_hint_runs_inline_only_when_its_server_is_trusted(
    tmp_path: Path,
) -> None:
    log = tmp_path / "shipping.log"

    def calls() -> list[str]:
        return [line for line in log.read_text().splitlines() if line.startswith("tools/call")]

    count = use("toolu_c", "shipping__count_items", sku="A-1")
    async with await start_mcp_inventory_http_server(log) as server:
        # Whoever answers at the URL may claim readOnlyHint; untrusted, the claim gets the call no inline run.
        untrusted = McpToolSource([McpHttpServer("shipping", server.url)])
        cli = ScriptedCli([ApiReply(tool_uses=[count])])
        outcome = await ClaudeAgentRunner(tools=[untrusted], transport_factory=cli.transport).run_model_step(
            turn([])
        )

        assert isinstance(outcome, ToolCallsRequested)
        [call] = outcome.tool_calls
        assert call.policy == ToolPolicy(ToolEffect.UNCLASSIFIED) and call.policy.is_approval_required
        assert cli.hook_decisions == [("toolu_c", "defer", None)]
        assert calls() == [], "the call waits for approval and has not reached the server"

        trusted = McpToolSource([McpHttpServer("shipping", server.url, trust_annotations=True)])
        cli = ScriptedCli([ApiReply(tool_uses=[count]), ApiReply("A-1 has 7.")])
        outcome = await ClaudeAgentRunner(tools=[trusted], transport_factory=cli.transport).run_model_step(
            turn([])
        )

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert cli.hook_decisions == [("toolu_c", "allow", None)]
    assert cli.model_inputs[1] == [("toolu_c", "A-1: 7 in stock", False)]
    assert calls() == ["tools/call count_items"]


async def test_a_read_runs_inline_and_the_cli_calls_the_model_again_in_the_same_run() -> None:
    cli = ScriptedCli(
        [
            ApiReply("Checking.", [use("toolu_r", "lookup", id="A")]),
            ApiReply("Order A shipped."),
        ]
    )
    outcome = await runner(cli).run_model_step(turn([]))

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert ran == [("lookup", {"id": "A"})]
    assert cli.hook_decisions == [("toolu_r", "allow", None)]
    assert cli.model_inputs == [[], [("toolu_r", "order A shipped", False)]]
    assert [(m.role, m.text, m.tool_name, m.tool_output) for m in outcome.new_messages] == [
        (MessageRole.ASSISTANT, "Checking.", None, None),
        (MessageRole.ASSISTANT, None, "lookup", None),
        (MessageRole.TOOL, None, "lookup", "order A shipped"),
        (MessageRole.ASSISTANT, "Order A shipped.", None, None),
    ]
    assert json.loads(outcome.new_messages[-1].framework_item)["cli_session"]["entries"]


async def test_a_retried_model_step_runs_its_inline_read_again() -> None:
    # At least once: a RunModel retry is a whole new CLI run, reads included.
    script = [ApiReply(tool_uses=[use("toolu_r", "lookup", id="A")]), ApiReply("Shipped.")]
    cli = ScriptedCli([*script, *script])
    for attempt in (1, 2):
        outcome = await runner(cli).run_model_step(turn([], attempt=attempt))
        assert isinstance(outcome, TurnCompleted)
    assert ran == [("lookup", {"id": "A"}), ("lookup", {"id": "A"})]


async def test_several_writes_in_one_response_defer_the_last_and_refuse_the_others() -> None:
    cli = ScriptedCli(
        [
            ApiReply(
                tool_uses=[
                    use("toolu_1", "refund", id="A"),
                    use("toolu_2", "lookup", id="A"),
                    use("toolu_3", "refund", id="B"),
                    use("toolu_4", "refund", id="C"),
                ]
            ),
            ApiReply("Refunded C; A and B next."),
        ]
    )
    events: list[AgentEvent] = []
    first = await runner(cli).run_model_step(turn(events))

    assert isinstance(first, ToolCallsRequested)
    assert [(c.tool_call_id, json.loads(c.arguments)) for c in first.tool_calls] == [("toolu_4", {"id": "C"})]
    refusal = REFUSED_TOOL_CALL_MESSAGE.format(tool="refund")
    assert cli.hook_decisions == [
        ("toolu_1", "deny", refusal),
        ("toolu_2", "allow", None),  # a read before the deferred call still runs inline
        ("toolu_3", "deny", refusal),
        ("toolu_4", "defer", None),
    ]
    assert ran == [("lookup", {"id": "A"})]

    # The deferred call ran in its Step; the resumed run answers it and the model reads every result.
    calls = {"toolu_4": record("toolu_4", ToolCallStatus.SUCCEEDED, output="refunded C")}
    second = await runner(cli).run_model_step(turn(events, first.framework_run_state, calls))
    assert isinstance(second, TurnCompleted) and second.turn_error is None
    hook_error = f"PreToolUse:mcp__dex__refund hook error: {refusal}"
    assert cli.model_inputs[-1] == [
        ("toolu_1", hook_error, True),
        ("toolu_2", "order A shipped", False),
        ("toolu_3", hook_error, True),
        ("toolu_4", "refunded C", False),
    ]
    assert ran == [("lookup", {"id": "A"})]  # refused writes never ran


@pytest.mark.parametrize(
    ("status", "fields", "seen", "is_error"),
    [
        (ToolCallStatus.SUCCEEDED, {"output": "refunded 10 EUR"}, "refunded 10 EUR", False),
        (ToolCallStatus.FAILED, {"error": "card declined"}, "The tool call failed: card declined", True),
        (ToolCallStatus.REJECTED, {"rejection_message": "Not this one."}, "Not this one.", True),
        (ToolCallStatus.REJECTED, {}, DEFAULT_REJECTION_TOOL_RESULT, True),
        (ToolCallStatus.OUTCOME_UNKNOWN, {}, OUTCOME_UNKNOWN_TOOL_RESULT, True),
    ],
)
async def test_resume_feeds_the_recorded_outcome_to_the_model_through_the_shim(
    status: ToolCallStatus, fields: dict[str, Any], seen: str, is_error: bool
) -> None:
    cli = ScriptedCli([ApiReply("Refunding.", [use("toolu_w", "refund", id="A")]), ApiReply("Noted.")])
    first = await runner(cli).run_model_step(turn([]))
    assert isinstance(first, ToolCallsRequested)

    calls = {"toolu_w": record("toolu_w", status, **fields)}
    second = await runner(cli).run_model_step(turn([], first.framework_run_state, calls))

    assert isinstance(second, TurnCompleted) and second.turn_error is None
    assert cli.model_inputs[-1] == [("toolu_w", seen, is_error)]
    assert ran == []  # the shim answered with the record; the tool itself did not run again
    assert cli.prompts == ["Refund order A"]  # a resume sends no second prompt
    # The resumed CLI got the first run's transcript from the run state.
    state = ClaudeRunState.from_json(first.framework_run_state)
    assert [e["uuid"] for e in cli.resumed_transcripts[0]] == [e["uuid"] for e in state.turn_entries]
    # The turn's messages span both runs, the recorded outcome included.
    assert [(m.role, m.text, m.tool_output) for m in second.new_messages] == [
        (MessageRole.ASSISTANT, "Refunding.", None),
        (MessageRole.ASSISTANT, None, None),
        (MessageRole.TOOL, None, seen),
        (MessageRole.ASSISTANT, "Noted.", None),
    ]


async def test_text_streams_as_deltas_and_usage_is_the_runs_own() -> None:
    cli = ScriptedCli(
        [
            cached("Let me look.", [use("toolu_r", "lookup", id="A")]),
            cached("It shipped."),
        ]
    )
    events: list[AgentEvent] = []
    outcome = await runner(cli).run_model_step(turn(events))

    assert isinstance(outcome, TurnCompleted)
    deltas = [json.loads(e.payload)["text"] for e in events if e.type == "text_delta"]
    assert deltas == ["Let me", " look.", "It sh", "ipped."]
    # Two model calls of (10 input + 3 cache read + 2 cache write, 5 output) each.
    assert (outcome.usage.model_calls, outcome.usage.input_tokens, outcome.usage.output_tokens) == (2, 30, 10)
    assert outcome.usage.cached_input_tokens == 6

    # The resumed run reports only its own model call, not the session's total.
    cli = ScriptedCli([cached(tool_uses=[use("toolu_w", "refund", id="A")]), cached("Done.")])
    first = await runner(cli).run_model_step(turn([]))
    assert isinstance(first, ToolCallsRequested)
    calls = {"toolu_w": record("toolu_w", ToolCallStatus.SUCCEEDED, output="ok")}
    second = await runner(cli).run_model_step(turn([], first.framework_run_state, calls))
    assert (second.usage.model_calls, second.usage.input_tokens) == (1, 15)


@pytest.mark.parametrize("status", [429, 500, 529])
async def test_an_api_error_a_retry_may_cure_fails_the_attempt(status: int) -> None:
    cli = ScriptedCli([ApiReply(error_status=status)])
    with pytest.raises(RuntimeError, match=f"status {status}"):
        await runner(cli).run_model_step(turn([]))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413])
async def test_an_api_error_a_retry_would_repeat_ends_the_turn(status: int) -> None:
    cli = ScriptedCli([ApiReply(error_status=status)])
    outcome = await runner(cli).run_model_step(turn([]))
    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and f"API Error: {status}" in outcome.turn_error


async def test_a_context_length_refusal_is_the_sessions_to_handle() -> None:
    # CLI 2.1.332 rewords the API's message ("Prompt is too long · the request is ~250000 tokens ...").
    message = "Prompt is too long · the request is ~250000 tokens (limit 200000)"
    cli = ScriptedCli([ApiReply(error_status=400, error_message=message)])
    with pytest.raises(ContextWindowExceeded, match="Prompt is too long"):
        await runner(cli).run_model_step(turn([]))


async def test_a_built_in_call_is_left_to_the_users_can_use_tool_which_may_refuse_it() -> None:
    asked: list[tuple[str, dict[str, Any], str | None]] = []

    async def refuse_bash(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        asked.append((name, tool_input, context.tool_use_id))
        if name == "Bash":
            return PermissionResultDeny(message="Bash is off limits here.")
        return PermissionResultAllow()

    bash = ApiToolUse("toolu_b", "Bash", {"command": "rm -rf /srv/orders"})
    cli = ScriptedCli(
        [
            ApiReply(tool_uses=[use("toolu_r", "lookup", id="A"), bash]),
            ApiReply("I may not run commands."),
        ]
    )
    options = ClaudeAgentOptions(tools=["Bash"], can_use_tool=refuse_bash)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = await runner(cli, options=options).run_model_step(turn([]))

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    # The hook made no decision about the built-in, so the user's callback saw the call and refused it.
    assert cli.hook_decisions == [("toolu_r", "allow", None), ("toolu_b", "none", None)]
    assert asked == [("Bash", {"command": "rm -rf /srv/orders"}, "toolu_b")]
    assert cli.model_inputs[-1] == [
        ("toolu_r", "order A shipped", False),
        ("toolu_b", "Bash is off limits here.", True),
    ]
    # The runner's own tools are decided by its hook, never by an allowed_tools entry that would shadow
    # the user's callback (the SDK warns about such entries).
    assert not [w for w in caught if issubclass(w.category, CanUseToolShadowedWarning)]


async def test_a_built_in_the_user_did_not_allow_is_refused_by_the_clis_permission_system() -> None:
    bash = ApiToolUse("toolu_b", "Bash", {"command": "date"})
    script = [ApiReply(tool_uses=[bash]), ApiReply("Done.")]
    cli = ScriptedCli([*script, *script])

    refused = await runner(cli, options=ClaudeAgentOptions(tools=["Bash"])).run_model_step(turn([]))
    assert isinstance(refused, TurnCompleted)
    assert cli.model_inputs[-1] == [
        ("toolu_b", "Claude requested permissions to use Bash, but you haven't granted it yet.", True)
    ]

    allowed = ClaudeAgentOptions(tools=["Bash"], allowed_tools=["Bash"])
    assert isinstance(await runner(cli, options=allowed).run_model_step(turn([])), TurnCompleted)
    assert cli.model_inputs[-1] == [("toolu_b", "Bash ran inline", False)]


async def test_a_resumed_run_answers_the_deferred_call_by_its_id_never_another_call_of_its_tool() -> None:
    # The deferred call is a read (the last tool use of a response with a write). The resumed CLI loses
    # it, as CLI 2.1.332 did for a deferred call that was not its response's last, and the model then
    # reads another order with the same tool.
    cli = ScriptedCli(
        [
            ApiReply(tool_uses=[use("toolu_1", "refund", id="A"), use("toolu_2", "lookup", id="B")]),
            ApiReply(tool_uses=[use("toolu_3", "lookup", id="C")]),
            ApiReply("Done."),
        ]
    )
    first = await runner(cli).run_model_step(turn([]))
    assert isinstance(first, ToolCallsRequested)
    assert [call.tool_call_id for call in first.tool_calls] == ["toolu_2"]

    cli.lose_deferred_calls = True
    calls = {"toolu_2": record("toolu_2", ToolCallStatus.SUCCEEDED, "lookup", output="order B shipped")}
    with pytest.raises(RuntimeError, match="did not resume the deferred tool call toolu_2"):
        await runner(cli).run_model_step(turn([], first.framework_run_state, calls))
    # The other call of the same tool ran for real and got its own result, not the record of toolu_2.
    assert ran == [("lookup", {"id": "C"})]
    assert cli.model_inputs[-1] == [("toolu_3", "order C shipped", False)]
    assert ("toolu_2", LOST_TOOL_RESULT, True) in cli.model_inputs[-2]


async def test_a_hook_that_gives_up_waiting_for_the_response_still_defers_a_lone_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gate_module, "RESPONSE_WAIT_SECONDS", 0.05)
    cli = ScriptedCli(
        [ApiReply(tool_uses=[use("toolu_1", "refund", id="A")]), ApiReply("Refunded.")],
        hooks_before_stop=True,
    )
    first = await runner(cli).run_model_step(turn([]))
    assert isinstance(first, ToolCallsRequested)
    assert [call.tool_call_id for call in first.tool_calls] == ["toolu_1"]

    calls = {"toolu_1": record("toolu_1", ToolCallStatus.SUCCEEDED, output="refunded A")}
    second = await runner(cli).run_model_step(turn([], first.framework_run_state, calls))
    assert isinstance(second, TurnCompleted) and second.turn_error is None
    assert cli.model_inputs[-1] == [("toolu_1", "refunded A", False)]


async def test_two_writes_deferred_after_a_long_wait_fail_the_attempt_and_the_retry_defers_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gate_module, "RESPONSE_WAIT_SECONDS", 0.05)
    writes = [use("toolu_1", "refund", id="A"), use("toolu_2", "refund", id="B")]
    cli = ScriptedCli([ApiReply(tool_uses=writes), ApiReply(tool_uses=writes)], hooks_before_stop=True)
    # The hook never saw the whole response, so it deferred both; the CLI keeps only the last, and
    # toolu_1 would silently get no result.
    with pytest.raises(
        RuntimeError,
        match=r"CLI reports the deferred tool call toolu_2 \(mcp__dex__refund\), but the runner's "
        r"PreToolUse hook deferred toolu_1 \(refund\), toolu_2 \(refund\)",
    ):
        await runner(cli).run_model_step(turn([]))
    assert cli.hook_decisions == [("toolu_1", "defer", None), ("toolu_2", "defer", None)]

    # The retried attempt sees the whole response: one write refused, the last deferred, as the CLI reports.
    cli.hooks_before_stop = False
    retry = await runner(cli).run_model_step(turn([], attempt=2))
    assert isinstance(retry, ToolCallsRequested)
    assert [(c.tool_call_id, json.loads(c.arguments)) for c in retry.tool_calls] == [("toolu_2", {"id": "B"})]
    assert cli.hook_decisions[2:] == [
        ("toolu_1", "deny", REFUSED_TOOL_CALL_MESSAGE.format(tool="refund")),
        ("toolu_2", "defer", None),
    ]
    assert ran == []


async def test_the_runner_lists_the_tools_its_policies_govern_without_io() -> None:
    # Claude Code's own tools are left to its permission system, so a policy key naming one is refused.
    assert ClaudeAgentRunner(ClaudeAgentOptions(tools=["Bash"]), [lookup, refund]).agent_tool_names() == {
        "lookup",
        "refund",
    }
    # An MCP source's tools are known once its servers are listed.
    source = McpToolSource([McpHttpServer("shipping", "http://127.0.0.1:9/mcp")])
    assert ClaudeAgentRunner(tools=[lookup, source]).agent_tool_names() is None
