"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import inspect

import dex_agents
import dex_agents.testing

import dex_agents_pydantic_ai
import dex_agents_pydantic_ai.testing


def test_public_api_is_pinned() -> None:
    assert dex_agents_pydantic_ai.__all__ == [
        "CHARACTERS_PER_TOKEN",
        "CONTEXT_SUMMARY_HEADER",
        "DEFAULT_SUMMARY_INSTRUCTIONS",
        "UNKNOWN_TOOL_POLICY",
        "InstructionsForSettings",
        "ModelForSettings",
        "PydanticAiRunState",
        "PydanticAiRunner",
        "TokenEstimator",
        "ToolCallInModelStepError",
        "estimate_tokens",
        "framework_effect",
    ]


def test_the_testing_module_is_pinned() -> None:
    assert dex_agents_pydantic_ai.testing.__all__ == [
        "DEFAULT_SCRIPTED_SUMMARY",
        "SCRIPTED_PROVIDER_NAME",
        "Answerer",
        "ScriptedAnswer",
        "ScriptedModel",
        "ScriptedModelCall",
    ]


def test_every_exported_name_exists() -> None:
    for module in (dex_agents_pydantic_ai, dex_agents_pydantic_ai.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_the_compaction_texts_are_the_cores_own() -> None:
    # Re-exported, not copied: every runner shows its model the same summary header and instructions.
    assert dex_agents_pydantic_ai.CONTEXT_SUMMARY_HEADER is dex_agents.CONTEXT_SUMMARY_HEADER
    assert dex_agents_pydantic_ai.DEFAULT_SUMMARY_INSTRUCTIONS is dex_agents.DEFAULT_SUMMARY_INSTRUCTIONS
    scripted_summary = dex_agents_pydantic_ai.testing.DEFAULT_SCRIPTED_SUMMARY
    assert scripted_summary is dex_agents.testing.DEFAULT_SCRIPTED_SUMMARY


def test_the_runner_trusts_mcp_annotations_only_when_told_to() -> None:
    parameter = inspect.signature(dex_agents_pydantic_ai.PydanticAiRunner).parameters["trust_mcp_annotations"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is False
