"""Sessions at realistic sizes: tool outputs stored apart, and reads that stay within one stored value.

Matrix item 17 runs a session of 100 KiB messages past 20 MiB in every package; these tests pin the rules
behind it on the core's scripted runner: what the model sees of a large tool output and how the whole
output is read back and deleted by retention, what a snapshot holds when the session's waiting messages or
the turn's records alone would not fit, and how a raw caller learns which message chunks to load.
"""

import json
from collections.abc import AsyncIterator
from dataclasses import asdict

import pytest
import pytest_asyncio
from dex import DexServiceError, RPCInvokeOptions

from dex_agents import (
    AGENT_MESSAGE_CHUNKS,
    MAX_RPC_OUTPUT_BYTES,
    MAX_USER_MESSAGE_BYTES,
    AgentSnapshot,
    GetToolOutputRequest,
    ListAgentMessagesRequest,
    MessageRole,
    message_sequence_key,
    tool_output_view,
)
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from tests.agents import CORE_DIR
from tests.long_session_agents import INLINE_TOOL_OUTPUT_BYTES, LongSessionFlows, build_long_session_flows

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sized(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[AgentTestStack, LongSessionFlows]]:
    flows = build_long_session_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("sizes"), flows.all, "tests.long_session_worker", worker_cwd=CORE_DIR
    ) as stack:
        await stack.start_worker()
        yield stack, flows


def read(tool_call_id: str, size: int, gate: str | None = None) -> ScriptedToolCall:
    return ScriptedToolCall(
        "lookup_order", {"order_id": tool_call_id}, tool_call_id, gate=gate, output_size=size
    )


def json_size(value: object) -> int:
    return len(json.dumps(asdict(value), separators=(",", ":"), sort_keys=True))  # pyright: ignore[reportArgumentType]


async def test_a_large_tool_output_is_stored_apart_and_the_model_sees_its_first_part(
    sized: tuple[AgentTestStack, LongSessionFlows],
) -> None:
    stack, flows = sized
    sessions = stack.sessions(flows.large_outputs)
    session = stack.new_session_id("large-output")
    stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(read("big", 10_000), read("small", 100))),
                ScriptedResponse(text="Done."),
            ]
        ],
    )
    await sessions.start_session(session, "Look both up")
    done = await wait_for_turn_end(sessions, session, 1)
    assert done.state is not None and done.state.last_turn_error is None
    view = tool_output_view("x" * 10_000, INLINE_TOOL_OUTPUT_BYTES)
    assert len(view) <= INLINE_TOOL_OUTPUT_BYTES and "[Dex] The tool's output was cut" in view
    [answering] = [call for call in stack.invocations.model_calls(session) if call.attempt == 1][-1:]
    assert view in answering.model_input_text and "x" * 10_000 not in answering.model_input_text
    tool_messages = {
        message.tool_call_id: message for message in done.messages if message.role is MessageRole.TOOL
    }
    assert tool_messages["big"].tool_output == view and tool_messages["small"].tool_output == "x" * 100
    # The whole output stays readable; a small one was never stored apart.
    assert await sessions.get_tool_output(session, "turn-1", "big") == "x" * 10_000
    assert await sessions.get_tool_output(session, "turn-1", "small") is None
    assert await sessions.get_tool_output(session, "turn-9", "big") is None


async def test_a_raw_caller_learns_which_instances_to_load(
    sized: tuple[AgentTestStack, LongSessionFlows],
) -> None:
    stack, flows = sized
    flow = flows.large_outputs
    sessions = stack.sessions(flow)
    session = stack.new_session_id("raw-reads")
    stack.scripts.set_turns(
        session,
        [[ScriptedResponse(tool_calls=(read("big", 10_000),)), ScriptedResponse(text="Done.")]]
        + [[ScriptedResponse(text=f"Answer {number}.")] for number in range(2, 6)],
    )
    await sessions.start_session(session, "Look it up")
    for number in range(1, 6):
        if number > 1:
            assert await sessions.send_user_message(session, f"Question {number}")
        await wait_for_turn_end(sessions, session, number)
    # A tool output is read only with its instance loaded; without it the error says what to load.
    with pytest.raises(
        DexServiceError, match=r"AgentToolOutputs instance 'turn-1:big'.*load_attribute_map_instances"
    ):
        await stack.client.invoke_rpc(flow.get_tool_output, session, GetToolOutputRequest("turn-1", "big"))
    # A page of older messages, asked for without loading chunks, holds none of them and names the chunks.
    oldest = ListAgentMessagesRequest(before_sequence=4, limit=3)
    bare = await stack.client.invoke_rpc(flow.list_agent_messages, session, oldest)
    assert bare.messages == () and bare.missing_chunks and bare.next_before_sequence is None
    loads = tuple(AGENT_MESSAGE_CHUNKS.load(message_sequence_key(first)) for first in bare.missing_chunks)
    whole = await stack.client.invoke_rpc(
        flow.list_agent_messages,
        session,
        oldest,
        options=RPCInvokeOptions(load_attribute_map_instances=loads),
    )
    assert [message.sequence for message in whole.messages] == [1, 2, 3] and whole.missing_chunks == ()
    assert all(not message.framework_item for message in whole.messages)
    with_items = await sessions.list_agent_messages(session, before_sequence=4, include_framework_items=True)
    assert all(message.framework_item for message in with_items.messages)


async def test_retention_deletes_the_outputs_stored_apart_with_their_turns(
    sized: tuple[AgentTestStack, LongSessionFlows],
) -> None:
    stack, flows = sized
    sessions = stack.sessions(flows.large_outputs)
    session = stack.new_session_id("output-retention")
    turns = 12
    stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(read(f"read-{number}", 6_000),)),
                ScriptedResponse(text=f"Read {number}."),
            ]
            for number in range(1, turns + 1)
        ],
    )
    for number in range(1, turns + 1):
        if number == 1:
            await sessions.start_session(session, "Read 1")
        else:
            assert await sessions.send_user_message(session, f"Read {number}")
        await wait_for_turn_end(sessions, session, number)
    done = await sessions.get_agent_snapshot(session)
    assert done.context_summary is not None, "the session compacted"
    first_page = await sessions.list_agent_messages(session, limit=1)
    assert first_page.deleted_before_sequence is not None, "retention deleted the oldest messages"
    kept = {
        number: await sessions.get_tool_output(session, f"turn-{number}", f"read-{number}")
        for number in range(1, turns + 1)
    }
    assert kept[1] is None, "the first turn's output went with its messages"
    assert kept[turns] == "x" * 6_000, "the newest turn's output stays"


async def test_eight_queued_messages_of_the_largest_size_leave_the_snapshot_within_its_budget(
    sized: tuple[AgentTestStack, LongSessionFlows],
) -> None:
    stack, flows = sized
    sessions = stack.sessions(flows.storage)
    session = stack.new_session_id("queued-large")
    stack.scripts.set_turns(
        session,
        [[ScriptedResponse(text="First.", gate="hold")]]
        + [[ScriptedResponse(text=f"Later {n}.")] for n in range(8)],
    )
    await sessions.start_session(session, "Start")
    await stack.gate(session, "hold").wait_until_reached()
    text = "q" * MAX_USER_MESSAGE_BYTES
    for _ in range(8):
        assert await sessions.send_user_message(session, text)
    snapshot: AgentSnapshot = await sessions.get_agent_snapshot(session)
    assert snapshot.queued_message_count == 8
    assert 1 <= len(snapshot.queued_messages) < 8  # the rest do not fit a quarter of the budget
    assert json_size(snapshot) <= MAX_RPC_OUTPUT_BYTES
    stack.gate(session, "hold").release()
    done = await wait_for_turn_end(sessions, session, 9, timeout=120)
    assert done.state is not None and done.state.last_turn_error is None and done.queued_message_count == 0


async def test_the_records_of_a_turn_of_many_large_results_are_cut_in_the_snapshot(
    sized: tuple[AgentTestStack, LongSessionFlows],
) -> None:
    stack, flows = sized
    sessions = stack.sessions(flows.storage)
    session = stack.new_session_id("many-records")
    # Fourteen 64 KiB views take more than half a snapshot: the records' texts are cut there.
    reads = tuple(read(f"read-{number}", 200_000) for number in range(14))
    held = read("held", 10, gate="held")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=(*reads, held)), ScriptedResponse(text="Done.")]]
    )
    await sessions.start_session(session, "Read them all")
    await stack.gate(session, "held").wait_until_reached()
    snapshot = await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: snapshot
        if sum(call.status == "succeeded" for call in snapshot.tool_calls) == 14
        else None,
        description="the fourteen reads to finish",
    )
    assert len(snapshot.tool_calls) == 15 and json_size(snapshot) <= MAX_RPC_OUTPUT_BYTES
    outputs = [call.output for call in snapshot.tool_calls if call.output is not None]
    assert outputs and all(len(output) <= 4096 for output in outputs), [len(output) for output in outputs]
    assert all(
        call.stored_output_bytes == 200_000 for call in snapshot.tool_calls if call.tool_call_id != "held"
    )
    stack.gate(session, "held").release()
    done = await wait_for_turn_end(sessions, session, 1)
    assert done.state is not None and done.state.last_turn_error is None


async def test_an_output_stored_apart_is_plain_text_without_lone_surrogates() -> None:
    from dex_agents.session._tasks import _storable_text  # pyright: ignore[reportPrivateUsage]

    class Accessor(str):
        """Like LangChain's message text accessor: a str subclass, which the SDK's string codec refuses."""

    stored = _storable_text(Accessor("x" * 10))
    assert type(stored) is str and stored == "x" * 10
    assert _storable_text("a\udc80b") == "a\ufffdb"
