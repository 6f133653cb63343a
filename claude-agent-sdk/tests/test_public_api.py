"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import dex_agents_claude_agent_sdk
import dex_agents_claude_agent_sdk.testing


def test_public_api_is_pinned() -> None:
    assert dex_agents_claude_agent_sdk.__all__ == [
        "INLINE_TOOL_REQUEST_MESSAGE",
        "ISOLATION_ENV",
        "REFUSED_TOOL_CALL_MESSAGE",
        "ClaudeAgentRunner",
        "ClaudeRunState",
        "InstructionsForSettings",
        "ModelForSettings",
        "OptionsFactory",
        "PendingToolUse",
        "TranscriptStore",
        "framework_effect",
    ]
    assert dex_agents_claude_agent_sdk.testing.__all__ == [
        "OFFLINE_ENV",
        "AnthropicApiServer",
        "ApiReply",
        "ApiRequest",
        "ApiToolUse",
        "Responder",
        "ScriptedClaudeApi",
    ]


def test_every_exported_name_exists() -> None:
    for module in (dex_agents_claude_agent_sdk, dex_agents_claude_agent_sdk.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None
