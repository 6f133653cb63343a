"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import dex_agents_pydantic_ai


def test_public_api_is_pinned() -> None:
    assert dex_agents_pydantic_ai.__all__ == [
        "UNKNOWN_TOOL_POLICY",
        "PydanticAiRunState",
        "PydanticAiRunner",
        "ToolCallInModelStepError",
        "TurnCannotContinueError",
        "framework_effect",
    ]


def test_every_exported_name_exists() -> None:
    for name in dex_agents_pydantic_ai.__all__:
        assert getattr(dex_agents_pydantic_ai, name) is not None
