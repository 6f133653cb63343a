"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import dex_agents_pydantic_ai
import dex_agents_pydantic_ai.testing


def test_public_api_is_pinned() -> None:
    assert dex_agents_pydantic_ai.__all__ == [
        "UNKNOWN_TOOL_POLICY",
        "PydanticAiRunState",
        "PydanticAiRunner",
        "ToolCallInModelStepError",
        "framework_effect",
    ]


def test_the_testing_module_is_pinned() -> None:
    assert dex_agents_pydantic_ai.testing.__all__ == [
        "Answerer",
        "ScriptedAnswer",
        "ScriptedModel",
        "ScriptedModelCall",
    ]


def test_every_exported_name_exists() -> None:
    for module in (dex_agents_pydantic_ai, dex_agents_pydantic_ai.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None
