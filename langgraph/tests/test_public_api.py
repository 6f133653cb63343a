"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import inspect

import dex_agents_langgraph
import dex_agents_langgraph.testing


def test_public_api_is_pinned() -> None:
    assert dex_agents_langgraph.__all__ == [
        "UNKNOWN_TOOL_POLICY",
        "DexCheckpointSaver",
        "DexToolGate",
        "GraphFactory",
        "InstructionsForSettings",
        "LangGraphRunState",
        "LangGraphRunner",
        "ModelForSettings",
        "current_session_settings",
        "dex_session_tools",
        "dex_tool_node",
        "framework_effect",
        "route_tool_calls",
    ]
    assert dex_agents_langgraph.testing.__all__ == ["ScriptedChatModel", "render_model_input"]
    for module in (dex_agents_langgraph, dex_agents_langgraph.testing):
        assert module.__all__ == sorted(module.__all__, key=lambda n: (not n.isupper(), n))


def test_every_exported_name_exists() -> None:
    for module in (dex_agents_langgraph, dex_agents_langgraph.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_the_runner_trusts_mcp_annotations_only_when_told_to() -> None:
    parameter = inspect.signature(dex_agents_langgraph.LangGraphRunner).parameters["trust_mcp_annotations"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is False
