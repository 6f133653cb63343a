"""Long sessions against the devserver and Worker children: chunked storage, compaction, session settings.

The Flows (``long_session_agents``) keep four messages in the window and two per chunk, so a few turns roll
messages into chunks. Each test checks where the messages are stored (``storage_layout``), that every read
path returns the same messages, and, where a crash matters, kills the Worker at that point.
"""

import asyncio
import json
import tarfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from dex import FlowStatus, StartFlowOptions

import dex_agents
from dex_agents import (
    MAX_SESSION_SETTINGS_BYTES,
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    AgentEventType,
    AgentMessage,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionStartInput,
    AgentSessionStatus,
    AgentSnapshot,
    SessionWaitTimeoutError,
    TurnOutcome,
    UpdateSessionSettingsRequest,
)
from dex_agents.session._settings import INVALID_START_SETTINGS_REASON
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    read_agent_events,
    render_message,
    wait_for_turn_end,
    wait_until,
)
from tests.agents import CORE_DIR
from tests.long_session_agents import (
    LongSessionFlows,
    StorageLayout,
    StorageTestFlow,
    build_long_session_flows,
)
from tests.previous_release_worker import PREVIOUS_RELEASE_SRC_ENV

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: The last commit of dex-agents 0.1.0, whose Worker stores every message in AgentMessages.
PREVIOUS_RELEASE_ARCHIVE = CORE_DIR / "tests" / "data" / "dex-agents-0.1.0-core-src.tar.gz"


@dataclass
class Long:
    stack: AgentTestStack
    flows: LongSessionFlows

    def sessions(self, flow: StorageTestFlow) -> AgentSessionClient:
        return self.stack.sessions(flow)

    async def layout(self, flow: StorageTestFlow, session: str) -> StorageLayout:
        return await self.stack.client.invoke_rpc(flow.storage_layout, session)

    async def turn(self, flow: StorageTestFlow, session: str, text: str, number: int) -> AgentSnapshot:
        """Send the user message of turn ``number`` (or start the session with it) and wait for its end."""
        sessions = self.sessions(flow)
        if number == 1:
            await sessions.start_session(session, text)
        else:
            assert await sessions.send_user_message(session, text)
        return await wait_for_turn_end(sessions, session, number)

    async def replace_worker(self) -> None:
        self.stack.kill_workers()
        await self.stack.start_worker()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def long_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Long]:
    flows = build_long_session_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("long"),
        flows.all,
        "tests.long_session_worker",
        worker_cwd=CORE_DIR,
        # The rollout test's turns wait while no Worker serves their Flow type: the previous release's
        # Workers drain (one holds a gated model call for its whole 15 s drain timeout) before this
        # release's start. With the default 10 s a dispatch, three RunModel attempts could run out on a
        # loaded machine and fail a turn that a server configured for rolling deploys keeps waiting.
        server_args=("--dispatch-wait", "30"),
    ) as stack:
        yield Long(stack, flows)


@pytest_asyncio.fixture(loop_scope="module")
async def long(long_stack: Long) -> Long:
    if not long_stack.stack.workers:
        await long_stack.stack.start_worker()
    return long_stack


def read(tool_call_id: str, **behaviour: Any) -> ScriptedToolCall:
    return ScriptedToolCall("lookup_order", {"order_id": "A-1"}, tool_call_id, **behaviour)


def tool_turn(number: int, **behaviour: Any) -> list[ScriptedResponse]:
    """A model call that reads an order, then the answer: four stored messages."""
    return [
        ScriptedResponse(tool_calls=(read(f"read-{number}", **behaviour),)),
        ScriptedResponse(text=f"Order {number} has shipped."),
    ]


def without_items(messages: Sequence[AgentMessage]) -> tuple[AgentMessage, ...]:
    """Messages as this release's snapshot holds them: without their runner items."""
    return tuple(replace(message, framework_item="") for message in messages)


async def stored_messages(sessions: AgentSessionClient, session: str) -> list[AgentMessage]:
    """Every stored message with its runner item, as the model input renders it."""
    return await all_pages(sessions, session, limit=200, include_framework_items=True)


async def all_pages(
    sessions: AgentSessionClient, session: str, limit: int = 3, *, include_framework_items: bool = False
) -> list[AgentMessage]:
    """Every stored message, read page by page from the newest, as a UI scrolling back does."""
    found: list[AgentMessage] = []
    before: int | None = None
    while True:
        page = await sessions.list_agent_messages(
            session, before_sequence=before, limit=limit, include_framework_items=include_framework_items
        )
        found[:0] = page.messages
        if page.next_before_sequence is None:
            return found
        before = page.next_before_sequence


def check_layout(layout: StorageLayout, last_sequence: int, window_size: int = 4) -> None:
    """Every message is stored exactly once, each chunk holds exactly its index range, the window is small."""
    assert layout.has_index
    assert layout.stored == list(range(layout.first_sequence, last_sequence + 1))
    assert [(chunk[0], chunk[-1]) for chunk in layout.chunks] == list(layout.index_ranges)
    assert all(list(chunk) == list(range(chunk[0], chunk[-1] + 1)) for chunk in layout.chunks)
    assert len(layout.window) <= window_size
    assert all(sequence >= layout.window_first_sequence for sequence in layout.window)


async def test_a_session_past_the_window_rolls_into_chunks_and_reads_back_identically(long: Long) -> None:
    flow, session = long.flows.storage, long.stack.new_session_id("rollover")
    long.stack.scripts.set_turns(session, [tool_turn(number) for number in range(1, 5)])
    first = await long.turn(flow, session, "Where is order 1?", 1)
    assert [message.sequence for message in first.messages] == [1, 2, 3, 4]
    for number in range(2, 5):
        await long.turn(flow, session, f"Where is order {number}?", number)
    layout = await long.layout(flow, session)
    check_layout(layout, 16)
    assert len(layout.chunks) >= 6 and all(len(chunk) == 2 for chunk in layout.chunks)
    snapshot = await long.sessions(flow).get_agent_snapshot(session)
    assert [message.sequence for message in snapshot.messages] == list(range(1, 17))
    assert snapshot.messages[:4] == first.messages  # unchanged by the move into a chunk
    assert await all_pages(long.sessions(flow), session) == list(snapshot.messages)
    # The model saw every stored message, in order: the last call got turn 4's question and its tool call.
    last_call = long.stack.invocations.model_calls(session, "turn-4")[-1]
    stored = await stored_messages(long.sessions(flow), session)
    assert list(last_call.model_input[:13]) == [render_message(message) for message in stored[:13]]
    # That model call loaded each stored message once: the chunks of the older ones and the window.
    history = await long.stack.read_step_history(session)
    last_run = [entry for entry in history if entry.step_type == "RunModel"][-1]
    ranges = dict(layout.index_ranges)
    from_chunks = [
        sequence
        for key in last_run.loaded_instances("AgentMessageChunks")
        for sequence in range(int(key), ranges[int(key)] + 1)
    ]
    from_window = [int(key) for key in last_run.loaded_instances("AgentMessages")]
    assert sorted(from_chunks + from_window) == list(range(1, 14))


async def test_an_oversized_message_gets_its_own_chunk(long: Long) -> None:
    flow, session = long.flows.storage, long.stack.new_session_id("oversized")
    long.stack.scripts.set_turns(
        session, [tool_turn(1, output_size=12_000), tool_turn(2), [ScriptedResponse(text="Done.")]]
    )
    await long.turn(flow, session, "Show me the whole order history", 1)
    layout = await long.layout(flow, session)
    # The tool result (sequence 3) is larger than the 8 KiB chunk limit: it never entered the window.
    assert layout.index_ranges == ((3, 3),) and layout.window == (1, 2, 4)
    for number, text in ((2, "And order 2?"), (3, "Thanks")):
        await long.turn(flow, session, text, number)
    layout = await long.layout(flow, session)
    check_layout(layout, 10)
    assert (3,) in layout.chunks and (1, 2) in layout.chunks  # rollover stepped over it
    snapshot = await long.sessions(flow).get_agent_snapshot(session)
    assert snapshot.messages[2].tool_output == "x" * 12_000
    assert await all_pages(long.sessions(flow), session, limit=2) == list(snapshot.messages)
    seen = long.stack.invocations.model_calls(session, "turn-3")[-1].model_input
    stored = await stored_messages(long.sessions(flow), session)
    assert list(seen) == [render_message(message) for message in stored[:9]]


async def test_a_worker_killed_in_the_step_that_rolls_over_loses_nothing(long: Long) -> None:
    flow, session = long.flows.storage, long.stack.new_session_id("rollover-kill")
    final = [ScriptedResponse(tool_calls=(read("read-3"),)), ScriptedResponse(text="Shipped.", gate="commit")]
    long.stack.scripts.set_turns(session, [tool_turn(1), tool_turn(2), final])
    await long.turn(flow, session, "Order 1?", 1)
    await long.turn(flow, session, "Order 2?", 2)
    assert await long.sessions(flow).send_user_message(session, "Order 3?")
    await long.stack.gate(session, "commit").wait_until_reached()
    before = await long.layout(flow, session)
    stored_before = (await long.sessions(flow).get_agent_snapshot(session)).messages
    long.stack.kill_workers()  # the answer's commit would store three messages and roll the window over
    await long.stack.start_worker()
    done = await wait_for_turn_end(long.sessions(flow), session, 3)
    after = await long.layout(flow, session)
    check_layout(after, 12)
    assert len(after.index_ranges) > len(before.index_ranges)
    assert done.messages[: len(stored_before)] == stored_before
    assert [message.text for message in done.messages[-1:]] == ["Shipped."]
    assert await all_pages(long.sessions(flow), session) == list(done.messages)
    attempts = [call.attempt for call in long.stack.invocations.model_calls(session, "turn-3")]
    assert attempts == [1, 1, 2]  # only the killed model call ran again


def _previous_release_source(tmp_path: Path) -> Path:
    # The previous release's core/src, as `git archive 8f7738b:core src | gzip -9n` wrote it: shipped in the
    # repository so the test needs no git history (a shallow clone has none).
    with tarfile.open(PREVIOUS_RELEASE_ARCHIVE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "src"


async def test_a_session_the_previous_release_stored_keeps_working_and_migrates(
    long: Long, tmp_path: Path
) -> None:
    flow, sessions = long.flows.upgrade, long.sessions(long.flows.upgrade)
    idle, mid_turn = long.stack.new_session_id("upgrade-idle"), long.stack.new_session_id("upgrade-busy")
    for session in (idle, mid_turn):
        long.stack.scripts.set_turns(session, [tool_turn(number) for number in range(1, 6)])
    # The session that will be in a model call when the Worker changes waits at a gate in its third turn.
    long.stack.scripts.set_turns(
        mid_turn,
        [tool_turn(1), tool_turn(2), [ScriptedResponse(text="Checked.", gate="switch")], tool_turn(4)],
    )
    long.stack.kill_workers()
    old = await long.stack.start_worker(
        env={PREVIOUS_RELEASE_SRC_ENV: str(_previous_release_source(tmp_path))},
        worker_module="tests.previous_release_worker",
    )
    assert "previous release of dex_agents" in old.read_log()
    for session in (idle, mid_turn):
        for number in (1, 2):
            await long.turn(flow, session, f"Order {number}?", number)
    before_idle = await sessions.get_agent_snapshot(idle)
    assert [message.sequence for message in before_idle.messages] == list(range(1, 9))
    assert await sessions.send_user_message(mid_turn, "Is everything checked?")
    await long.stack.gate(mid_turn, "switch").wait_until_reached()
    before_busy = await sessions.get_agent_snapshot(mid_turn)
    assert all(call.pid == old.pid for call in long.stack.invocations.model_calls(idle))

    long.stack.kill_workers()  # the upgrade rule: every Worker of the previous release stops first
    await long.stack.start_worker()
    # A previous release's Worker stored everything in the window and wrote no index.
    layout = await long.layout(flow, idle)
    assert not layout.has_index and layout.window == tuple(range(1, 9)) and layout.reply_turn_id == ""
    # The busy session's model call reruns here, in a turn the previous release started and counted nothing
    # for; its reply sequence is recorded before its window rolls over, so its count is right.
    busy = await wait_for_turn_end(sessions, mid_turn, 3)
    rerun = long.stack.invocations.model_calls(mid_turn, "turn-3")
    assert [(call.attempt, call.pid == old.pid) for call in rerun] == [(1, True), (2, False)]
    # The previous release's snapshot carried each message's runner item; this release's leaves it out.
    assert busy.messages[:9] == without_items(before_busy.messages)
    busy_layout = await long.layout(flow, mid_turn)
    check_layout(busy_layout, 10)
    assert (busy_layout.reply_turn_id, busy_layout.reply_sequence) == ("turn-3", 10)
    events = await read_agent_events(sessions, mid_turn)
    completed = [json.loads(event.payload) for event in events if event.type == AgentEventType.TURN_COMPLETED]
    assert completed[-1] == {"message_count": 1}
    # The idle session's wait was scheduled by the previous release (it loads no window): the next turn
    # starts there, and the first Step that loads the window moves the old messages into chunks.
    await long.turn(flow, idle, "Order 3?", 3)
    await long.turn(flow, idle, "Order 4?", 4)
    await long.turn(flow, mid_turn, "Order 4?", 4)
    for session, last in ((idle, 16), (mid_turn, 14)):
        layout = await long.layout(flow, session)
        check_layout(layout, last)
        snapshot = await sessions.get_agent_snapshot(session)
        assert [message.sequence for message in snapshot.messages] == list(range(1, last + 1))
        assert await all_pages(sessions, session) == list(snapshot.messages)
    assert (await sessions.get_agent_snapshot(idle)).messages[:8] == without_items(before_idle.messages)


async def test_a_rollout_from_previous_release_workers_to_this_release_while_sessions_run(
    long: Long, tmp_path: Path
) -> None:
    """The upgrade rule as an operator follows it, with sessions in every state and turns still arriving.

    Two Workers of the previous release serve four sessions: one in a model call, one waiting for the
    approval of a refund, one taking turn after turn, one idle. Both are drained with SIGTERM before any
    Worker of this release starts; then two of this release start, and one of them is drained again while
    the turns go on (Workers of one release may replace each other at any time). Nothing is lost, the
    refund runs once, and only the model call that was running when its Worker left runs again.
    """
    flow, sessions = long.flows.upgrade, long.sessions(long.flows.upgrade)
    busy, approving = long.stack.new_session_id("roll-busy"), long.stack.new_session_id("roll-approve")
    looping, idle = long.stack.new_session_id("roll-loop"), long.stack.new_session_id("roll-idle")
    long.stack.scripts.set_turns(busy, [tool_turn(1), [ScriptedResponse(text="Checked.", gate="rollout")]])
    refund = ScriptedToolCall("refund_order", {"order_id": "A-7"}, "refund-1")
    long.stack.scripts.set_turns(
        approving,
        [
            [ScriptedResponse(tool_calls=(refund,)), ScriptedResponse(text="Refunded.")],
            [ScriptedResponse(text="You are welcome.")],
        ],
    )
    long.stack.scripts.set_turns(looping, [tool_turn(number) for number in range(1, 7)])
    long.stack.scripts.set_turns(idle, [tool_turn(1), tool_turn(2)])
    long.stack.kill_workers()
    previous_env = {PREVIOUS_RELEASE_SRC_ENV: str(_previous_release_source(tmp_path))}
    previous = [
        await long.stack.start_worker(env=previous_env, worker_module="tests.previous_release_worker")
        for _ in range(2)
    ]
    await long.turn(flow, idle, "Order 1?", 1)
    await long.turn(flow, busy, "Order 1?", 1)
    for number in (1, 2):
        await long.turn(flow, looping, f"Order {number}?", number)
    await sessions.start_session(approving, "Refund order A-7, please.")
    assert (await sessions.wait_for_interrupt(approving)) is not None
    assert await sessions.send_user_message(busy, "Is everything checked?")
    await long.stack.gate(busy, "rollout").wait_until_reached()

    async def more_turns() -> None:
        # Turns keep arriving through the rollout; while no Worker serves the Flow type they wait.
        for number in range(3, 7):
            await long.turn(flow, looping, f"Order {number}?", number)

    # The upgrade rule: every Worker of the previous release stops (drains) before this release starts. All
    # of them are told at once, before more turns arrive: a turn begun on a previous-release Worker that
    # was still serving while another drained would continue on this release, whose ScriptedRunner
    # refuses the previous run state format (as the approving session's turn shows below).
    for worker in previous:
        worker.begin_stop()
    await asyncio.sleep(2)  # the SIGTERM handlers have run: no previous-release Worker takes a new task
    arriving = asyncio.create_task(more_turns())
    for worker in previous:
        await asyncio.to_thread(worker.stop, 15.0)
    current = [await long.stack.start_worker() for _ in range(2)]
    assert f"dex-agents {dex_agents.__version__} worker ready" in current[0].read_log()
    await asyncio.sleep(1)  # turns run on both Workers of this release
    await asyncio.to_thread(current[0].stop, 15.0)
    await long.stack.start_worker()
    await asyncio.wait_for(arriving, timeout=180)

    long.stack.gate(busy, "rollout").release()
    await wait_for_turn_end(sessions, busy, 2)
    reruns = long.stack.invocations.model_calls(busy, "turn-2")
    assert [call.pid in {worker.pid for worker in previous} for call in reruns] == [True, False]
    # The approval's turn is the previous release's: a Worker of it began the turn, and the state says so.
    carried = (await sessions.get_agent_snapshot(approving)).state
    assert carried is not None and (carried.active_turn_id, carried.active_turn_release) == ("turn-1", None)
    assert await sessions.resolve_interrupt(approving, "refund-1", approved=True)
    # The previous release's ScriptedRunner wrote its run state in another format, which this release's
    # refuses: the turn that waited across the rollout ends with that error, after the approved refund ran
    # once, and the turn-failure note keeps its result for the model. (Each adapter's framework page in
    # docs/pages/frameworks says whether its run state changed between the releases.)
    waited = await wait_for_turn_end(sessions, approving, 1)
    assert waited.state is not None and "was not written by ScriptedRunner" in str(
        waited.state.last_turn_error
    )
    assert len(long.stack.invocations.tool_calls(approving, "refund_order")) == 1
    note = waited.messages[-1].text or ""
    assert 'refund_order {"order_id":"A-7"} -> succeeded' in note, note
    assert (await long.turn(flow, approving, "Thanks!", 2)).messages[-1].text == "You are welcome."
    await long.turn(flow, idle, "Order 2?", 2)
    for session, last in ((busy, 6), (approving, 4), (looping, 24), (idle, 8)):
        snapshot = await sessions.get_agent_snapshot(session)
        assert [message.sequence for message in snapshot.messages] == list(range(1, last + 1)), (
            session,
            [(message.sequence, message.role, (message.text or "")[:80]) for message in snapshot.messages],
        )
        assert snapshot.state is not None and snapshot.state.last_turn_error is None, session
        assert await all_pages(sessions, session) == list(snapshot.messages)
    assert [call.turn_id for call in long.stack.invocations.tool_calls(looping, "lookup_order")] == [
        f"turn-{number}" for number in range(1, 7)
    ]


# Compaction. ScriptedRunner counts a token per 4 characters, so each of these messages is 100 tokens.


def question(number: int) -> str:
    return f"Question {number}: ".ljust(394, "?")  # "user: " + 394 characters


def answer(number: int) -> str:
    return f"Answer {number}: ".ljust(389, ".")  # "assistant: " + 389 characters


async def compacting_turns(long: Long, session: str, numbers: Sequence[int]) -> AgentSnapshot:
    snapshot: AgentSnapshot | None = None
    for number in numbers:
        snapshot = await long.turn(long.flows.compacting, session, question(number), number)
    assert snapshot is not None
    return snapshot


def script_answers(long: Long, session: str, turns: int) -> None:
    long.stack.scripts.set_turns(session, [[ScriptedResponse(text=answer(n))] for n in range(1, turns + 1)])


async def test_a_session_past_the_trigger_compacts_once_then_the_model_sees_the_summary(long: Long) -> None:
    flow, session = long.flows.compacting, long.stack.new_session_id("compact")
    sessions = long.sessions(flow)
    script_answers(long, session, 6)
    await compacting_turns(long, session, range(1, 5))
    early = await stored_messages(sessions, session)
    # Turn 5's model input would be 900 tokens, past 85% of the 1,000-token window. The runner keeps the
    # newest 300 tokens (30%): it summarizes through turn 3's answer, sequence 6.
    await compacting_turns(long, session, (5, 6))
    summary_text = "summary 1 through message 6"
    summaries = long.stack.invocations.summary_calls(session)
    assert [(call.turn_id, call.attempt) for call in summaries] == [("turn-5", 1)]
    assert list(summaries[0].model_input) == [render_message(message) for message in early[:6]]
    snapshot = await sessions.get_agent_snapshot(session)
    assert snapshot.context_summary is not None
    assert (snapshot.context_summary.generation, snapshot.context_summary.last_sequence) == (1, 6)
    assert snapshot.context_summary.text == summary_text
    fifth = long.stack.invocations.model_calls(session, "turn-5")
    kept = [render_message(message) for message in early[6:8]]
    assert [list(call.model_input) for call in fifth] == [
        [f"summary: {summary_text}", *kept, f"user: {question(5)}"]
    ]
    sixth = long.stack.invocations.model_calls(session, "turn-6")[0].model_input
    assert list(sixth[:3]) == [f"summary: {summary_text}", *kept] and len(sixth) == 6
    history = await long.stack.read_step_history(session)
    completed = [entry for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
    assert [entry.step_type for entry in completed].count("CompactContext") == 1
    compact = next(entry for entry in completed if entry.step_type == "CompactContext")
    assert compact.step_input == {"through_sequence": 6}
    # After the summary a model call loads only the chunks after it; the summary call only those it folds.
    last_run = [entry for entry in completed if entry.step_type == "RunModel"][-1]
    assert all(int(key) > 6 for key in last_run.loaded_instances("AgentMessageChunks"))
    assert all(int(key) <= 6 for key in compact.loaded_instances("AgentMessageChunks"))
    events = await read_agent_events(sessions, session)
    payloads = {
        kind: [json.loads(event.payload) for event in events if event.type == kind]
        for kind in (AgentEventType.COMPACTION_STARTED, AgentEventType.COMPACTION_FINISHED)
    }
    assert payloads == {
        AgentEventType.COMPACTION_STARTED: [{"through_sequence": 6}],
        AgentEventType.COMPACTION_FINISHED: [{"generation": 1, "through_sequence": 6}],
    }
    assert snapshot.usage.model_calls == 7  # six answers and the summary call
    # Retention deleted the chunks behind the summary while 6 messages stayed after them.
    page = await sessions.list_agent_messages(session, limit=50)
    assert [message.sequence for message in page.messages] == list(range(7, 13))
    assert (page.next_before_sequence, page.deleted_before_sequence) == (None, 7)
    assert [message.sequence for message in snapshot.messages] == list(range(7, 13))
    check_layout(await long.layout(flow, session), 12)


async def test_a_crash_during_compaction_reruns_only_the_summary_call(long: Long) -> None:
    flow, session = long.flows.compacting, long.stack.new_session_id("compact-crash")
    script_answers(long, session, 5)
    long.stack.scripts.set_summaries(session, {"turn-5": ScriptedResponse(gate="summary")})
    await compacting_turns(long, session, range(1, 5))
    assert await long.sessions(flow).send_user_message(session, question(5))
    await long.stack.gate(session, "summary").wait_until_reached()
    await long.replace_worker()
    done = await wait_for_turn_end(long.sessions(flow), session, 5)
    summaries = long.stack.invocations.summary_calls(session)
    assert [call.attempt for call in summaries] == [1, 2] and summaries[0].pid != summaries[1].pid
    assert [call.attempt for call in long.stack.invocations.model_calls(session, "turn-5")] == [1]
    assert done.context_summary is not None and done.context_summary.generation == 1
    assert done.messages[-1].text == answer(5)


async def test_cancel_turn_during_compaction_stops_the_summary_call(long: Long) -> None:
    flow, session = long.flows.compacting, long.stack.new_session_id("compact-cancel")
    sessions = long.sessions(flow)
    script_answers(long, session, 6)
    long.stack.scripts.set_summaries(session, {"turn-5": ScriptedResponse(block_until_cancelled=True)})
    await compacting_turns(long, session, range(1, 5))
    assert await sessions.send_user_message(session, question(5))
    await wait_until("the summary call", lambda: long.stack.invocations.summary_calls(session))
    compacting = await sessions.get_agent_snapshot(session)
    assert compacting.state is not None and compacting.state.status is AgentSessionStatus.COMPACTING_CONTEXT
    assert await sessions.cancel_turn(session)
    cancelled = await wait_for_turn_end(sessions, session, 5)
    assert cancelled.context_summary is None and cancelled.state is not None
    assert cancelled.state.last_turn_error is None
    assert [
        call.step_execution_id.split("-")[0] for call in long.stack.invocations.cancelled_model_calls(session)
    ] == ["CompactContext"]
    assert long.stack.invocations.model_calls(session, "turn-5") == []
    # The next turn compacts again, this time to the end, and answers.
    done = await compacting_turns(long, session, (6,))
    assert done.context_summary is not None and done.context_summary.generation == 1
    assert done.messages[-1].text == answer(6)


async def test_the_client_waits_follow_a_turn_that_compacts_first_and_is_steered(long: Long) -> None:
    flow, session = long.flows.compacting, long.stack.new_session_id("compact-waits")
    script_answers(long, session, 6)
    long.stack.scripts.set_summaries(session, {"turn-5": ScriptedResponse(gate="summary")})
    await compacting_turns(long, session, range(1, 5))
    # A client process that imports no agent passes the Worker's options, compaction included.
    client_flow = AgentSessionFlow.for_client(flow_type=flow.flow_type, options=flow.options)
    async with AgentSessionClient.connect(long.stack.server_address, client_flow) as sessions:
        assert await sessions.send_user_message(session, question(5))
        summary = long.stack.gate(session, "summary")
        await summary.wait_until_reached()
        follower = asyncio.create_task(sessions.wait_for_turn_end(session))
        # While the turn compacts, the session is neither idle nor waiting for an approval.
        with pytest.raises(SessionWaitTimeoutError, match=r"status compacting_context.*active turn turn-5"):
            await sessions.wait_for_interrupt(session, timeout=timedelta(seconds=1))
        assert not follower.done()
        # A message steered in during the summary call ends turn 5 once the summary is stored.
        assert await sessions.steer_user_message(session, question(6))
        summary.release()
        steered = await follower
        assert (steered.turn_id, steered.outcome, steered.error) == ("turn-5", TurnOutcome.STEERED, None)
        assert steered.snapshot.context_summary is not None
        assert steered.snapshot.context_summary.generation == 1
        assert await sessions.wait_for_interrupt(session) is None
        following = await sessions.wait_for_turn_end(session)
        assert (following.turn_id, following.outcome) == ("turn-6", TurnOutcome.COMPLETED)
        assert [message.text for message in following.snapshot.messages[-2:]] == [question(6), answer(6)]
    assert long.stack.invocations.model_calls(session, "turn-5") == []


async def test_a_summary_call_that_keeps_failing_fails_the_turn_and_the_next_turn_compacts(
    long: Long,
) -> None:
    flow, session = long.flows.compacting, long.stack.new_session_id("compact-fail")
    script_answers(long, session, 6)
    long.stack.scripts.set_summaries(session, {"turn-5": ScriptedResponse(fail_attempts=(1, 2, 3))})
    await compacting_turns(long, session, range(1, 5))
    assert await long.sessions(flow).send_user_message(session, question(5))
    failed = await wait_for_turn_end(long.sessions(flow), session, 5)
    assert failed.state is not None and "scripted model failure on attempt 3" in str(
        failed.state.last_turn_error
    )
    assert failed.context_summary is None
    assert [call.attempt for call in long.stack.invocations.summary_calls(session, "turn-5")] == [1, 2, 3]
    assert long.stack.invocations.model_calls(session, "turn-5") == []
    history = await long.stack.read_step_history(session)
    route = next(entry for entry in history if entry.step_type == "RecordTurnFailure")
    assert route.step_input == {"through_sequence": 6}  # the failure route receives CompactContext's input
    done = await compacting_turns(long, session, (6,))
    assert done.context_summary is not None and done.messages[-1].text == answer(6)


# Session settings.


async def test_a_settings_update_during_a_turn_applies_to_the_next_turn_only(long: Long) -> None:
    flow, session = long.flows.storage, long.stack.new_session_id("settings")
    sessions = long.sessions(flow)
    first_turn = [
        ScriptedResponse(tool_calls=(read("read-1"),), gate="settings", fail_attempts=(1,)),
        ScriptedResponse(text="Shipped."),
    ]
    long.stack.scripts.set_turns(
        session, [first_turn, [ScriptedResponse(text="Big.")], [ScriptedResponse(text="None.")]]
    )
    await sessions.start_session(session, "Order 1?", session_settings={"model": "small"})
    await long.stack.gate(session, "settings").wait_until_reached()
    assert await sessions.update_session_settings(session, {"model": "big"})
    assert (await sessions.get_agent_snapshot(session)).session_settings == {"model": "big"}
    long.stack.gate(session, "settings").release()
    await wait_for_turn_end(sessions, session, 1)
    small, big = 'settings: {"model":"small"}', 'settings: {"model":"big"}'
    first = long.stack.invocations.model_calls(session, "turn-1")
    # The failed attempt, its retry, and the call after the tool all keep the turn's settings.
    assert [(call.attempt, call.model_input[0]) for call in first] == [(1, small), (2, small), (1, small)]
    await long.turn(flow, session, "Order 2?", 2)
    assert long.stack.invocations.model_calls(session, "turn-2")[0].model_input[0] == big
    assert await sessions.update_session_settings(session, {})
    done = await long.turn(flow, session, "Order 3?", 3)
    third = long.stack.invocations.model_calls(session, "turn-3")[0].model_input
    assert third[0] == "user: Order 1?" and third[-1] == "user: Order 3?"
    assert done.session_settings is None


async def test_invalid_and_oversized_settings_are_refused_and_the_session_goes_on(long: Long) -> None:
    flow, session = long.flows.storage, long.stack.new_session_id("bad-settings")
    sessions = long.sessions(flow)
    long.stack.scripts.set_turns(session, [[ScriptedResponse(text="Hi.")], [ScriptedResponse(text="Fine.")]])
    await long.turn(flow, session, "Hello", 1)
    oversized = {"instructions": "x" * MAX_SESSION_SETTINGS_BYTES}
    with pytest.raises(ValueError, match="MAX_SESSION_SETTINGS_BYTES"):
        await sessions.update_session_settings(session, oversized)
    with pytest.raises(ValueError, match="JSON"):
        await sessions.update_session_settings(session, {"ratio": float("nan")})

    async def raw(settings: object) -> bool:
        request = UpdateSessionSettingsRequest(session_settings=settings)  # pyright: ignore[reportArgumentType]
        return await long.stack.client.invoke_rpc(flow.update_session_settings, session, request)

    # Another client's compact JSON may measure up to the tolerance more than ours; beyond it, refused.
    within = "y" * (MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES - 20)
    assert await raw({"a": within})
    assert not await raw({"a": within + "y" * 40})
    assert not await raw(None)
    assert not await raw(["not", "an", "object"])
    assert (await sessions.get_agent_snapshot(session)).session_settings == {"a": within}
    assert await sessions.update_session_settings(session, {"model": "small"})
    await long.turn(flow, session, "Still there?", 2)
    assert (
        long.stack.invocations.model_calls(session, "turn-2")[0].model_input[0]
        == 'settings: {"model":"small"}'
    )


async def test_a_start_with_invalid_settings_fails_the_session_saying_why(long: Long) -> None:
    flow, sessions = long.flows.storage, long.sessions(long.flows.storage)
    unstarted = long.stack.new_session_id("start-oversized")
    with pytest.raises(ValueError, match="MAX_SESSION_SETTINGS_BYTES"):
        await sessions.start_session(
            unstarted, "Hi", session_settings={"a": "x" * MAX_SESSION_SETTINGS_BYTES}
        )
    session = long.stack.new_session_id("start-invalid")
    start = AgentSessionStartInput(initial_message="Hi", session_settings=["model", "big"])  # pyright: ignore[reportArgumentType]
    await long.stack.client.start_flow(flow, session, start, StartFlowOptions())
    info = await wait_until(
        "the session to fail",
        lambda: _failed(long, session),
    )
    assert info == FlowStatus.FAILED
    failed = await sessions.get_agent_snapshot(session)
    assert failed.state is not None and failed.state.status is AgentSessionStatus.FAILED
    assert str(failed.state.last_turn_error).startswith(f"{INVALID_START_SETTINGS_REASON}: ")
    assert "JSON object, got list" in str(failed.state.last_turn_error)
    assert long.stack.invocations.model_calls(session) == []


async def _failed(long: Long, session: str) -> FlowStatus | None:
    status = (await long.stack.client.describe_flow(session)).status
    return status if status == FlowStatus.FAILED else None
