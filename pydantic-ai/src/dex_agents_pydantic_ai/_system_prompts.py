"""The agent's system prompts, which the stored history does not hold.

Pydantic AI adds `system_prompt=` prompts only to a run that starts without history, and the session
always passes history: the stored messages, rebuilt for every model call. So before each model call the
runner asks Pydantic AI for the prompts of a fresh run (static ones and `@agent.system_prompt`
functions alike) and puts them in front of the history, where a run without Dex would have stored them.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, ModelRequestNode
from pydantic_ai.messages import ModelRequest, SystemPromptPart
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.tools import AgentDepsT
from pydantic_graph import End

__all__ = ["system_prompt_request"]


async def system_prompt_request(
    agent: Agent[AgentDepsT, Any], *, deps: AgentDepsT, model: Model | KnownModelName | str | None
) -> ModelRequest | None:
    """Return the system prompts Pydantic AI would start a fresh run with, or `None` when there are none.

    It runs only the agent's `UserPromptNode`, which builds the first request; the model is not called
    and no toolset is entered.

    Args:
        agent: The agent.
        deps: The dependencies system prompt functions receive.
        model: The runner's model override.

    Returns:
        A request holding only the system prompt parts.
    """
    # Without toolsets: system prompts never depend on tools, and entering an MCP toolset would start
    # or connect to its server just to read prompts.
    with agent.override(toolsets=[]):
        return await _first_request_system_prompts(agent, deps=deps, model=model)


async def _first_request_system_prompts(
    agent: Agent[AgentDepsT, Any], *, deps: AgentDepsT, model: Model | KnownModelName | str | None
) -> ModelRequest | None:
    async with agent.iter(user_prompt="", deps=deps, model=model) as run:
        first = run.next_node
        if isinstance(first, End):
            return None
        node = await run.next(first)
        if not isinstance(node, ModelRequestNode):
            return None
        parts = [part for part in node.request.parts if isinstance(part, SystemPromptPart)]
    return ModelRequest(parts=parts) if parts else None
