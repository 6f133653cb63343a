"""Claude harness specifics through whole sessions: devserver, Worker child, the real CLI, scripted API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from dex_agents import (
    CONTEXT_SUMMARY_HEADER,
    WRITE_TODOS,
    AgentSessionClient,
    InteractionMode,
    MessageRole,
    PlanStatus,
    build_plan_note,
)
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    recorded_usage,
    text_by_model_step,
    wait_for_turn_end,
    wait_until,
)

from tests.matrix_spec import PACKAGE_DIR
from tests.processes import is_running, running_tree
from tests.scripted_claude import unexpected_requests_log
from tests.specifics_agents import BASH_REFUSAL, REMOVAL_REFUSAL, build_flows, permission_log_path

pytestmark = pytest.mark.asyncio(loop_scope="module")

ONE_TOOL_STEP = ["StartAgentSession", "RunModel", "CallTool", "RunModel"]
"""The Steps of a turn with one call in a tool Step."""


@dataclass
class Session:
    stack: AgentTestStack
    plain: AgentSessionClient
    builtins: AgentSessionClient
    deferred_reads: AgentSessionClient
    guarded: AgentSessionClient
    permissions: AgentSessionClient
    planning: AgentSessionClient
    compacting: AgentSessionClient
    worker_home: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    flows = build_flows()
    state_dir = tmp_path_factory.mktemp("specifics")
    worker_home = tmp_path_factory.mktemp("worker-home")
    async with AgentTestStack(
        state_dir,
        flows,
        "tests.specifics_worker",
        worker_cwd=PACKAGE_DIR,
        # The Worker's own home: the runner must leave it untouched.
        worker_env={"HOME": str(worker_home)},
    ) as stack:
        await stack.start_worker()
        yield Session(
            stack,
            stack.sessions(flows[0]),
            stack.sessions(flows[1]),
            stack.sessions(flows[2]),
            stack.sessions(flows[3]),
            stack.sessions(flows[4]),
            stack.sessions(flows[5]),
            stack.sessions(flows[6]),
            worker_home,
        )


async def test_text_streams_as_deltas_and_usage_counts_every_model_call_of_the_run(session: Session) -> None:
    session_id = session.stack.new_session_id("streaming")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    receipt = ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me check order A-1.", tool_calls=(read,), input_tokens=100),
                ScriptedResponse(
                    text="It shipped; sending the receipt.", tool_calls=(receipt,), output_tokens=7
                ),
                ScriptedResponse(text="Receipt sent."),
            ]
        ],
    )
    await session.plain.start_session(session_id, "Where is A-1?")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1, timeout=90)
    events = await read_agent_events(session.plain, session_id)

    text_by_step = text_by_model_step(events)
    # The first RunModel streamed both of its model calls' text; the resumed one streamed its own.
    assert list(text_by_step.values()) == [
        "Let me check order A-1.It shipped; sending the receipt.",
        "Receipt sent.",
    ]
    recorded = recorded_usage(events)
    assert [(usage["model_calls"], usage["input_tokens"], usage["output_tokens"]) for usage in recorded] == [
        (2, 110, 12),
        (1, 10, 5),
    ]
    assert snapshot.usage.model_calls == 3
    texts = [
        message.text
        for message in snapshot.messages
        if message.role is MessageRole.ASSISTANT and message.text
    ]
    assert texts == ["Let me check order A-1.", "It shipped; sending the receipt.", "Receipt sent."]


async def test_an_api_error_a_retry_would_repeat_ends_the_turn_without_a_retry(session: Session) -> None:
    session_id = session.stack.new_session_id("bad-request")
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(turn_error="scripted refusal: the request is malformed")]]
    )
    await session.plain.start_session(session_id, "Hello")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is not None
    assert "the request is malformed" in snapshot.state.last_turn_error
    calls = session.stack.invocations.model_calls(session_id)
    # The CLI may resend a refused request within its run, but the session never retries the RunModel.
    assert calls and {(call.step_execution_id, call.attempt) for call in calls} == {("RunModel-1", 1)}
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
    ]


async def test_an_unknown_tool_name_is_answered_inside_the_harness(session: Session) -> None:
    session_id = session.stack.new_session_id("unknown-tool")
    rocket = ScriptedToolCall("launch_rocket", {"target": "moon"}, "rocket-1")
    session.stack.scripts.set_turns(
        session_id,
        [[ScriptedResponse(tool_calls=(rocket,)), ScriptedResponse(text="I cannot launch rockets.")]],
    )
    await session.plain.start_session(session_id, "Launch a rocket")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    calls = session.stack.invocations.model_calls(session_id)
    # The CLI refuses a tool it does not have by itself and asks the model again in the same run.
    assert len(calls) == 2 and calls[0].step_execution_id == calls[1].step_execution_id
    assert "[rocket-1] error:" in calls[1].model_input_text
    assert "launch_rocket" in calls[1].model_input_text
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
    ]
    [tool_message] = [message for message in snapshot.messages if message.role is MessageRole.TOOL]
    assert tool_message.tool_call_id == "rocket-1"


async def test_an_enabled_built_in_tool_runs_inline_and_the_workers_home_stays_untouched(
    session: Session, tmp_path: Path
) -> None:
    session_id = session.stack.new_session_id("bash")
    marker = tmp_path / "bash-ran.txt"
    bash = ScriptedToolCall("Bash", {"command": f"echo ran >> {marker}", "description": "mark"}, "bash-1")
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(tool_calls=(bash,)), ScriptedResponse(text="Done.")]]
    )
    await session.builtins.start_session(session_id, "Mark the file")
    snapshot = await wait_for_turn_end(session.builtins, session_id, 1, timeout=90)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    # Built-ins run in the harness, inside RunModel: no Step of their own, at least once.
    assert marker.read_text() == "ran\n"
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
    ]
    # Every run had a home and a config directory of its own.
    assert sorted(path.name for path in session.worker_home.iterdir()) == []


async def test_the_users_can_use_tool_decides_about_a_built_in_and_never_about_the_runners_tools(
    session: Session, tmp_path: Path
) -> None:
    session_id = session.stack.new_session_id("guarded")
    marker = tmp_path / "bash-ran.txt"
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    bash = ScriptedToolCall("Bash", {"command": f"echo ran >> {marker}", "description": "mark"}, "bash-1")
    receipt = ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(tool_calls=(read, bash)),
                ScriptedResponse(tool_calls=(receipt,)),
                ScriptedResponse(text="Receipt sent; I may not run commands."),
            ]
        ],
    )
    await session.guarded.start_session(session_id, "Look up A-1, mark the file, send the receipt")
    snapshot = await wait_for_turn_end(session.guarded, session_id, 1, timeout=90)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    # The CLI asked the user's callback about Bash, which refused it; the command never ran.
    asked = [
        json.loads(line) for line in permission_log_path(session.stack.state_dir).read_text().splitlines()
    ]
    assert asked == [
        {
            "tool": "Bash",
            "input": {"command": f"echo ran >> {marker}", "description": "mark"},
            "tool_use_id": "bash-1",
        }
    ]
    assert not marker.exists()
    calls = session.stack.invocations.model_calls(session_id)
    assert f"[bash-1] error: {BASH_REFUSAL}" in calls[1].model_input_text
    # The runner's own tools never reached the callback: the read ran inline, the write in its own Step.
    assert "[read-1] ok: lookup_order done" in calls[1].model_input_text
    assert [run.tool_call_id for run in session.stack.invocations.tool_calls(session_id, "send_receipt")] == [
        "receipt-1"
    ]
    assert executed_step_types(await session.stack.read_step_history(session_id)) == ONE_TOOL_STEP


async def test_a_retried_model_step_runs_its_built_in_tool_again(session: Session, tmp_path: Path) -> None:
    session_id = session.stack.new_session_id("bash-retry")
    marker = tmp_path / "bash-ran.txt"
    bash = ScriptedToolCall("Bash", {"command": f"echo ran >> {marker}", "description": "mark"}, "bash-1")
    session.stack.scripts.set_turns(
        session_id,
        # The model call after the Bash run fails on attempt 1 (a 500; the CLI itself does not retry).
        [[ScriptedResponse(tool_calls=(bash,)), ScriptedResponse(text="Done.", fail_attempts=(1,))]],
    )
    await session.builtins.start_session(session_id, "Mark the file")
    snapshot = await wait_for_turn_end(session.builtins, session_id, 1, timeout=120)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    calls = session.stack.invocations.model_calls(session_id)
    # Each attempt is a whole CLI run: Bash, then the model call that failed on attempt 1 and passed on 2.
    assert [(call.step_execution_id, call.attempt) for call in calls] == [
        ("RunModel-1", 1),
        ("RunModel-1", 1),
        ("RunModel-1", 2),
        ("RunModel-1", 2),
    ]
    assert "[bash-1] ok:" in calls[3].model_input_text
    # At least once: the retry ran the command again, still inline, with no Step of its own.
    assert marker.read_text() == "ran\nran\n"
    history = await session.stack.read_step_history(session_id)
    assert executed_step_types(history) == ["StartAgentSession", "RunModel"]
    assert {entry.step_type for entry in history} == {"StartAgentSession", "RunModel", "AwaitUserMessage"}
    assert [entry.final_attempt for entry in history if entry.step_type == "RunModel"] == [2]
    texts = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT and m.text]
    assert texts == ["Done."]


async def test_the_cli_asks_the_api_for_nothing_but_model_calls(session: Session) -> None:
    session_id = session.stack.new_session_id("traffic")
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(text="Hi.")], [ScriptedResponse(text="Bye.")]]
    )
    await session.plain.start_session(session_id, "Hello")
    await wait_for_turn_end(session.plain, session_id, 1)
    assert await session.plain.send_user_message(session_id, "Goodbye")
    await wait_for_turn_end(session.plain, session_id, 2)
    assert len(session.stack.invocations.model_calls(session_id)) == 2
    # Over every session of this module, the CLI sent nothing but POST /v1/messages to its API.
    assert not unexpected_requests_log(session.stack.state_dir).exists()


async def test_a_read_after_a_write_in_one_response_is_the_deferred_call(session: Session) -> None:
    session_id = session.stack.new_session_id("write-then-read")
    first = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    receipt = ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-1")
    second = ScriptedToolCall("lookup_order", {"order_id": "B-2"}, "read-2")
    again = ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-2")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(tool_calls=(first,)),
                ScriptedResponse(tool_calls=(receipt, second)),
                ScriptedResponse(tool_calls=(again,)),
                ScriptedResponse(text="Receipt sent; B-2 looked up."),
            ]
        ],
    )
    await session.plain.start_session(session_id, "Look up A-1, send its receipt, look up B-2")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1, timeout=90)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    # The CLI resumes only a response's last tool use, so the read after the write waited in a CallTool
    # Step, and the write was refused, re-issued and run in a Step of its own.
    calls = session.stack.invocations.model_calls(session_id)
    assert (
        "[receipt-1] error: PreToolUse:mcp__dex__send_receipt hook error: Not run"
        in calls[2].model_input_text
    )
    assert "[read-2] ok: lookup_order done" in calls[2].model_input_text
    assert [run.tool_call_id for run in session.stack.invocations.tool_calls(session_id, "send_receipt")] == [
        "receipt-2"
    ]
    read_runs = session.stack.invocations.tool_calls(session_id, "lookup_order")
    assert [(run.tool_call_id, bool(run.idempotency_key)) for run in read_runs] == [
        ("read-1", False),
        ("read-2", True),
    ]
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "RunModel",
        "CallTool",
        "RunModel",
    ]


async def test_inline_read_tools_false_runs_every_read_in_its_own_step(session: Session) -> None:
    session_id = session.stack.new_session_id("deferred-read")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Shipped.")]]
    )
    await session.deferred_reads.start_session(session_id, "Where is A-1?")
    await wait_for_turn_end(session.deferred_reads, session_id, 1)

    [run] = session.stack.invocations.tool_calls(session_id, "lookup_order")
    assert run.idempotency_key == f"{session_id}/turn-1/read-1"
    calls = session.stack.invocations.model_calls(session_id)
    assert len(calls) == 2 and calls[0].step_execution_id != calls[1].step_execution_id
    assert executed_step_types(await session.stack.read_step_history(session_id)) == ONE_TOOL_STEP


async def test_cancel_turn_during_a_built_in_command_kills_the_cli_and_the_command(
    session: Session, tmp_path: Path
) -> None:
    session_id = session.stack.new_session_id("cancel-bash")
    pid_file = tmp_path / "command.pid"
    # The command writes its shell's process ID and becomes a long sleep that ignores SIGTERM, as some
    # commands do: a child of the CLI's run that only a kill ends.
    command = f"trap '' TERM && echo $$ > {pid_file} && exec sleep 600"
    bash = ScriptedToolCall("Bash", {"command": command, "description": "wait"}, "bash-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [ScriptedResponse(tool_calls=(bash,)), ScriptedResponse(text="Never said.")],
            [ScriptedResponse(text="Stopped.")],
        ],
    )
    await session.builtins.start_session(session_id, "Wait a while")
    await wait_until("the command to start", lambda: pid_file.exists() and pid_file.read_text().strip())
    command_pid = int(pid_file.read_text())
    [worker] = session.stack.workers
    run = running_tree(worker.pid)
    assert command_pid in run and is_running(command_pid), (command_pid, run)

    assert await session.builtins.cancel_turn(session_id)
    cancelled = await wait_for_turn_end(session.builtins, session_id, 1)
    # The CLI and every process it started were killed, the command included, not left to run on.
    await wait_until("the CLI run's processes to end", lambda: not [pid for pid in run if is_running(pid)])
    assert cancelled.state is not None and cancelled.state.last_turn_error is None, cancelled.state
    # The cancelled run made no deferral, so nothing of it is kept: no call waits for a result.
    assert [message.role for message in cancelled.messages] == [MessageRole.USER]

    assert await session.builtins.send_user_message(session_id, "Never mind")
    done = await wait_for_turn_end(session.builtins, session_id, 2)
    assert done.messages[-1].text == "Stopped.", done.messages
    [next_call] = session.stack.invocations.model_calls(session_id, "turn-2")
    assert "Wait a while" in next_call.model_input_text and "Never mind" in next_call.model_input_text


async def test_a_planning_turn_offers_the_cli_write_todos_alone_and_the_next_turn_reads_the_plan(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("planning")
    draft = ScriptedToolCall(
        WRITE_TODOS, {"todos": [{"content": "Look up A-1", "status": "pending"}]}, "todos-1"
    )
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [ScriptedResponse(text="My plan.", tool_calls=(draft,)), ScriptedResponse(text="Approve it?")],
            [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="A-1 shipped.")],
        ],
    )
    await session.planning.start_session(session_id)
    assert await session.planning.send_user_message(session_id, "Plan the look-up of A-1", plan_mode=True)
    planned = await wait_for_turn_end(session.planning, session_id, 1, timeout=90)
    assert planned.plan is not None and (planned.plan.revision, planned.plan.status) == (1, PlanStatus.DRAFT)
    first, second = session.stack.invocations.model_calls(session_id, "turn-1")
    # Neither the runner's tools nor Claude Code's Bash: the CLI offered the model write_todos alone.
    assert list(first.offered_tools) == [WRITE_TODOS] == list(second.offered_tools), first.offered_tools
    # The plan note (no plan yet, this turn only plans) is user text before the turn's own message.
    note = build_plan_note(None, InteractionMode.PLANNING)
    assert note is not None and f"user: {note}\n\nPlan the look-up of A-1" in first.model_input_text

    assert await session.planning.execute_plan(session_id, 1)
    executed = await wait_for_turn_end(session.planning, session_id, 2, timeout=90)
    assert executed.state is not None and executed.state.last_turn_error is None, executed.state
    [executing, _] = session.stack.invocations.model_calls(session_id, "turn-2")
    assert {"lookup_order", "Bash", WRITE_TODOS} <= set(executing.offered_tools), executing.offered_tools
    turn_input = executing.model_input_text.split("Approve it?")[-1]
    note = "[Dex] The current plan, revision 1, is active:\n- [pending] Look up A-1"
    assert note in turn_input and turn_input.index(note) < turn_input.index(
        "The user approved plan revision 1"
    )


async def test_a_compacted_session_resumes_its_cli_conversation_from_the_summary(session: Session) -> None:
    session_id = session.stack.new_session_id("compacting")
    long_answer = "Alpha " * 153 + "ok"  # 920 characters: 230 tokens as the runner counts them
    summary = "The user asked about A; the answer was long."
    session.stack.scripts.set_turns(
        session_id,
        [
            [ScriptedResponse(text=long_answer)],
            [ScriptedResponse(text="Bravo.")],
            [ScriptedResponse(text="C.")],
        ],
    )
    session.stack.scripts.set_summaries(session_id, {"turn-3": ScriptedResponse(text=summary)})
    await session.compacting.start_session(session_id, "Tell me about A.")
    await wait_for_turn_end(session.compacting, session_id, 1, timeout=90)
    assert await session.compacting.send_user_message(session_id, "And B?")
    await wait_for_turn_end(session.compacting, session_id, 2, timeout=90)
    # Turn 3 starts at 243 tokens: the session summarizes turn 1 and keeps turn 2 verbatim.
    assert await session.compacting.send_user_message(session_id, "And what about C then?")
    done = await wait_for_turn_end(session.compacting, session_id, 3, timeout=90)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert done.context_summary is not None and done.context_summary.text == summary
    assert "CompactContext" in executed_step_types(await session.stack.read_step_history(session_id))
    [call] = session.stack.invocations.model_calls(session_id, "turn-3")
    # The CLI read the summary, then turn 2 from its own transcript, then the new prompt; turn 1 is gone.
    seen = call.model_input_text
    assert seen.startswith(f"user: {CONTEXT_SUMMARY_HEADER}\n\n{summary}"), seen
    assert "Alpha" not in seen and "Tell me about A." not in seen
    assert seen.index("And B?") < seen.index("Bravo.") < seen.index("And what about C then?")


async def test_a_permission_request_waits_for_the_sessions_approval_across_a_worker_kill(
    session: Session, tmp_path: Path
) -> None:
    session_id = session.stack.new_session_id("permissions")
    marker = tmp_path / "approved.txt"
    first = ScriptedToolCall("Bash", {"command": f"echo ran >> {marker}", "description": "mark"}, "bash-1")
    removal = ScriptedToolCall("Bash", {"command": f"rm {marker}", "description": "remove"}, "rm-1")
    second = ScriptedToolCall("Bash", {"command": f"echo again >> {marker}", "description": "mark"}, "bash-2")
    session.stack.scripts.set_turns(
        session_id,
        [
            [ScriptedResponse(text="Marking.", tool_calls=(first,)), ScriptedResponse(text="Marked.")],
            [
                ScriptedResponse(tool_calls=(removal,)),
                ScriptedResponse(tool_calls=(second,)),
                ScriptedResponse(text="Left as it is."),
            ],
        ],
    )
    await session.permissions.start_session(session_id, "Mark the file")
    interrupt = await session.permissions.wait_for_interrupt(session_id, timeout=timedelta(seconds=90))
    assert interrupt is not None and (interrupt.tool_call_id, interrupt.tool_name) == ("bash-1", "Bash")
    assert json.loads(interrupt.arguments)["command"] == f"echo ran >> {marker}"
    assert not marker.exists()

    # The request waits in the session, not in a Worker: a replacement Worker carries the turn on.
    session.stack.kill_workers()
    await session.stack.start_worker()
    assert await session.permissions.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True)
    first_turn = await wait_for_turn_end(session.permissions, session_id, 1, timeout=90)
    assert first_turn.state is not None and first_turn.state.last_turn_error is None, first_turn.state
    # Approved, the command ran once, in the resumed run, and the model read its own result.
    assert marker.read_text() == "ran\n"
    calls = session.stack.invocations.model_calls(session_id)
    assert (
        len(calls) == 2
        and "tool Bash [bash-1] ok: (Bash completed with no output)" in calls[1].model_input_text
    )
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "ResumeTurn",
        "RunModel",
    ]

    # The user's can_use_tool refuses the removal itself; the session asks only about the next command.
    assert await session.permissions.send_user_message(session_id, "Mark it again, then clean up")
    interrupt = await session.permissions.wait_for_interrupt(session_id, timeout=timedelta(seconds=90))
    assert interrupt is not None and interrupt.tool_call_id == "bash-2"
    rejection = "Not today: the file stays as it is."
    assert await session.permissions.resolve_interrupt(
        session_id, interrupt.interrupt_id, approved=False, rejection_message=rejection
    )
    second_turn = await wait_for_turn_end(session.permissions, session_id, 2, timeout=90)
    assert second_turn.state is not None and second_turn.state.last_turn_error is None, second_turn.state
    assert marker.read_text() == "ran\n"
    last_input = session.stack.invocations.model_calls(session_id)[-1].model_input_text
    assert f"[rm-1] error: {REMOVAL_REFUSAL}" in last_input
    assert f"[bash-2] error: {rejection}" in last_input, last_input
    # The stored result is the rejection text as it is, the shape of every adapter's rejected call.
    [stored] = [
        message
        for message in second_turn.messages
        if message.tool_call_id == "bash-2" and message.role is MessageRole.TOOL
    ]
    assert stored.tool_output == rejection
