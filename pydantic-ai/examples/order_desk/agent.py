"""The application: an ordinary Pydantic AI agent, wrapped for a durable Dex session.

Everything an application writes is in this file, but for the shop's two tools: plain functions that
every order-desk example shares (`dex_agents_examples`). `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type.
"""

from __future__ import annotations

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents_examples import ORDER_DESK_INSTRUCTIONS, ORDER_DESK_TOOL_POLICIES, lookup_order, refund_order
from pydantic_ai import Agent
from pydantic_ai.models import Model

from dex_agents_pydantic_ai import PydanticAiRunner
from examples.order_desk.scripted import scripted_model

FLOW_TYPE = "OrderDesk"


def resolve_model(name: str) -> Model | str:
    """Return the model for ``--model``: the built-in scripted model, or a Pydantic AI model name.

    Args:
        name: ``scripted``, or any name Pydantic AI knows, such as ``openai:gpt-4.1`` (the provider's
            API key must be in the environment of the Worker).
    """
    return scripted_model() if name == "scripted" else name


def build_agent() -> Agent[None, str]:
    """The agent, exactly as it would run without Dex (its model is chosen per run)."""
    # Pydantic AI takes plain functions as tools; it reads their names, type hints and docstrings.
    return Agent(instructions=ORDER_DESK_INSTRUCTIONS, tools=[lookup_order, refund_order])


def build_flow(model_name: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the agent wrapped in `PydanticAiRunner`, with a policy for each tool."""
    return AgentSessionFlow(
        # A model name is resolved when the Worker first calls the model, so the process that only starts
        # and reads sessions needs neither the provider's package nor its key.
        PydanticAiRunner(build_agent(), model=resolve_model(model_name)),
        flow_type=FLOW_TYPE,
        # The lookup is a read (its own Step, retried freely); the refund a non-idempotent write that runs
        # at most once, only after a person approved it.
        options=AgentSessionOptions(tool_policies=ORDER_DESK_TOOL_POLICIES),
    )
