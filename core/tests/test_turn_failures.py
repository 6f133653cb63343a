"""Failed turns: the exact turn-failure note, plain last_turn_error texts, and usage totals."""

import pytest

from dex_agents import TURN_FAILURE_NOTE_FOOTER, TURN_FAILURE_NOTE_HEADER, MessageRole
from dex_agents.limits import MAX_TURN_FAILURE_NOTE_BYTES, TURN_FAILURE_NOTE_CUT_MARKER
from dex_agents.testing import ScriptedResponse, wait_for_turn_end
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")

ALWAYS = (1, 2, 3)


async def test_failed_turn_note_lists_each_final_call_in_model_order(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("note")
    receipt = harness.call(harness.tools.idempotent_write, "receipt-1", order_id="A-1")
    lookup = harness.call(harness.tools.read, "lookup-1", order_id="B-2", error="order B-2 is archived")
    harness.script(
        session,
        [ScriptedResponse(tool_calls=(receipt, lookup)), ScriptedResponse(fail_attempts=ALWAYS)],
        [ScriptedResponse(text="Nothing else to do.")],
    )
    await harness.sessions.start_session(session, "Send the receipt of A-1 and look up B-2")
    failed = await wait_for_turn_end(harness.sessions, session, 1)
    # The runner's unstored items come first (build_unfinished_turn_messages): every call with its result.
    assert [
        (message.role, message.tool_call_id, message.tool_output) for message in failed.messages[1:5]
    ] == [
        (MessageRole.ASSISTANT, "receipt-1", None),
        (MessageRole.ASSISTANT, "lookup-1", None),
        (MessageRole.TOOL, "receipt-1", 'send_receipt done: {"order_id":"A-1"}'),
        (MessageRole.TOOL, "lookup-1", "The tool call failed: order B-2 is archived"),
    ]
    assert [(message.role, message.text) for message in failed.messages[::5]] == [
        (MessageRole.USER, "Send the receipt of A-1 and look up B-2"),
        (
            MessageRole.USER,
            "[Dex] The previous turn failed after these tool calls ran:\n"
            '- send_receipt {"order_id":"A-1"} -> succeeded: send_receipt done: {"order_id":"A-1"}\n'
            '- lookup_order {"order_id":"B-2"} -> failed: The tool call failed: order B-2 is archived\n'
            "Do not repeat these tool calls unless the user asks again.",
        ),
    ]
    assert failed.tool_calls == () and failed.pending_interrupts == ()
    assert failed.state is not None and failed.state.last_turn_error is not None
    error = failed.state.last_turn_error
    assert "RuntimeError" in error and "scripted model failure on attempt 3" in error, error
    assert "invalid result" not in error
    assert len(harness.model_calls(session, "turn-1")) == 4  # the tool request, then three failed attempts


async def test_value_error_in_the_runner_is_reported_plainly_and_stores_no_note(
    harness: MatrixHarness,
) -> None:
    session = harness.stack.new_session_id("value-error")
    harness.script(
        session,
        [ScriptedResponse(fail_attempts=ALWAYS, failure_type="ValueError")],
        [ScriptedResponse(text="Recovered.")],
    )
    await harness.sessions.start_session(session, "Hello")
    failed = await wait_for_turn_end(harness.sessions, session, 1)
    assert failed.state is not None and failed.state.last_turn_error is not None
    error = failed.state.last_turn_error
    # The SDK reports a ValueError from an async Step as InvalidStepResultError; the session names the
    # runner's own exception instead.
    assert "ValueError" in error and "scripted model failure on attempt 3" in error, error
    assert "invalid result" not in error and "InvalidStepResultError" not in error
    assert [message.text for message in failed.messages] == ["Hello"]  # no tool ran, so no note
    assert await harness.sessions.send_user_message(session, "Again?")
    done = await wait_for_turn_end(harness.sessions, session, 2)
    assert done.state is not None and done.state.last_turn_error is None
    assert [message.text for message in done.messages] == ["Hello", "Again?", "Recovered."]


async def test_usage_adds_up_every_model_call(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("usage")
    read = harness.call(harness.tools.read, "read-1")
    harness.script(
        session,
        [
            ScriptedResponse(tool_calls=(read,), input_tokens=100, output_tokens=7),
            ScriptedResponse(text="Found it.", input_tokens=150, output_tokens=9),
        ],
        [ScriptedResponse(text="Bye.", input_tokens=200, output_tokens=3)],
    )
    await harness.sessions.start_session(session, "Find A-1")
    first = await wait_for_turn_end(harness.sessions, session, 1)
    assert (first.usage.model_calls, first.usage.input_tokens, first.usage.output_tokens) == (2, 250, 16)
    assert await harness.sessions.send_user_message(session, "Thanks")
    second = await wait_for_turn_end(harness.sessions, session, 2)
    assert (second.usage.model_calls, second.usage.input_tokens, second.usage.output_tokens) == (3, 450, 19)


async def test_a_failed_turn_keeps_its_note_when_a_read_returned_600_kb(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("big-note")
    read = harness.call(harness.tools.read, "read-1", order_id="A-1", output_size=600 * 1024)
    write = harness.call(harness.tools.idempotent_write, "receipt-1", order_id="A-1")
    harness.script(
        session,
        [ScriptedResponse(tool_calls=(read, write)), ScriptedResponse(fail_attempts=ALWAYS)],
        [ScriptedResponse(text="The receipt was already sent.")],
    )
    await harness.sessions.start_session(session, "Look up A-1 and send its receipt")
    failed = await wait_for_turn_end(harness.sessions, session, 1)
    assert failed.state is not None and failed.state.last_turn_error is not None

    assert await harness.sessions.send_user_message(session, "Did the receipt go out?")
    await wait_for_turn_end(harness.sessions, session, 2)
    [seen] = harness.model_calls(session, "turn-2")
    note = seen.model_input[-2]
    lines = note.removeprefix("user: ").split("\n")
    assert lines[0] == TURN_FAILURE_NOTE_HEADER and lines[-1] == TURN_FAILURE_NOTE_FOOTER, lines
    assert lines[2] == (
        '- send_receipt {"order_id":"A-1"} -> succeeded: send_receipt done: {"order_id":"A-1"}'
    ), lines[2]
    # The read's 600 KB result is cut, with a marker that says so, to keep the note storable.
    assert lines[1].startswith('- lookup_order {"order_id":"A-1"} -> succeeded: xxx'), lines[1][:200]
    assert lines[1].endswith(TURN_FAILURE_NOTE_CUT_MARKER), lines[1][-200:]
    assert len(note.encode()) <= MAX_TURN_FAILURE_NOTE_BYTES + len("user: ")
    assert len(harness.tool_runs(session, harness.tools.idempotent_write)) == 1
