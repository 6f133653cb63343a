"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import dex_agents_openai_agents
import dex_agents_openai_agents.testing


def test_public_api_is_pinned() -> None:
    assert dex_agents_openai_agents.__all__ == [
        "HANDOFF_EVENT_TYPE",
        "UNKNOWN_TOOL_POLICY",
        "OpenAIAgentsRunState",
        "OpenAIAgentsRunner",
        "UndeferrableToolError",
        "framework_effect",
    ]
    assert dex_agents_openai_agents.testing.__all__ == [
        "Answerer",
        "ScriptedAnswer",
        "ScriptedResponsesModel",
        "call_item",
        "reasoning_item",
        "scripted_stream_events",
        "text_item",
    ]


def test_every_exported_name_exists() -> None:
    for module in (dex_agents_openai_agents, dex_agents_openai_agents.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None
