"""What an agent's tools are called and what each does, read from the toolsets it was built with.

The names let the session check its tool policies against the agent's tools (`agent_tool_names`); the
descriptions go on ``execute_tool`` spans. Both come from what the toolsets already hold: a toolset that
lists its tools only when asked (an MCP server, a dynamic toolset) is never asked here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_ai.toolsets import (
    AbstractToolset,
    CombinedToolset,
    ExternalToolset,
    FunctionToolset,
    PrefixedToolset,
    RenamedToolset,
    WrapperToolset,
)

__all__ = ["declared_tool_description", "declared_tool_names"]


def declared_tool_description(toolsets: Iterable[AbstractToolset[Any]], tool_name: str) -> str | None:
    """Return the description the first toolset that declares ``tool_name`` gives it, or `None`.

    Only what the toolsets hold already counts: function tools and external tool definitions, under the
    names prefixing and renaming wrappers give them. A toolset that lists its tools only when asked (an MCP
    server, a dynamic toolset) is left alone, so describing a span never contacts anything.

    Args:
        toolsets: The agent's toolsets (`Agent.toolsets`).
        tool_name: The tool's name, as the model called it.

    Returns:
        The tool's description, or `None`.
    """
    for toolset in toolsets:
        description = _description(toolset, tool_name)
        if description:
            return description
    return None


def declared_tool_names(toolsets: Iterable[AbstractToolset[Any]]) -> frozenset[str] | None:
    """Return the names under which the toolsets offer their tools to the model, or `None` when unknown.

    Function tools and external tool definitions count, under the names prefixing and renaming wrappers
    give them; a filtering or preparing wrapper counts as its whole wrapped toolset, since what it hides
    may change per run step. Any toolset whose tools are known only once it is asked makes the answer
    `None`.

    Args:
        toolsets: The agent's toolsets (`Agent.toolsets`).

    Returns:
        The names, or `None`.
    """
    names: set[str] = set()
    for toolset in toolsets:
        listed = _names(toolset)
        if listed is None:
            return None
        names.update(listed)
    return frozenset(names)


def _names(toolset: AbstractToolset[Any]) -> frozenset[str] | None:
    if isinstance(toolset, FunctionToolset):
        return frozenset(toolset.tools)
    if isinstance(toolset, ExternalToolset):
        return frozenset(tool.name for tool in toolset.tool_defs)
    if isinstance(toolset, CombinedToolset):
        return declared_tool_names(toolset.toolsets)
    if isinstance(toolset, WrapperToolset):
        wrapped = _names(toolset.wrapped)
        if wrapped is None:
            return None
        if isinstance(toolset, PrefixedToolset):
            return frozenset(f"{toolset.prefix}_{name}" for name in wrapped)
        if isinstance(toolset, RenamedToolset):
            new_names = {original: new for new, original in toolset.name_map.items()}
            return frozenset(new_names.get(name, name) for name in wrapped)
        return wrapped
    return None


def _description(toolset: AbstractToolset[Any], name: str) -> str | None:
    if isinstance(toolset, FunctionToolset):
        tool = toolset.tools.get(name)
        return tool.description if tool is not None else None
    if isinstance(toolset, ExternalToolset):
        return next((tool.description for tool in toolset.tool_defs if tool.name == name), None)
    if isinstance(toolset, CombinedToolset):
        return declared_tool_description(toolset.toolsets, name)
    if isinstance(toolset, PrefixedToolset):
        prefix = f"{toolset.prefix}_"
        return _description(toolset.wrapped, name.removeprefix(prefix)) if name.startswith(prefix) else None
    if isinstance(toolset, RenamedToolset):
        if name not in toolset.name_map and name in toolset.name_map.values():
            return None  # renamed away: the model knows this tool by another name
        return _description(toolset.wrapped, toolset.name_map.get(name, name))
    if isinstance(toolset, WrapperToolset):
        return _description(toolset.wrapped, name)
    return None
