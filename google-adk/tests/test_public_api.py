"""The public surface is exactly what `__all__` promises; an accidental export or removal fails here."""

import inspect

import dex_agents_google_adk
import dex_agents_google_adk.testing


def test_public_api_is_pinned() -> None:
    assert dex_agents_google_adk.__all__ == [
        "ADK_INSTRUMENTATION_SCOPE",
        "AGENT_TRANSFER_EVENT_TYPE",
        "DEFAULT_USER_ID",
        "UNKNOWN_TOOL_POLICY",
        "AdkServices",
        "DexToolGate",
        "GoogleAdkRunState",
        "GoogleAdkRunner",
        "InstructionsForSettings",
        "McpCallInterruptedError",
        "ModelForSettings",
        "SecondModelCallError",
        "UnrecordedConfirmationError",
        "framework_effect",
        "without_adk_spans",
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


def test_the_runner_polls_tasks_only_when_it_has_something_to_poll_them_with() -> None:
    # The session offers tools `start_tool_task` only when the runner has `poll_tool_task`.
    from dex_agents import ToolTaskHandlers
    from google.adk.agents import LlmAgent

    agent = LlmAgent(name="orders", model=dex_agents_google_adk.testing.ScriptedLlm())
    plain = dex_agents_google_adk.GoogleAdkRunner(agent)
    with_tasks = dex_agents_google_adk.GoogleAdkRunner(agent, tool_tasks=ToolTaskHandlers({}))
    assert getattr(plain, "poll_tool_task", None) is None
    assert getattr(plain, "cancel_tool_task", None) is None
    assert callable(with_tasks.poll_tool_task) and callable(with_tasks.cancel_tool_task)


def test_the_runner_trusts_mcp_annotations_only_when_told_to() -> None:
    parameter = inspect.signature(dex_agents_google_adk.GoogleAdkRunner).parameters["trust_mcp_annotations"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is False
