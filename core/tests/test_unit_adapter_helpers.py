"""The library helpers every adapter shares: run-state envelope, MCP hint effects, tool arguments."""

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from dex_agents import (
    RunStateFormat,
    RunStateFormatError,
    ToolEffect,
    ToolExecutionError,
    effect_from_mcp_annotations,
    parse_tool_arguments,
)
from dex_agents._tools._arguments import parse_json_text
from dex_agents.limits import MAX_JSON_NESTING_DEPTH

PYDANTIC = RunStateFormat("dex-agents-pydantic-ai/run-state", 1, "PydanticAiRunner")


def test_a_run_state_round_trips_through_its_envelope() -> None:
    text = PYDANTIC.wrap({"turn_messages": [{"kind": "response", "text": "héllo \ud800"}], "ids": ["a"]})
    assert json.loads(text)["format"] == "dex-agents-pydantic-ai/run-state"
    assert json.loads(text)["version"] == 1
    assert text.isascii(), "non-ASCII text is escaped, so a lone surrogate still encodes as UTF-8"
    assert PYDANTIC.unwrap(text) == {
        "turn_messages": [{"kind": "response", "text": "héllo \ud800"}],
        "ids": ["a"],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"format":"dex-agents-langgraph/run-state","version":1,"thread":{}}',
            "the framework run state was not written by PydanticAiRunner: it has format "
            "'dex-agents-langgraph/run-state', and PydanticAiRunner reads 'dex-agents-pydantic-ai/run-state'",
        ),
        ('{"items":[],"pending":[]}', "not written by PydanticAiRunner: it has no format"),
        ("[1, 2]", "not written by PydanticAiRunner: it is a JSON list"),
        ("not json", "the framework run state is not JSON, so PydanticAiRunner cannot continue the turn"),
        (
            '{"format":"dex-agents-pydantic-ai/run-state","version":2}',
            "the framework run state has version 2 of 'dex-agents-pydantic-ai/run-state', and this "
            "release of PydanticAiRunner reads version 1",
        ),
    ],
)
def test_a_run_state_of_another_runner_or_version_is_refused_with_a_clear_error(
    text: str, expected: str
) -> None:
    with pytest.raises(RunStateFormatError) as error:
        PYDANTIC.unwrap(text)
    assert expected in str(error.value)
    assert isinstance(error.value, ValueError), "callers that catch ValueError keep working"


def test_the_envelope_names_cannot_be_run_state_fields() -> None:
    with pytest.raises(ValueError, match=r"may not be named \['version'\]"):
        PYDANTIC.wrap({"version": 3})
    with pytest.raises(ValueError):
        PYDANTIC.wrap({"nan": float("nan")})


@dataclass
class _Mcp1Annotations:
    """mcp 1.x spells the hints in camelCase attributes."""

    readOnlyHint: bool | None = None
    idempotentHint: bool | None = None
    destructiveHint: bool | None = None


@dataclass
class _Mcp2Annotations:
    """mcp 2.x spells them in snake_case."""

    read_only_hint: bool | None = None
    idempotent_hint: bool | None = None
    destructive_hint: bool | None = None


@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        (None, None),
        ({}, None),
        ({"readOnlyHint": True}, ToolEffect.READ),
        ({"read_only_hint": True, "idempotent_hint": True}, ToolEffect.READ),
        ({"idempotentHint": True, "destructiveHint": True}, ToolEffect.IDEMPOTENT_WRITE),
        ({"idempotent_hint": True, "destructive_hint": False}, ToolEffect.IDEMPOTENT_WRITE),
        ({"readOnlyHint": False, "destructiveHint": True}, None),
        ({"readOnlyHint": "true"}, None),
        (_Mcp1Annotations(readOnlyHint=True), ToolEffect.READ),
        (_Mcp1Annotations(idempotentHint=True, destructiveHint=True), ToolEffect.IDEMPOTENT_WRITE),
        (_Mcp2Annotations(read_only_hint=True), ToolEffect.READ),
        (_Mcp2Annotations(idempotent_hint=True), ToolEffect.IDEMPOTENT_WRITE),
        (_Mcp2Annotations(read_only_hint=False), None),
    ],
)
def test_mcp_hints_map_to_effects(annotations: object, effect: ToolEffect | None) -> None:
    assert effect_from_mcp_annotations(annotations) is effect


def test_mcp_hints_from_the_mcp_sdk_map_to_effects() -> None:
    types = pytest.importorskip("mcp.types")
    read = types.ToolAnnotations.model_validate({"readOnlyHint": True})
    write = types.ToolAnnotations.model_validate({"idempotentHint": True, "destructiveHint": True})
    assert effect_from_mcp_annotations(read) is ToolEffect.READ
    assert effect_from_mcp_annotations(write) is ToolEffect.IDEMPOTENT_WRITE
    assert effect_from_mcp_annotations(read.model_dump(by_alias=True)) is ToolEffect.READ


def test_importing_the_library_never_loads_mcp() -> None:
    code = "import sys, dex_agents, dex_agents.testing; print('mcp' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "False"


def test_tool_arguments_are_a_json_object() -> None:
    assert parse_tool_arguments('{"city": "Oslo", "days": 2}', tool_name="forecast") == {
        "city": "Oslo",
        "days": 2,
    }
    assert parse_tool_arguments("", tool_name="now") == {}
    assert parse_tool_arguments("  ", tool_name="now") == {}


@pytest.mark.parametrize(
    ("arguments", "what"),
    [
        ('{"days": NaN}', "are not strict JSON (NaN is not a JSON number)"),
        ('{"days": Infinity}', "are not strict JSON (Infinity is not a JSON number)"),
        ('{"city": "Oslo"', "are not strict JSON (Expecting ',' delimiter"),
        ('["Oslo"]', "are a JSON array"),
        ('"Oslo"', "are a JSON string"),
        ("null", "are a JSON null"),
        ("7", "are a JSON number"),
    ],
)
def test_other_tool_arguments_fail_as_the_model_should_see_it(arguments: str, what: str) -> None:
    with pytest.raises(ToolExecutionError) as error:
        parse_tool_arguments(arguments, tool_name="forecast")
    assert error.value.message.startswith("arguments must be a JSON object; the arguments of 'forecast' "), (
        error.value.message
    )
    assert what in error.value.message, error.value.message


def _nested(depth: int) -> str:
    return '{"days":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("depth", [MAX_JSON_NESTING_DEPTH + 1, 1000, 100_000])
def test_tool_arguments_that_nest_too_deeply_fail_as_the_model_should_see_it(depth: int) -> None:
    # 1,000 levels is past the standard decoder's recursion limit, which raised RecursionError before.
    with pytest.raises(ToolExecutionError) as error:
        parse_tool_arguments(_nested(depth), tool_name="forecast")
    assert error.value.message == (
        "the arguments of 'forecast' nest too deeply: arrays and objects nest more than "
        f"{MAX_JSON_NESTING_DEPTH} levels deep"
    )


def test_tool_arguments_as_deep_as_the_limit_and_long_flat_ones_are_read() -> None:
    deepest = parse_tool_arguments(_nested(MAX_JSON_NESTING_DEPTH), tool_name="forecast")
    assert list(deepest) == ["days"]
    flat = parse_tool_arguments(json.dumps({"days": [[1]] * 10_000}), tool_name="forecast")
    assert len(flat["days"]) == 10_000


def test_json_shown_as_a_value_stays_text_when_it_nests_too_deeply() -> None:
    deep = "[" * 1000 + "]" * 1000
    assert parse_json_text(deep) == deep
    assert parse_json_text('{"a":[1]}') == {"a": [1]}
    deep_state = '{"format":"dex-agents-pydantic-ai/run-state","version":1,"x":' + deep + "}"
    with pytest.raises(RunStateFormatError, match="nests arrays and objects too deeply to decode"):
        PYDANTIC.unwrap(deep_state)
