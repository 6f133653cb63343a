"""A tool call's life on the runner's side, in one private package.

What a tool returns (`_outcomes`), the execution it runs in and what its code may ask of the session from
there (`_context`, `_requests`), its arguments (`_arguments`), the built-in tools (`_builtins`), started
tasks and their routing (`_tasks`), and what MCP annotations say of a tool's effect (`_mcp_hints`). The
public names are exported by `dex_agents`; the session's tool Steps are in ``dex_agents/session``.
"""
