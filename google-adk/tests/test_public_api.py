"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import dex_agents_google_adk
import dex_agents_google_adk.testing


def test_public_api_is_pinned() -> None:
    assert dex_agents_google_adk.__all__ == [
        "DEFAULT_USER_ID",
        "UNKNOWN_TOOL_POLICY",
        "AdkServices",
        "DexToolGate",
        "GoogleAdkRunState",
        "GoogleAdkRunner",
        "McpCallInterruptedError",
        "SecondModelCallError",
        "UnrecordedConfirmationError",
        "framework_effect",
    ]


def test_every_exported_name_exists() -> None:
    for name in dex_agents_google_adk.__all__:
        assert getattr(dex_agents_google_adk, name) is not None


def test_testing_api_is_pinned() -> None:
    assert dex_agents_google_adk.testing.__all__ == [
        "ScriptedAnswer",
        "ScriptedLlm",
        "ScriptedResponse",
        "ScriptedToolCall",
        "render_model_input",
    ]
    for name in dex_agents_google_adk.testing.__all__:
        assert getattr(dex_agents_google_adk.testing, name) is not None
