"""Checks `AgentSessionOptions.tool_policies` against the tools a runner lists (`ToolNamesRunner`).

A misspelled policy key is otherwise silent: the real tool falls back to the default effect, usually
`unclassified`, and an auto-approving client approves it unnoticed.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import cast

from dex_agents._tools._builtins import BUILT_IN_TOOL_NAMES
from dex_agents.runner import ToolNamesRunner, ToolPolicy

__all__ = ["listed_tool_names", "unknown_tool_policy_problem"]

# How `dex_agents.mcp.agent_tool_name` names an MCP server's tool for the model: ``<server>__<tool>``. The
# session cannot import that optional module, and needs only the shape.
_MCP_SEPARATOR = "__"


def listed_tool_names(runner: object) -> frozenset[str] | None:
    """Return the tool names ``runner`` lists now, or `None` when it lists none (or cannot list them).

    Raises:
        TypeError: If ``agent_tool_names`` returns anything but `None` or a collection of names.
    """
    if not isinstance(runner, ToolNamesRunner):
        return None
    # Typed as names, but a runner is the application's or an adapter's code: check what it returned.
    names = cast(object, runner.agent_tool_names())
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, Collection):
        raise TypeError(
            f"{type(runner).__name__}.agent_tool_names must return a collection of tool names or None, "
            f"got {type(names).__name__}"
        )
    listed = list(cast(Collection[object], names))
    wrong = [type(name).__name__ for name in listed if not isinstance(name, str)]
    if wrong:
        raise TypeError(
            f"{type(runner).__name__}.agent_tool_names must return tool names as text, got {wrong[0]}"
        )
    return frozenset(cast(list[str], listed))


def unknown_tool_policy_problem(
    tool_policies: Mapping[str, ToolPolicy], tool_names: Collection[str], built_in_tools: Collection[str]
) -> str | None:
    """Return why ``tool_policies`` names a tool the agent lacks, or `None` when every key is a tool.

    The built-in tools' names always count as real, enabled or not. So does an MCP tool's name
    (``<server>__<tool>``, as `dex_agents.mcp.McpToolSource` names them) while the runner lists no tool of
    that server: its tools are known only from a listing this process may not have made, or could not make
    while the server was down. Once it lists one, the server's other keys are checked like any.

    Args:
        tool_policies: The session's policies by tool name.
        tool_names: The names the runner lists.
        built_in_tools: The session's enabled built-in tools, listed among the agent's tools.

    Returns:
        ``tool_policies names '<key>', but the agent has no tool by that name; did you mean '<name>'? Its
        tools: <names>``, naming every unknown key, or `None`.
    """
    real = set(tool_names) | set(BUILT_IN_TOOL_NAMES)
    listed_servers = {name.partition(_MCP_SEPARATOR)[0] for name in real if _MCP_SEPARATOR in name}
    unknown = sorted(
        name for name in tool_policies if name not in real and not _unlisted_mcp_tool(name, listed_servers)
    )
    if not unknown:
        return None
    candidates = sorted(real)
    suggestions = {
        name: matches[0]
        for name in unknown
        if (matches := difflib.get_close_matches(name, candidates, n=1, cutoff=0.6))
    }
    offered = sorted(set(tool_names) | set(built_in_tools))
    tools = f"Its tools: {', '.join(offered)}" if offered else "It lists no tools"
    if len(unknown) == 1:
        name = unknown[0]
        guess = f"; did you mean {suggestions[name]!r}?" if name in suggestions else "."
        return f"tool_policies names {name!r}, but the agent has no tool by that name{guess} {tools}"
    named = ", ".join(repr(name) for name in unknown)
    guesses = ", ".join(f"{suggestions[name]!r} for {name!r}" for name in unknown if name in suggestions)
    guess = f"; did you mean {guesses}?" if guesses else "."
    return f"tool_policies names {named}, but the agent has no tools by those names{guess} {tools}"


def _unlisted_mcp_tool(name: str, listed_servers: Collection[str]) -> bool:
    server, separator, tool = name.partition(_MCP_SEPARATOR)
    return bool(separator and server and tool) and server not in listed_servers
