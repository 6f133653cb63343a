"""The design's 11-item matrix against the devserver, with the real Claude Code CLI and Worker children.

The core's harness runs every item. Items 4, 5, 7, 8, 9, 10 and 11 run unchanged. Item 12 (an unknown
tool, beyond the design's 11) is skipped: the CLI refuses a tool name the agent does not have itself,
inside `RunModel`, and asks the model again in the same run, so no tool Step records the call.
Items 13, 14 and 16 run unchanged (item 13 with `MatrixSpec.runs_reads_inline`; item 16 offers the
built-ins through the runner's MCP server and defers the `ask_user` call). Items 1, 2, 3, 6 and 15 are
about read tools, which the whole-turn harness runs inline in the CLI rather than in `CallTool` Steps, so
this class replaces them with what holds in harness mode, and proves it:

1. a read turn is one `RunModel` (two model calls and the read inside it), and the history replays;
2. parallel reads run inside `RunModel`, at the same time; parallel non-read calls cannot all wait at once
   (the CLI keeps one deferred call per response): the last runs in its Step, the others are refused
   and re-issued;
3. the approval waits after the inline read, survives a Worker restart, and the write runs once;
6. a Worker killed in `RunModel` repeats the model calls and the inline read of that `RunModel`
   (at least once), never a write that already ran in its own Step;
15. `cancel_turn` during a resumed run's model call kills the CLI and everything it started, and the turn
    keeps the read and the write of its deferral, with their results.
"""

import collections

import pytest
from dex_agents import TURN_CANCELLED_NOTE_HEADER, AgentEventType, MessageRole
from dex_agents.testing import (
    ScriptedResponse,
    executed_step_types,
    read_agent_events,
    stored_calls_without_result,
    wait_for_agent_snapshot,
    wait_for_turn_end,
    wait_until,
)
from dex_agents.testing.matrix import AgentMatrixTests, MatrixHarness

from dex_agents_claude_agent_sdk import REFUSED_TOOL_CALL_MESSAGE
from tests.matrix_spec import SPEC
from tests.processes import command_line, is_running, running_tree


class TestClaudeAgentSdkMatrix(AgentMatrixTests):
    spec = SPEC

    # Item 17's hundred-odd turns each start the real CLI, and ci.sh runs this suite on the lockfile and on
    # the lowest versions at once: 180 s (the suite's default) is too tight on a two-core machine.
    @pytest.mark.timeout(600)
    async def test_17_a_session_of_large_messages_past_20_mib_stays_servable_by_fresh_workers(
        self, harness: MatrixHarness
    ) -> None:
        """Item 17 unchanged, with the time the CLI's process starts need."""
        await super().test_17_a_session_of_large_messages_past_20_mib_stays_servable_by_fresh_workers(harness)

    async def test_1_read_tool_turn_shape_and_history_replay(self, harness: MatrixHarness) -> None:
        """Harness mode: a read turn is one RunModel holding both model calls and the read."""
        session = harness.stack.new_session_id("m1")
        read = harness.call(harness.tools.read, "read-1", order_id="A-1")
        harness.script(
            session,
            [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Order A-1 has shipped.")],
            [ScriptedResponse(text="You are welcome.")],
        )
        await harness.sessions.start_session(session, "Where is order A-1?")
        await wait_for_turn_end(harness.sessions, session, 1)
        assert await harness.sessions.send_user_message(session, "Thanks!")
        snapshot = await wait_for_turn_end(harness.sessions, session, 2)

        assert await harness.executed(session) == [
            "StartAgentSession",
            "RunModel",
            "AwaitUserMessage",
            "RunModel",
        ]
        calls = harness.model_calls(session)
        assert [call.turn_id for call in calls] == ["turn-1", "turn-1", "turn-2"]
        # Both model calls of turn 1 ran in one RunModel attempt, and so did the read.
        assert calls[0].step_execution_id == calls[1].step_execution_id != calls[2].step_execution_id
        runs = harness.tool_runs(session, harness.tools.read)
        assert [(run.step_execution_id, run.attempt) for run in runs] == [(calls[0].step_execution_id, 1)]
        assert "tool lookup_order [read-1] ok: lookup_order done" in calls[1].model_input_text
        # Turn 2 resumes the CLI conversation rebuilt from the stored messages alone.
        replayed = calls[2].model_input_text
        for expected in ("Where is order A-1?", "Order A-1 has shipped.", "Thanks!", "[read-1]"):
            assert expected in replayed, (expected, replayed)
        stored = [(message.role, message.tool_name, message.text) for message in snapshot.messages]
        assert stored[0] == (MessageRole.USER, None, "Where is order A-1?")
        assert (MessageRole.ASSISTANT, harness.tools.read, None) in stored
        assert (MessageRole.TOOL, harness.tools.read, None) in stored
        assert stored[-1] == (MessageRole.ASSISTANT, None, "You are welcome.")
        assert snapshot.usage.model_calls == 3

    async def test_2_parallel_tool_calls_run_as_parallel_steps(self, harness: MatrixHarness) -> None:
        """Harness mode: parallel reads run inline; of two parallel writes the second is re-issued."""
        session = harness.stack.new_session_id("m2")
        first = harness.call(harness.tools.read, "read-a", order_id="A-1", gate="first")
        second = harness.call(harness.tools.read, "read-b", order_id="B-2", gate="second")
        cancel = harness.call(harness.tools.single_attempt_write, "cancel-1", order_id="A-1")
        receipt = harness.call(harness.tools.idempotent_write, "receipt-1", order_id="B-2")
        again = harness.call(harness.tools.single_attempt_write, "cancel-2", order_id="A-1")
        harness.script(
            session,
            [
                ScriptedResponse(tool_calls=(first, second)),
                ScriptedResponse(tool_calls=(cancel, receipt)),
                ScriptedResponse(tool_calls=(again,)),
                ScriptedResponse(text="Cancelled A-1, receipt for B-2 sent."),
            ],
        )
        await harness.sessions.start_session(session, "Look up A-1 and B-2, cancel A-1, send B-2's receipt")
        first_gate = harness.stack.gate(session, "first")
        second_gate = harness.stack.gate(session, "second")
        # The CLI runs both reads at once, inside RunModel.
        await first_gate.wait_until_reached()
        await second_gate.wait_until_reached()
        first_gate.release()
        second_gate.release()
        await wait_for_turn_end(harness.sessions, session, 1)

        assert await harness.executed(session) == [
            "StartAgentSession",
            "RunModel",
            "CallTool",
            "RunModel",
            "CallSingleAttemptTool",
            "RunModel",
        ]
        assert len(harness.tool_runs(session, harness.tools.read)) == 2
        # The response's last write waited in its Step; the model read why the first one did not run and
        # issued it again, and that call ran in a Step of its own.
        receipts = harness.tool_runs(session, harness.tools.idempotent_write)
        cancels = harness.tool_runs(session, harness.tools.single_attempt_write)
        assert [run.tool_call_id for run in receipts] == ["receipt-1"]
        assert [run.tool_call_id for run in cancels] == ["cancel-2"]
        refusal = REFUSED_TOOL_CALL_MESSAGE.format(tool=harness.tools.single_attempt_write)
        seen = harness.model_calls(session)[2].model_input_text
        assert f"[cancel-1] error: PreToolUse:mcp__dex__cancel_order hook error: {refusal}" in seen, seen
        assert "[receipt-1] ok: send_receipt done" in seen

    async def test_3_approval_waits_beside_a_read_and_survives_a_worker_restart(
        self, harness: MatrixHarness
    ) -> None:
        """Harness mode: the read runs inline first; the approval survives a Worker kill; one write."""
        session = harness.stack.new_session_id("m3")
        read = harness.call(harness.tools.read, "read-1", gate="read")
        write = harness.call(harness.tools.approval_write, "refund-1", output="refund-1 accepted")
        harness.script(
            session, [ScriptedResponse(tool_calls=(read, write)), ScriptedResponse(text="Refunded.")]
        )
        await harness.sessions.start_session(session, "Refund order A-1")
        await harness.stack.gate(session, "read").wait_until_reached()
        harness.stack.gate(session, "read").release()
        interrupt = await wait_for_agent_snapshot(
            harness.sessions,
            session,
            lambda snapshot: next(iter(snapshot.pending_interrupts), None),
            description="the refund's approval",
        )
        assert interrupt.tool_call_id == "refund-1"
        await harness.replace_worker()
        assert not harness.tool_runs(session, harness.tools.approval_write)
        assert await harness.sessions.resolve_interrupt(session, interrupt.interrupt_id, approved=True)
        await wait_for_turn_end(harness.sessions, session, 1)
        assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
        assert len(harness.tool_runs(session, harness.tools.read)) == 1
        last_input = harness.model_calls(session)[-1].model_input_text
        assert "[refund-1] ok: refund-1 accepted" in last_input and "[read-1] ok:" in last_input
        assert await harness.executed(session) == [
            "StartAgentSession",
            "RunModel",
            "AwaitToolApproval",
            "CallSingleAttemptTool",
            "ResumeTurn",
            "RunModel",
        ]

    async def test_6_worker_killed_in_run_model_reruns_only_that_model_call(
        self, harness: MatrixHarness
    ) -> None:
        """Harness mode: a killed RunModel repeats its model calls and inline read, never a Step's write."""
        session = harness.stack.new_session_id("m6")
        write = harness.call(harness.tools.idempotent_write, "receipt-1")
        harness.script(
            session, [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="Sent.", gate="answer")]
        )
        await harness.sessions.start_session(session, "Send the receipt of A-1")
        await harness.stack.gate(session, "answer").wait_until_reached()
        await harness.replace_worker()
        await wait_for_turn_end(harness.sessions, session, 1)
        assert len(harness.tool_runs(session, harness.tools.idempotent_write)) == 1
        per_step = collections.Counter(call.step_execution_id for call in harness.model_calls(session))
        assert sorted(per_step.values()) == [1, 2], per_step
        assert await harness.executed(session) == [
            "StartAgentSession",
            "RunModel",
            "CallTool",
            "RunModel",
        ]

        inline = harness.stack.new_session_id("m6-read")
        read = harness.call(harness.tools.read, "read-1")
        harness.script(
            inline, [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Shipped.", gate="answer")]
        )
        await harness.sessions.start_session(inline, "Where is A-1?")
        await harness.stack.gate(inline, "answer").wait_until_reached()
        await harness.replace_worker()
        await wait_for_turn_end(harness.sessions, inline, 1)
        # The read ran inline in the killed RunModel and again in its rerun: reads are at least once.
        assert len(harness.tool_runs(inline, harness.tools.read)) == 2
        assert len(harness.model_calls(inline)) == 4
        assert executed_step_types(await harness.stack.read_step_history(inline)) == [
            "StartAgentSession",
            "RunModel",
        ]

    async def test_15_a_turn_cancelled_during_a_model_call_stops_it_and_keeps_the_tool_results(
        self, harness: MatrixHarness
    ) -> None:
        """Harness mode: cancel_turn kills the CLI in its model call; the turn keeps its deferral's items.

        The core's item 15 cancels the model call after an inline read, in the same CLI run, so the read
        is dropped with that run, as a retried RunModel repeats it (at least once). Here the cancelled
        model call is a resumed run's, after the read and the write of the first run: both are kept with
        their results, the CLI and everything it started are gone, and the next turn reads both results.
        """
        session = harness.stack.new_session_id("m15")
        read = harness.call(harness.tools.read, "read-1", output="A-1 shipped on Monday")
        receipt = harness.call(harness.tools.idempotent_write, "receipt-1", output="Receipt of A-1 sent")
        harness.script(
            session,
            [ScriptedResponse(tool_calls=(read, receipt)), ScriptedResponse(block_until_cancelled=True)],
            [ScriptedResponse(text="It shipped on Monday; the receipt is sent.")],
        )
        await harness.sessions.start_session(session, "Where is A-1? Send its receipt.")
        await wait_until(
            "the resumed run's model call to start",
            lambda: len(harness.model_calls(session, "turn-1")) == 2,
        )
        [worker] = harness.stack.workers
        cli = await wait_until("the CLI of the resumed run", lambda: running_tree(worker.pid))
        assert any("claude" in command_line(pid) for pid in cli), [command_line(pid) for pid in cli]

        assert await harness.sessions.cancel_turn(session, "turn-1")
        cancelled = await wait_for_turn_end(harness.sessions, session, 1)
        await wait_until(
            "the model call's request to be abandoned",
            lambda: harness.stack.invocations.cancelled_model_calls(session, "turn-1"),
        )
        await wait_until("no process of the CLI run to be left", lambda: not (cli & running_tree(worker.pid)))
        assert not [pid for pid in cli if is_running(pid)]
        assert cancelled.state is not None and cancelled.state.last_turn_error is None, cancelled.state
        assert stored_calls_without_result(cancelled.messages) == [], cancelled.messages
        ended = [message for message in cancelled.messages if message.turn_id == "turn-1"]
        results = {
            message.tool_call_id: message.tool_output for message in ended if message.role is MessageRole.TOOL
        }
        assert results == {"read-1": "A-1 shipped on Monday", "receipt-1": "Receipt of A-1 sent"}, ended
        assert not any(TURN_CANCELLED_NOTE_HEADER in (message.text or "") for message in ended), ended

        assert await harness.sessions.send_user_message(session, "When did it ship?")
        done = await wait_for_turn_end(harness.sessions, session, 2)
        assert done.messages[-1].text == "It shipped on Monday; the receipt is sent.", done.messages
        [next_call] = harness.model_calls(session, "turn-2")
        for seen in ("[read-1] ok: A-1 shipped on Monday", "[receipt-1] ok: Receipt of A-1 sent"):
            assert seen in next_call.model_input_text, (seen, next_call.model_input_text)
        assert len(harness.tool_runs(session, harness.tools.read)) == 1
        assert len(harness.tool_runs(session, harness.tools.idempotent_write)) == 1
        events = await read_agent_events(harness.sessions, session)
        assert [event.type for event in events].count(AgentEventType.TURN_CANCELLED) == 1
        steps = await harness.executed(session)
        assert "FinishTurnCancellation" in steps and "ApplyTurnControl" in steps, steps
        assert "RecordTurnFailure" not in steps, steps
