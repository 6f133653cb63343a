"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import dex_agents_langgraph


def test_public_api_is_pinned() -> None:
    assert dex_agents_langgraph.__all__ == [
        "UNKNOWN_TOOL_POLICY",
        "DexCheckpointSaver",
        "DexToolGate",
        "GraphFactory",
        "LangGraphRunState",
        "LangGraphRunner",
        "dex_tool_node",
        "framework_effect",
        "route_tool_calls",
    ]
    assert dex_agents_langgraph.__all__ == sorted(
        dex_agents_langgraph.__all__, key=lambda n: (not n.isupper(), n)
    )


def test_every_exported_name_exists() -> None:
    for name in dex_agents_langgraph.__all__:
        assert getattr(dex_agents_langgraph, name) is not None
