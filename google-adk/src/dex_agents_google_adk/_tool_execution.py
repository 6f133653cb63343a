"""Runs one deferred tool call through ADK's own tool pipeline.

A tool Step has the call's name, ID and arguments, but no ADK invocation. Rather than calling the tool
function directly (and skipping the plugins' and the agent's tool callbacks, error callbacks and
`ToolContext`), the runner opens a fresh session, builds an invocation context for the agent that made
the call, and hands ADK a model event holding only that call. ADK resolves the tool from the agent's
tools and toolsets and runs it exactly as it would inside `Runner.run_async`; the model is never called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from dex_agents import parse_tool_arguments
from dex_agents.limits import MAX_JSON_NESTING_DEPTH, nests_deeper_than
from dex_agents.runner import ToolExecutionError
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App
from google.adk.events import Event
from google.adk.flows.llm_flows.extensions._agent_transfer import (
    _get_transfer_targets,  # pyright: ignore[reportPrivateUsage]
)
from google.adk.flows.llm_flows.functions import handle_function_calls_async
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.transfer_to_agent_tool import TransferToAgentTool
from google.genai import types

from dex_agents_google_adk._app import AdkServices
from dex_agents_google_adk._gate import NESTING_ERROR_KEY, TOO_DEEP
from dex_agents_google_adk._messages import TRANSFER_TO_AGENT, function_response_to_text
from dex_agents_google_adk._structured_answer import SET_MODEL_RESPONSE, structured_answer_tool

__all__ = ["TRANSFER_TO_AGENT", "McpCallInterruptedError", "run_tool_call"]


class McpCallInterruptedError(RuntimeError):
    """An MCP tool call got no result back: the connection failed, or the call raised in the client.

    ADK turns such a failure into an ``{"error": ...}`` result. The call may have reached the server, so
    it fails the tool Step instead, and the session retries it or records `outcome_unknown` by the
    tool's effect.
    """


_MCP_CALL_FAILURES = ("MCP tool execution failed: ", "Unexpected error during MCP tool execution: ")
"""How ADK's McpTool starts the error text of a call that got no result."""


def _raise_for_interrupted_mcp_call(tool: BaseTool, response: Mapping[str, Any] | None) -> None:
    if not hasattr(tool, "raw_mcp_tool") or response is None or set(response) != {"error"}:
        return
    error = str(response["error"])
    if error.startswith(_MCP_CALL_FAILURES):
        raise McpCallInterruptedError(error)


def _is_mcp_error(tool: BaseTool, response: Mapping[str, Any] | None) -> bool:
    # An MCP tool reports its own failure in the result (`isError`); ADK passes it on as a result.
    return hasattr(tool, "raw_mcp_tool") and response is not None and response.get("isError") is True


def _mcp_error_text(response: Mapping[str, Any]) -> str:
    content = cast(list[Any], response.get("content") or [])
    texts = [
        str(cast(Mapping[str, Any], item).get("text"))
        for item in content
        if isinstance(item, Mapping) and cast(Mapping[str, Any], item).get("type") == "text"
    ]
    return "\n".join(texts) or "the MCP tool reported an error"


async def run_tool_call(
    app: App,
    services: AdkServices,
    *,
    run_config: RunConfig,
    user_id: str,
    session_id: str,
    agent_name: str | None,
    tool_name: str,
    tool_call_id: str,
    arguments: str,
) -> str:
    """Run one tool call once and return the text the model sees.

    Args:
        app: The user's application (without the adapter's gate).
        services: The ADK services the runner was given.
        run_config: The runner's run configuration; its `tool_thread_pool_config` runs synchronous tools
            on ADK's thread pool, which copies the asyncio context (and the current Dex tool call) into
            the thread.
        user_id: The ADK user ID of the session.
        session_id: The ADK session ID (the Dex session ID).
        agent_name: The agent whose model made the call; the root agent when `None` or unknown.
        tool_name: The tool's name as the model called it.
        tool_call_id: The call's ID.
        arguments: The call's arguments as JSON text.

    Returns:
        The tool's result as text.

    Raises:
        ToolExecutionError: When the agent has no tool of this name, the arguments are not a JSON
            object, or an MCP tool reported `isError`. Any exception the tool raises that no
            `on_tool_error_callback` answers propagates unchanged, so the session retries or records the
            call by its effect.
        McpCallInterruptedError: When an MCP call got no result back.
    """
    args = parse_tool_arguments(arguments, tool_name=tool_name)
    if set(args) == {NESTING_ERROR_KEY}:
        # The model Step replaced arguments that nested too deeply; the tool does not run.
        raise ToolExecutionError(str(args[NESTING_ERROR_KEY]))
    root = cast(BaseAgent, app.root_agent)
    agent = (root.find_agent(agent_name) if agent_name else None) or root
    if not isinstance(agent, LlmAgent):
        raise ToolExecutionError(f"agent {agent.name!r} is not an LlmAgent, so it has no tools")
    service = InMemorySessionService()
    runner = services.runner(app, service)
    session = await service.create_session(app_name=app.name, user_id=user_id, session_id=session_id)
    context = runner._new_invocation_context(session, run_config=run_config)  # pyright: ignore[reportPrivateUsage]
    context.agent = agent
    tools = {tool.name: tool for tool in await agent.canonical_tools(ReadonlyContext(context))}
    structured_answer = structured_answer_tool(agent) if tool_name == SET_MODEL_RESPONSE else None
    if structured_answer is not None:
        # A structured answer that failed its check in the model Step; checking it here again gives the
        # session its record, and the model reads the result at its next call.
        tools.setdefault(structured_answer.name, structured_answer)
    if tool_name == TRANSFER_TO_AGENT or isinstance(tools.get(tool_name), TransferToAgentTool):
        # The model Step carries out a transfer that came alone, to an agent this one may reach; one
        # that reaches a tool Step did not happen, and the model reads why.
        targets = ", ".join(target.name for target in _get_transfer_targets(agent)) or "none"
        raise ToolExecutionError(
            f"the transfer to agent {args.get('agent_name')!r} was not carried out: call "
            f"{TRANSFER_TO_AGENT} alone in a response, with one of these agents: {targets}"
        )
    if tool_name not in tools:
        available = ", ".join(sorted(tools)) or "none"
        raise ToolExecutionError(f"Tool '{tool_name}' not found. Available tools: {available}.")
    call = types.FunctionCall(id=tool_call_id, name=tool_name, args=args)
    call_event = Event(
        invocation_id=context.invocation_id,
        author=agent.name,
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
    )
    # The call reaches this Step only after the session approved it where its policy asks for that,
    # so the session's approval stands for ADK's own confirmation of the tool.
    approved = {tool_call_id: ToolConfirmation(confirmed=True)}
    try:
        response_event = await handle_function_calls_async(
            context, call_event, tools, tool_confirmation_dict=approved
        )
    except RecursionError:
        # A result nested so deeply that ADK cannot copy or serialize it; every retry would meet it.
        raise ToolExecutionError(f"the result of {tool_name!r} nests too deeply: {TOO_DEEP}") from None
    if response_event is None:
        raise ToolExecutionError(
            f"tool {tool_name!r} returned no result; a long-running tool must return its result in a "
            "Dex tool Step"
        )
    for response in response_event.get_function_responses():
        if response.id == tool_call_id:
            _raise_for_interrupted_mcp_call(tools[tool_name], response.response)
            if _is_mcp_error(tools[tool_name], response.response):
                raise ToolExecutionError(_mcp_error_text(response.response or {}))
            if response.response and nests_deeper_than(response.response, MAX_JSON_NESTING_DEPTH):
                raise ToolExecutionError(f"the result of {tool_name!r} nests too deeply: {TOO_DEEP}")
            return function_response_to_text(response.response)
    raise ToolExecutionError(f"Google ADK returned no result for tool call {tool_call_id!r} of {tool_name!r}")
