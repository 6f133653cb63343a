"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import inspect

import dex_agents_openai_agents
import dex_agents_openai_agents.testing
from dex_agents_openai_agents.testing import ScriptedModelCall, ScriptedResponsesModel


def test_public_api_is_pinned() -> None:
    assert dex_agents_openai_agents.__all__ == [
        "HANDOFF_EVENT_TYPE",
        "HOSTED_MCP_APPROVED_RESULT",
        "UNKNOWN_TOOL_POLICY",
        "InstructionsForSettings",
        "ModelForSettings",
        "OpenAIAgentsRunState",
        "OpenAIAgentsRunner",
        "UndeferrableToolError",
        "framework_effect",
        "idempotency_key_meta",
    ]
    assert dex_agents_openai_agents.testing.__all__ == [
        "SCRIPTED_PROVIDER_NAME",
        "Answerer",
        "ScriptedAnswer",
        "ScriptedModelCall",
        "ScriptedResponsesModel",
        "call_item",
        "reasoning_item",
        "render_model_input",
        "scripted_stream_events",
        "text_item",
    ]


def test_the_scripted_model_offers_its_three_ways_of_answering() -> None:
    assert list(inspect.signature(ScriptedResponsesModel).parameters) == [
        "answer",
        "response_id",
        "model_name",
    ]
    assert list(inspect.signature(ScriptedResponsesModel.from_answers).parameters) == [
        "answers",
        "model_name",
    ]
    assert list(inspect.signature(ScriptedResponsesModel.from_script_store).parameters) == [
        "store",
        "model_name",
    ]
    assert isinstance(inspect.getattr_static(ScriptedResponsesModel, "calls"), property)
    assert [field.name for field in ScriptedModelCall.__dataclass_fields__.values()] == [
        "input_items",
        "offered_tools",
        "instructions",
    ]
    # Tracing reads a model's name and provider from these, as from the SDK's OpenAI models.
    assert isinstance(inspect.getattr_static(ScriptedResponsesModel, "model"), property)
    assert ScriptedResponsesModel.provider_name == "dex.scripted"


def test_the_runner_takes_the_session_features_by_keyword() -> None:
    parameters = inspect.signature(dex_agents_openai_agents.OpenAIAgentsRunner).parameters
    assert list(parameters) == [
        "agent",
        "context",
        "run_config",
        "max_turns",
        "enable_tracing",
        "resume_last_agent",
        "mcp_tool_source",
        "tool_tasks",
        "model_for_settings",
        "instructions_for_settings",
        "trust_mcp_annotations",
    ]
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in list(parameters)[1:])


def test_every_exported_name_exists() -> None:
    for module in (dex_agents_openai_agents, dex_agents_openai_agents.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None
