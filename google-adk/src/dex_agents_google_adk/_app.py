"""Building the ADK `App` and `Runner` of one Step from the user's application."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.artifacts import BaseArtifactService
from google.adk.auth.credential_service.base_credential_service import BaseCredentialService
from google.adk.memory import BaseMemoryService
from google.adk.models import BaseLlm
from google.adk.plugins import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.function_tool import FunctionTool

__all__ = [
    "AdkServices",
    "agent_tool_names",
    "close_toolsets",
    "declared_tool_description",
    "iter_agents",
    "resumable_app",
    "step_root_agent",
]


@dataclass(frozen=True)
class AdkServices:
    """The ADK services every Step's `Runner` gets, besides its own in-memory session service.

    Attributes:
        artifact_service: Where tools save and load artifacts (`Context.save_artifact`).
        memory_service: What `Context.search_memory` searches.
        credential_service: Where tools keep credentials.
    """

    artifact_service: BaseArtifactService | None = None
    memory_service: BaseMemoryService | None = None
    credential_service: BaseCredentialService | None = None

    def runner(self, app: App, session_service: BaseSessionService) -> Runner:
        """Return an ADK `Runner` of ``app`` with these services and ``session_service``."""
        return Runner(
            app=app,
            session_service=session_service,
            artifact_service=self.artifact_service,
            memory_service=self.memory_service,
            credential_service=self.credential_service,
        )


def _resumability_config() -> ResumabilityConfig:
    # ADK marks ResumabilityConfig experimental and warns once per process. The adapter depends on it
    # knowingly (its version is pinned), so exactly that warning is silenced, nothing broader.
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"\[EXPERIMENTAL\] ResumabilityConfig:", category=UserWarning
        )
        return ResumabilityConfig(is_resumable=True)


def resumable_app(app: App, plugins_first: Sequence[BasePlugin] = ()) -> App:
    """Return a copy of ``app`` that can pause and resume, with ``plugins_first`` before its own plugins.

    ADK's event compaction is turned off in the copy.

    Args:
        app: The user's application.
        plugins_first: Plugins that run before the application's own.

    Returns:
        The copy; ``app`` itself is unchanged.
    """
    return app.model_copy(
        update={
            "plugins": [*plugins_first, *app.plugins],
            "resumability_config": _resumability_config(),
            # Compaction summarizes events with a model call of its own, outside the one model call a
            # Step may make, and its events would not be stored; the session keeps the full history.
            "events_compaction_config": None,
        }
    )


def step_root_agent(
    root: BaseAgent, *, extra_tools: Sequence[BaseTool] = (), model: str | BaseLlm | None = None
) -> BaseAgent:
    """Return the root agent one model Step runs: ``root`` itself, or a copy with the Step's changes.

    Args:
        root: The application's root agent, which stays unchanged.
        extra_tools: Tools every `LlmAgent` of the tree is offered after its own (the session's built-ins,
            an MCP source's tools).
        model: A model for the root agent instead of its own; its sub-agents without a model of their own
            inherit it, as ADK resolves models.

    Returns:
        The agent tree to run.

    Raises:
        TypeError: If ``model`` is given and the root is not an `LlmAgent`.
    """
    if model is not None and not isinstance(root, LlmAgent):
        raise TypeError(
            f"the root agent {root.name!r} is a {type(root).__name__}, which has no model to replace; "
            "choose the model per turn only for an LlmAgent root"
        )
    if not extra_tools and model is None:
        return root
    return _copy_with(root, extra_tools, model)


def _copy_with(agent: BaseAgent, extra_tools: Sequence[BaseTool], model: str | BaseLlm | None) -> BaseAgent:
    # `clone` copies the fields shallowly, so toolsets (and their open MCP sessions) stay shared.
    update: dict[str, Any] = {"sub_agents": [_copy_with(sub, extra_tools, None) for sub in agent.sub_agents]}
    if isinstance(agent, LlmAgent):
        if extra_tools:
            update["tools"] = [*cast(list[object], agent.tools), *extra_tools]  # pyright: ignore[reportUnknownMemberType]
        if model is not None:
            update["model"] = model
    return agent.clone(update=update)


def iter_agents(agent: BaseAgent) -> Iterator[BaseAgent]:
    """Yield ``agent`` and every agent below it."""
    yield agent
    for sub_agent in agent.sub_agents:
        yield from iter_agents(sub_agent)


def agent_tool_names(root: BaseAgent) -> frozenset[str] | None:
    """Return the names of the tools the agents of the tree offer their models, or `None` when unknowable.

    A plain function counts under the name ADK's `FunctionTool` gives it. A `BaseToolset` (an
    `McpToolset`, say) lists its tools only when the agent runs, and listing it here could contact a
    server, so a tree with one gives `None`.
    """
    names: set[str] = set()
    for agent in iter_agents(root):
        if not isinstance(agent, LlmAgent):
            continue
        for item in cast(list[object], agent.tools):  # pyright: ignore[reportUnknownMemberType]
            if isinstance(item, BaseToolset):
                return None
            if isinstance(item, BaseTool):
                names.add(item.name)
            elif callable(item):
                names.add(FunctionTool(item).name)
    return frozenset(names)


def declared_tool_description(root: BaseAgent, tool_name: str) -> str | None:
    """Return the `BaseTool.description` of the first agent's tool named ``tool_name``, or `None`.

    Only the tools an `LlmAgent` holds count (a plain function becomes ADK's `FunctionTool`, as ADK wraps
    it); a `BaseToolset` is not asked, since listing it may contact a server.

    Args:
        root: The application's root agent.
        tool_name: The tool's name, as the model called it.

    Returns:
        The tool's description, or `None`.
    """
    for agent in iter_agents(root):
        if not isinstance(agent, LlmAgent):
            continue
        for item in cast(list[object], agent.tools):  # pyright: ignore[reportUnknownMemberType]
            if isinstance(item, BaseTool):
                tool = item
            elif callable(item) and not isinstance(item, BaseToolset):
                tool = FunctionTool(item)
            else:
                continue
            if tool.name == tool_name and tool.description:
                return tool.description
    return None


async def close_toolsets(root: BaseAgent) -> None:
    """Close every toolset of the agent tree, such as MCP sessions opened to list or call tools."""
    for agent in iter_agents(root):
        if isinstance(agent, LlmAgent):
            # ADK types plain tool functions loosely.
            tools = cast(list[object], agent.tools)  # pyright: ignore[reportUnknownMemberType]
            for tool in tools:
                if isinstance(tool, BaseToolset):
                    await tool.close()
