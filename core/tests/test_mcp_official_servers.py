"""McpToolSource against the official MCP reference servers from npm, over stdio and Streamable HTTP.

server-everything and server-memory (pinned in ``tests/mcp_servers``, installed by ``npm ci``) speak protocol
2025-11-25. The agent (`tests.mcp_official_agent`) runs in a Worker child of a real devserver; the stdio
servers run behind a wire tap, so the tests read what went over the wire. One server-everything on
Streamable HTTP serves the whole module.
"""

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from dex_agents import AgentSessionClient, ToolCallsRequested, ToolEffect
from dex_agents.mcp import IDEMPOTENCY_KEY_META_KEY, McpToolSource
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    McpWireMessage,
    OfficialMcpHttpServer,
    ScriptedResponse,
    ScriptedRunner,
    ScriptedToolCall,
    SessionSide,
    executed_step_types,
    official_mcp_server_version,
    read_agent_events,
    read_mcp_wire_log,
    start_official_mcp_http_server,
    wait_for_turn_end,
    wait_until,
)
from tests.agents import CORE_DIR
from tests.builtin_support import payloads
from tests.mcp_agent import tool_outputs
from tests.mcp_official_agent import (
    build_official_flow,
    everything_wire_log,
    memory_wire_log,
    official_servers,
    write_everything_http_url,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

RESEARCH = "simulate-research-query"
# server-everything offers these to a client that declares no roots, sampling or elicitation.
EVERYTHING_EFFECTS = {
    "echo": ToolEffect.READ,
    "get-annotated-message": ToolEffect.READ,
    "get-env": ToolEffect.READ,
    "get-resource-links": ToolEffect.READ,
    "get-resource-reference": ToolEffect.READ,
    "get-structured-content": ToolEffect.READ,
    "get-sum": ToolEffect.READ,
    "get-tiny-image": ToolEffect.READ,
    "gzip-file-as-resource": ToolEffect.IDEMPOTENT_WRITE,
    "toggle-simulated-logging": None,
    "toggle-subscriber-updates": None,
    "trigger-long-running-operation": ToolEffect.READ,
    # Offered since the source declares elicitation; their hints claim no effect.
    "trigger-elicitation-request": None,
    "trigger-url-elicitation": None,
    RESEARCH: None,
}
MEMORY_EFFECTS = {
    "create_entities": None,
    "create_relations": None,
    "add_observations": None,
    "delete_entities": ToolEffect.IDEMPOTENT_WRITE,
    "delete_observations": ToolEffect.IDEMPOTENT_WRITE,
    "delete_relations": ToolEffect.IDEMPOTENT_WRITE,
    "read_graph": ToolEffect.READ,
    "search_nodes": ToolEffect.READ,
    "open_nodes": ToolEffect.READ,
}


@dataclass
class Official:
    stack: AgentTestStack
    sessions: AgentSessionClient
    http: OfficialMcpHttpServer

    def wire(self, server: str = "everything") -> list[McpWireMessage]:
        log = everything_wire_log if server == "everything" else memory_wire_log
        return read_mcp_wire_log(log(self.stack.state_dir))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def official(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Official]:
    state_dir = tmp_path_factory.mktemp("mcp-official")
    async with await start_official_mcp_http_server(state_dir) as http:
        write_everything_http_url(state_dir, http.url)
        flow = build_official_flow(state_dir)
        async with AgentTestStack(
            state_dir, [flow], "tests.mcp_official_agent", worker_cwd=CORE_DIR
        ) as stack:
            await stack.start_worker()
            yield Official(stack, stack.sessions(flow), http)


def _requests(wire: list[McpWireMessage], method: str) -> list[McpWireMessage]:
    return [message for message in wire if message.direction == "client" and message.method == method]


def _answers(wire: list[McpWireMessage], request: McpWireMessage) -> list[McpWireMessage]:
    return [message for message in wire if message.answers(request)]


async def test_the_official_servers_tools_are_listed_with_the_effects_their_hints_and_the_policy_give(
    official: Official,
) -> None:
    source = McpToolSource(official_servers(official.stack.state_dir))
    definitions = await source.list_tools()
    print(
        f"\nserver-everything {official_mcp_server_version('server-everything')}, "
        f"server-memory {official_mcp_server_version('server-memory')} (protocol 2025-11-25)"
    )
    for definition in definitions:
        effect = definition.effect.value if definition.effect else "-"
        print(f"  {definition.name:<48} hint effect {effect:<17} taskSupport {definition.task_support}")
    by_server: dict[str, dict[str, ToolEffect | None]] = {}
    for definition in definitions:
        by_server.setdefault(definition.server_name, {})[definition.mcp_name] = definition.effect
    # The Worker trusts these servers' annotations: readOnlyHint is a read, idempotentHint an idempotent
    # write (a destructive one still asks, below), anything else has no effect of its own.
    assert by_server == {
        "everything": EVERYTHING_EFFECTS,
        "everything_http": EVERYTHING_EFFECTS,
        "memory": MEMORY_EFFECTS,
    }
    tasks = {(d.server_name, d.mcp_name) for d in definitions if d.task_support == "required"}
    assert tasks == {("everything", RESEARCH), ("everything_http", RESEARCH)}

    # The policies the Worker configures win over the hints; a tool without either takes the default.
    side = SessionSide(tool_policies=source.merge_tool_policies())
    side.start_turn(ScriptedRunner(tools=()).build_user_message("Research"))
    turn = side.context()
    policies = {
        name: source.deferred_tool_call(turn, tool_call_id=name, tool_name=name, arguments="{}").policy
        for name in (
            f"everything__{RESEARCH}",
            "memory__create_entities",
            "memory__delete_entities",
            "everything__toggle-simulated-logging",
        )
    }
    assert {name: (policy.effect, policy.is_approval_required) for name, policy in policies.items()} == {
        f"everything__{RESEARCH}": (ToolEffect.READ, False),
        "memory__create_entities": (ToolEffect.NON_IDEMPOTENT_WRITE, False),
        # Trusted, but destructive: it still asks.
        "memory__delete_entities": (ToolEffect.IDEMPOTENT_WRITE, True),
        "everything__toggle-simulated-logging": (ToolEffect.UNCLASSIFIED, True),
    }


async def test_a_task_required_tool_runs_to_completion_across_a_worker_kill_over_stdio_and_http(
    official: Official,
) -> None:
    sessions = {
        "everything": official.stack.new_session_id("research-stdio"),
        "everything_http": official.stack.new_session_id("research-http"),
    }
    for server, session in sessions.items():
        call = ScriptedToolCall(f"{server}__{RESEARCH}", {"topic": f"durable {server}"}, "research-1")
        official.stack.scripts.set_turns(
            session, [[ScriptedResponse(tool_calls=(call,)), ScriptedResponse(text="Researched.")]]
        )
        await official.sessions.start_session(session, "Research it")

    # The stdio task is polled on its connection and reported working; the Worker then dies mid-task.
    def stdio_task_working() -> bool:
        wire = official.wire()
        return any(
            answer.result is not None and answer.result.get("status") == "working"
            for request in _requests(wire, "tasks/get")
            for answer in _answers(wire, request)
        )

    await wait_until("the stdio task polled while working", stdio_task_working, timeout=60)
    created = len(_requests(official.wire(), "tools/call"))
    official.stack.kill_workers()
    await official.stack.start_worker()
    done = {
        server: await wait_for_turn_end(official.sessions, session, 1) for server, session in sessions.items()
    }

    for server, snapshot in done.items():
        assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
        output = tool_outputs(snapshot)["research-1"]
        assert output.startswith(f"# Research Report: durable {server}"), output
        print(f"\n{server}: {output.splitlines()[0]!r} after the Worker kill")
        history = await official.stack.read_step_history(sessions[server])
        [call_tool] = [
            entry
            for entry in history
            if entry.step_type == "CallTool" and entry.event_type == EXECUTE_COMPLETED_EVENT
        ]
        # The killed attempt's task died with its connection; the retried attempt called the tool again.
        assert call_tool.final_attempt == 2, server
    wire = official.wire()
    calls = _requests(wire, "tools/call")
    assert created == 1 and len(calls) == 2
    key = f"{sessions['everything']}/turn-1/research-1"
    for call in calls:
        assert call.params["task"] == {"ttl": 4 * 600 * 1000}
        assert call.params["_meta"][IDEMPOTENCY_KEY_META_KEY] == key
    statuses = [
        answer.result.get("status")
        for request in _requests(wire, "tasks/get")
        for answer in _answers(wire, request)
        if answer.result is not None
    ]
    assert statuses[-1] == "completed" and "working" in statuses
    # Only the retried attempt's task reached its end, and its result was read once.
    [second] = _answers(wire, calls[1])
    assert second.result is not None
    [payload] = _requests(wire, "tasks/result")
    assert payload.params["taskId"] == second.result["task"]["taskId"]


async def test_a_cancelled_tool_step_attempt_cancels_its_task_on_the_server(official: Official) -> None:
    source = McpToolSource(official_servers(official.stack.state_dir))
    await source.list_tools()
    side = SessionSide(tool_policies=source.merge_tool_policies())
    side.start_turn(ScriptedRunner(tools=()).build_user_message("Research"))
    name = f"everything__{RESEARCH}"
    call = source.deferred_tool_call(
        side.context(),
        tool_call_id="research-cancel",
        tool_name=name,
        arguments=json.dumps({"topic": "stop"}),
    )
    side.defer(ToolCallsRequested(framework_run_state="{}", tool_calls=[call]))
    before = len(official.wire())
    waiting = asyncio.Event()

    async def heartbeat() -> None:
        waiting.set()

    # The source heartbeats before its first poll, once it holds the created task: the attempt is cancelled
    # while it waits on the task. (Seeing the server's answer on the wire is not enough: the client may not
    # have read it yet, and a call cancelled before its answer arrived has no task to cancel.)
    execution = dataclasses.replace(
        side.execution("research-cancel"), supports_tool_tasks=True, heartbeat_function=heartbeat
    )
    attempt = asyncio.create_task(source.call_tool(execution))
    await asyncio.wait_for(waiting.wait(), timeout=30)
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    wire = official.wire()[before:]
    [cancel] = _requests(wire, "tasks/cancel")
    [answer] = _answers(wire, cancel)
    assert answer.result is not None and answer.result["status"] == "cancelled", answer.message
    assert _requests(wire, "tasks/result") == []
    events = [event for event in side.events if event.type == "mcp.task_status"]
    assert events == [], "no status reached a poll before the cancellation"


async def test_server_memory_creates_an_entity_with_the_key_in_meta_and_reads_it_back(
    official: Official,
) -> None:
    session = official.stack.new_session_id("memory")
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
    create = ScriptedToolCall("memory__create_entities", {"entities": [entity]}, "create-1")
    read = ScriptedToolCall("memory__read_graph", {}, "read-1")
    official.stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(create,)),
                ScriptedResponse(tool_calls=(read,)),
                ScriptedResponse(text="Remembered."),
            ]
        ],
    )
    await official.sessions.start_session(session, "Remember Ada")
    done = await wait_for_turn_end(official.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    graph = json.loads(tool_outputs(done)["read-1"])
    assert graph["entities"] == [{"type": "entity", **entity}] or graph["entities"] == [entity], graph
    wire = official.wire("memory")
    [sent] = [call for call in _requests(wire, "tools/call") if call.params["name"] == "create_entities"]
    assert sent.params["_meta"] == {IDEMPOTENCY_KEY_META_KEY: f"{session}/turn-1/create-1"}
    assert "task" not in sent.params, "a tool without taskSupport is called plainly"
    # The configured single-attempt write, then the hinted read.
    steps = executed_step_types(await official.stack.read_step_history(session))
    assert [step for step in steps if step.startswith("Call")] == ["CallSingleAttemptTool", "CallTool"], steps
    events = await read_agent_events(official.sessions, session)
    assert payloads(events, "tool_task_started") == []
