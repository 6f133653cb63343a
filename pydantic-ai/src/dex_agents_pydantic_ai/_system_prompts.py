"""The agent's system prompts, which the stored history does not hold.

Pydantic AI adds `system_prompt=` prompts only to a run that starts without history, and the session
always passes history: the stored messages, rebuilt for every model call. So before each model call the
runner asks Pydantic AI for the prompts of a fresh run (static ones and `@agent.system_prompt`
functions alike) and puts them in front of the history, where a run without Dex would have stored them.

Asking means entering a whole agent run for its first node, a fifth of a model Step's Worker CPU. An agent
whose prompts are only ``system_prompt=`` texts gets the same parts Pydantic AI makes of them
(``SystemPromptPart(text)`` each, in order) without a run; any prompt function, or an agent that keeps its
prompts elsewhere (a wrapper agent, another Pydantic AI version), takes the run.
"""

from __future__ import annotations

from typing import Any, cast

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
    static = _static_prompts_only(agent)
    if static is not None:
        return ModelRequest(parts=[SystemPromptPart(prompt) for prompt in static]) if static else None
    # Without toolsets: system prompts never depend on tools, and entering an MCP toolset would start
    # or connect to its server just to read prompts.
    with agent.override(toolsets=[]):
        return await _first_request_system_prompts(agent, deps=deps, model=model)


def _static_prompts_only(agent: Agent[AgentDepsT, Any]) -> tuple[str, ...] | None:
    """The agent's ``system_prompt=`` texts when they are all its prompts, else `None`."""
    static: object = getattr(agent, "_system_prompts", None)
    functions: object = getattr(agent, "_system_prompt_functions", None)
    dynamic: object = getattr(agent, "_system_prompt_dynamic_functions", None)
    if not (isinstance(static, tuple) and functions == [] and dynamic == {}):
        return None
    texts = cast(tuple[object, ...], static)
    if not all(isinstance(text, str) for text in texts):
        return None
    return cast(tuple[str, ...], texts)


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
