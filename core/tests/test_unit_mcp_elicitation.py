"""An elicitation as a session question and an answer as its result: the pure helpers, and roots' checks."""

from pathlib import Path
from typing import Any

import pytest

from dex_agents.mcp import McpRoot, McpStdioServer
from dex_agents.mcp._elicitation import ElicitationAnswerError, elicitation_fingerprint, read_elicitation
from dex_agents.values import QuestionAnswer, QuestionResolution


def form(*fields: tuple[str, dict[str, Any]], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema = {"type": "object", "properties": dict(fields), "required": list(required)}
    return {"mode": "form", "message": "Tell me.", "requestedSchema": schema}


def answer(text: str, resolution: QuestionResolution = QuestionResolution.ANSWERED) -> QuestionAnswer:
    return QuestionAnswer("call-1-input-1", "Tell me.", text, resolution)


def result(params: dict[str, Any], text: str) -> dict[str, Any]:
    question = read_elicitation(params, offers_actions=True)
    assert question is not None
    return question.result(answer(text))


def problem(params: dict[str, Any], text: str) -> str:
    with pytest.raises(ElicitationAnswerError) as raised:
        result(params, text)
    return str(raised.value)


def test_a_single_field_is_answered_with_its_value_and_offers_decline_and_cancel_where_asked() -> None:
    carrier = form(("carrier", {"type": "string"}), required=("carrier",))
    asked = read_elicitation(carrier, offers_actions=True)
    assert asked is not None
    request = asked.to_input_request("next")
    assert (request.question, request.choices, request.allows_free_text) == (
        "Tell me.",
        ("decline", "cancel"),
        True,
    )
    without = read_elicitation(carrier, offers_actions=False)
    assert without is not None and without.to_input_request("").choices == ()
    assert result(carrier, "DHL") == {"action": "accept", "content": {"carrier": "DHL"}}
    assert result(carrier, " Decline ") == {"action": "decline"}

    agree = form(("agree", {"type": "boolean"}))
    asked_agree = read_elicitation(agree, offers_actions=True)
    assert asked_agree is not None
    assert asked_agree.to_input_request("").choices == ("yes", "no", "decline", "cancel")
    assert result(agree, "Yes") == {"action": "accept", "content": {"agree": True}}
    assert problem(agree, "maybe") == "answer yes or no"


def test_an_enum_value_that_is_an_action_word_stays_a_value() -> None:
    pick = form(("next", {"type": "string", "enum": ["go", "cancel"]}))
    asked = read_elicitation(pick, offers_actions=True)
    assert asked is not None and asked.to_input_request("").choices == ("go", "cancel", "decline")
    assert result(pick, "cancel") == {"action": "accept", "content": {"next": "cancel"}}
    assert problem(pick, "stop") == 'field \'next\' must be one of "go", "cancel"'


def test_a_form_answer_is_checked_against_the_schema_and_missing_fields_take_their_defaults() -> None:
    params = form(
        ("name", {"type": "string", "minLength": 2}),
        ("email", {"type": "string", "format": "email"}),
        ("born", {"type": "string", "format": "date"}),
        ("age", {"type": "integer", "minimum": 0, "maximum": 150, "default": 30}),
        ("tools", {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2}),
        required=("name",),
    )
    asked = read_elicitation(params, offers_actions=True)
    assert asked is not None
    text = asked.to_input_request("").question
    assert "- name* (text, at least 2 characters)" in text
    assert "- age (an integer from 0 to 150; default 30)" in text
    assert '- tools (a list of 0 to 2 of "a", "b", "c")' in text

    assert result(params, '{"name": "Ada", "tools": ["a"]}') == {
        "action": "accept",
        "content": {"name": "Ada", "age": 30, "tools": ["a"]},
    }
    assert problem(params, "Ada") == "the answer must be a JSON object of the fields listed"
    assert problem(params, '{"age": 3}') == "field 'name' is required"
    assert problem(params, '{"name": "Ada", "nick": "A"}') == "the form has no field 'nick'"
    assert problem(params, '{"name": "A"}') == "field 'name' must be at least 2 characters"
    assert problem(params, '{"name": "Ada", "email": "ada"}') == "field 'email' must be an email address"
    assert (
        problem(params, '{"name": "Ada", "born": "1815-13-10"}') == "field 'born' must be a date YYYY-MM-DD"
    )
    assert problem(params, '{"name": "Ada", "age": true}') == "field 'age' must be an integer"
    assert (
        problem(params, '{"name": "Ada", "tools": ["a", "b", "c"]}')
        == "field 'tools' must list at most 2 values"
    )
    assert (
        problem(params, '{"name": "Ada", "tools": ["a", "a"]}') == "field 'tools' must not name a value twice"
    )


def test_a_rejected_answer_is_asked_again_with_the_reason_first() -> None:
    asked = read_elicitation(form(("n", {"type": "number", "maximum": 5})), offers_actions=True)
    assert asked is not None
    again = asked.to_input_request("same", problem="field 'n' must be at most 5")
    assert (
        again.question
        == "Your last answer was not accepted: field 'n' must be at most 5.\n\nTell me.\n\n"
        + ("- n (a number of at most 5)")
    )
    assert again.continuation == "same"


def test_a_url_elicitation_is_done_declined_or_cancelled_and_keeps_its_fingerprint_across_ids() -> None:
    first = {"mode": "url", "message": "Sign in.", "url": "https://id.example.com/x", "elicitationId": "1"}
    second = {**first, "elicitationId": "2"}
    assert elicitation_fingerprint(first) == elicitation_fingerprint(second)
    assert elicitation_fingerprint(first) != elicitation_fingerprint(
        {**first, "url": "https://id.example.com/y"}
    )
    assert result(first, "DONE") == {"action": "accept"}
    assert result(first, "cancel") == {"action": "cancel"}
    assert problem(first, "later") == "answer done, decline or cancel"


def test_a_declined_question_or_a_passed_deadline_are_decline_and_cancel() -> None:
    asked = read_elicitation(form(("x", {"type": "string"})), offers_actions=False)
    assert asked is not None
    assert asked.result(answer("no", QuestionResolution.DECLINED)) == {"action": "decline"}
    assert asked.result(answer("late", QuestionResolution.DEADLINE_PASSED)) == {"action": "cancel"}


@pytest.mark.parametrize(
    "params",
    [
        form(("where", {"type": "object"})),
        form(("when", {"type": "string", "format": "time"})),
        form(),
        {"mode": "url", "message": "Open it.", "url": "file:///etc/passwd"},
        {"mode": "form", "message": " ", "requestedSchema": {"properties": {"x": {"type": "string"}}}},
        {"mode": "telepathy", "message": "Think of it."},
    ],
)
def test_what_the_session_cannot_ask_reads_as_none(params: dict[str, Any]) -> None:
    assert read_elicitation(params, offers_actions=True) is None


def test_roots_are_file_uris_from_the_configuration() -> None:
    server = McpStdioServer(
        "files", "files-server", roots=[Path("/srv/a"), "file:///srv/b", McpRoot("file:///c", "c")]
    )
    assert server.roots == (McpRoot("file:///srv/a"), McpRoot("file:///srv/b"), McpRoot("file:///c", "c"))
    assert McpStdioServer("files", "files-server").roots == ()
    with pytest.raises(ValueError, match="must be a file:// URI"):
        McpStdioServer("files", "files-server", roots=["https://example.com/repo"])
    with pytest.raises(TypeError, match="must be a sequence"):
        McpStdioServer("files", "files-server", roots="file:///srv")  # pyright: ignore[reportArgumentType]
