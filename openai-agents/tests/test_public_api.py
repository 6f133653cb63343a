"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import dex_agents_openai_agents


def test_public_api_is_pinned() -> None:
    assert dex_agents_openai_agents.__all__ == [
        "HANDOFF_EVENT_TYPE",
        "UNKNOWN_TOOL_POLICY",
        "OpenAIAgentsRunState",
        "OpenAIAgentsRunner",
        "UndeferrableToolError",
        "framework_effect",
    ]


def test_every_exported_name_exists() -> None:
    for name in dex_agents_openai_agents.__all__:
        assert getattr(dex_agents_openai_agents, name) is not None
