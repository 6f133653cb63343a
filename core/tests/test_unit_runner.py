"""Policy resolution and the model-visible texts: pure functions of the runner contract."""

import pytest

from dex_agents import (
    APPROVAL_DEADLINE_PASSED,
    DEFAULT_REJECTION_TOOL_RESULT,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    STEERED_REJECTION_MESSAGE,
    TURN_CANCELLED_REJECTION_MESSAGE,
    TURN_FAILURE_NOTE_FOOTER,
    TURN_FAILURE_NOTE_HEADER,
    AgentToolCall,
    CancellationReason,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
    build_turn_control_note,
    build_turn_failure_note,
    cancellation_rejection_message,
    describe_tool_call_outcome,
    resolve_tool_policy,
    server_endpoint,
)
from dex_agents.limits import MAX_TURN_FAILURE_NOTE_BYTES, TURN_FAILURE_NOTE_CUT_MARKER, utf8_size


def record(
    tool_call_id: str,
    status: ToolCallStatus,
    *,
    order: int = 0,
    arguments: str = '{"id":7}',
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=tool_call_id,
        turn_id="turn-1",
        tool_name=f"tool_{tool_call_id}",
        arguments=arguments,
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=status,
        output=output,
        error=error,
        rejection_message=rejection_message,
        deferral_order=order,
    )


@pytest.mark.parametrize(
    ("effect", "approval"),
    [
        (ToolEffect.READ, False),
        (ToolEffect.IDEMPOTENT_WRITE, False),
        (ToolEffect.NON_IDEMPOTENT_WRITE, True),
        (ToolEffect.UNCLASSIFIED, True),
    ],
)
def test_effect_default_approval(effect: ToolEffect, approval: bool) -> None:
    assert ToolPolicy(effect).is_approval_required is approval
    assert ToolPolicy(effect, requires_approval=not approval).is_approval_required is (not approval)


def test_explicit_policy_wins_over_framework_metadata_and_default() -> None:
    policies = {"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)}
    policy = resolve_tool_policy("refund", policies, ToolEffect.READ, framework_effect=ToolEffect.READ)
    assert policy == ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)


def test_framework_metadata_wins_over_default_effect() -> None:
    policy = resolve_tool_policy("search", {}, ToolEffect.UNCLASSIFIED, framework_effect=ToolEffect.READ)
    assert policy == ToolPolicy(ToolEffect.READ)
    assert not policy.is_approval_required


def test_default_effect_applies_without_policy_or_metadata() -> None:
    assert resolve_tool_policy("anything", {}) == ToolPolicy(ToolEffect.UNCLASSIFIED)
    assert resolve_tool_policy("anything", {}, ToolEffect.IDEMPOTENT_WRITE) == ToolPolicy(
        ToolEffect.IDEMPOTENT_WRITE
    )


def test_policy_accepts_plain_effect_strings() -> None:
    assert ToolPolicy("read").effect is ToolEffect.READ  # type: ignore[arg-type]


def test_model_visible_results() -> None:
    assert describe_tool_call_outcome(record("a", ToolCallStatus.SUCCEEDED, output="42")) == "42"
    assert describe_tool_call_outcome(record("a", ToolCallStatus.FAILED, error="no such order")) == (
        "The tool call failed: no such order"
    )
    assert describe_tool_call_outcome(record("a", ToolCallStatus.REJECTED)) == DEFAULT_REJECTION_TOOL_RESULT
    assert DEFAULT_REJECTION_TOOL_RESULT == "The user rejected this tool call."
    assert (
        describe_tool_call_outcome(record("a", ToolCallStatus.REJECTED, rejection_message="too expensive"))
        == "too expensive"
    )
    assert (
        describe_tool_call_outcome(record("a", ToolCallStatus.OUTCOME_UNKNOWN)) == OUTCOME_UNKNOWN_TOOL_RESULT
    )
    assert OUTCOME_UNKNOWN_TOOL_RESULT == (
        "The tool call's outcome is unknown: it stopped without returning a result, so it may or may not "
        "have taken effect. It will not be retried automatically."
    )
    assert APPROVAL_DEADLINE_PASSED == "approval deadline passed"


@pytest.mark.parametrize("status", [ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.APPROVED])
def test_a_record_that_is_not_final_has_no_outcome(status: ToolCallStatus) -> None:
    with pytest.raises(ValueError, match="not final"):
        describe_tool_call_outcome(record("a", status))


def test_turn_failure_note_lists_final_records_in_deferral_order() -> None:
    note = build_turn_failure_note(
        [
            record("b", ToolCallStatus.OUTCOME_UNKNOWN, order=1),
            record("c", ToolCallStatus.APPROVED, order=2),
            record("a", ToolCallStatus.SUCCEEDED, order=0, output="refunded"),
        ]
    )
    assert note == "\n".join(
        [
            "[Dex] The previous turn failed after these tool calls ran:",
            '- tool_a {"id":7} -> succeeded: refunded',
            f'- tool_b {{"id":7}} -> outcome_unknown: {OUTCOME_UNKNOWN_TOOL_RESULT}',
            "Do not repeat these tool calls unless the user asks again.",
        ]
    )
    assert note.startswith(TURN_FAILURE_NOTE_HEADER)
    assert note.endswith(TURN_FAILURE_NOTE_FOOTER)


def test_turn_failure_note_needs_a_final_record() -> None:
    with pytest.raises(ValueError, match="final"):
        build_turn_failure_note([record("a", ToolCallStatus.AWAITING_APPROVAL)])


def test_a_note_too_long_for_its_limit_cuts_the_longest_results_and_keeps_short_ones_whole() -> None:
    records = [
        record("read", ToolCallStatus.SUCCEEDED, order=0, output="r" * 600_000),
        record("write", ToolCallStatus.SUCCEEDED, order=1, output="refunded 40 EUR"),
        record("other", ToolCallStatus.FAILED, order=2, error="é" * 100_000),
    ]
    note = build_turn_failure_note(records)
    lines = note.split("\n")
    assert utf8_size(note) <= MAX_TURN_FAILURE_NOTE_BYTES
    assert (lines[0], lines[-1]) == (TURN_FAILURE_NOTE_HEADER, TURN_FAILURE_NOTE_FOOTER)
    assert lines[2] == '- tool_write {"id":7} -> succeeded: refunded 40 EUR'
    assert lines[1].startswith('- tool_read {"id":7} -> succeeded: rrr')
    assert lines[3].startswith('- tool_other {"id":7} -> failed: The tool call failed: ééé')
    assert all(line.endswith(TURN_FAILURE_NOTE_CUT_MARKER) for line in (lines[1], lines[3]))
    # The two cut results share the room equally: neither starves the other.
    assert abs(utf8_size(lines[1]) - utf8_size(lines[3])) < 64
    assert utf8_size(note) > MAX_TURN_FAILURE_NOTE_BYTES - 256, "the note uses the room it has"


def test_a_note_within_its_limit_is_not_cut() -> None:
    records = [record("a", ToolCallStatus.SUCCEEDED, output="x" * 1000)]
    assert build_turn_failure_note(records, max_bytes=2000).endswith(
        "x" * 1000 + "\n" + TURN_FAILURE_NOTE_FOOTER
    )
    cut = build_turn_failure_note(records, max_bytes=600)
    assert utf8_size(cut) <= 600 and TURN_FAILURE_NOTE_CUT_MARKER in cut


def test_arguments_are_cut_only_when_cutting_results_cannot_make_room() -> None:
    huge = '{"body":"' + "b" * 50_000 + '"}'
    records = [
        record("write", ToolCallStatus.SUCCEEDED, order=0, arguments=huge, output="written"),
        record("read", ToolCallStatus.SUCCEEDED, order=1, output="o" * 50_000),
    ]
    note = build_turn_failure_note(records, max_bytes=4096)
    write_line, read_line = note.split("\n")[1:3]
    assert utf8_size(note) <= 4096
    assert write_line.startswith('- tool_write {"body":"bbb') and write_line.endswith(
        " -> succeeded: written"
    )
    assert TURN_FAILURE_NOTE_CUT_MARKER in write_line
    # The read's result had to give up all of its room first: only the marker is left of it.
    assert read_line == f'- tool_read {{"id":7}} -> succeeded: {TURN_FAILURE_NOTE_CUT_MARKER.lstrip()}'


def test_cancelled_calls_carry_the_structured_rejection_messages() -> None:
    assert STEERED_REJECTION_MESSAGE == '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
    assert TURN_CANCELLED_REJECTION_MESSAGE == '{"status":"cancelled","reason":"turn_cancelled_by_user"}'
    assert cancellation_rejection_message(CancellationReason.STEERED) == STEERED_REJECTION_MESSAGE
    assert (
        cancellation_rejection_message(CancellationReason("turn_cancelled"))
        == TURN_CANCELLED_REJECTION_MESSAGE
    )
    abandoned = record("a", ToolCallStatus.REJECTED, rejection_message=STEERED_REJECTION_MESSAGE)
    assert describe_tool_call_outcome(abandoned) == STEERED_REJECTION_MESSAGE


@pytest.mark.parametrize(
    ("reason", "header"),
    [
        (CancellationReason.STEERED, "[Dex] The user steered the conversation after these tool calls ran:"),
        (
            CancellationReason.TURN_CANCELLED,
            "[Dex] The user stopped the previous turn after these tool calls ran:",
        ),
    ],
)
def test_steered_and_cancelled_notes_share_the_failure_note_lines(
    reason: CancellationReason, header: str
) -> None:
    records = [
        record(
            "b", ToolCallStatus.REJECTED, order=1, rejection_message=cancellation_rejection_message(reason)
        ),
        record("a", ToolCallStatus.SUCCEEDED, order=0, output="refunded"),
    ]
    note = build_turn_control_note(records, reason)
    assert note.split("\n") == [header, *build_turn_failure_note(records).split("\n")[1:]]
    assert f'- tool_b {{"id":7}} -> rejected: {cancellation_rejection_message(reason)}' in note
    assert note.endswith(TURN_FAILURE_NOTE_FOOTER)


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("https://api.openai.com/v1", ("api.openai.com", 443)),
        ("http://127.0.0.1:8080/v1", ("127.0.0.1", 8080)),
        ("http://llm.internal/", ("llm.internal", 80)),
        ("", (None, None)),
        (None, (None, None)),
        ("**********", (None, None)),  # a masked secret names no endpoint
        ("http://host:notaport/", (None, None)),
    ],
)
def test_server_endpoint_reads_host_and_port_of_a_named_endpoint_only(
    url: str | None, endpoint: tuple[str | None, int | None]
) -> None:
    assert server_endpoint(url) == endpoint
