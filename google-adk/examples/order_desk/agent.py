"""The application: an ordinary Google ADK app, wrapped for a durable Dex session.

Everything an application writes is in this file, but for the shop's two tools: plain functions that
every order-desk example shares (`dex_agents_examples`). `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type.
"""

from __future__ import annotations

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents_examples import ORDER_DESK_INSTRUCTIONS, ORDER_DESK_TOOL_POLICIES, lookup_order, refund_order
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import BaseLlm

from dex_agents_google_adk import GoogleAdkRunner
from examples.order_desk.scripted import OrderDeskScriptedLlm

FLOW_TYPE = "AdkOrderDesk"


def resolve_model(name: str) -> BaseLlm | str:
    """Return the model for ``--model``: the built-in scripted model, or a model name ADK knows.

    Args:
        name: ``scripted``, or a name such as ``gemini-2.5-flash`` (the provider's API key must be in the
            environment of the Worker).
    """
    return OrderDeskScriptedLlm() if name == "scripted" else name


def build_app(model_name: str = "scripted") -> App:
    """The application, exactly as it would run without Dex."""
    agent = LlmAgent(
        name="order_desk",
        model=resolve_model(model_name),
        instruction=ORDER_DESK_INSTRUCTIONS,
        tools=[lookup_order, refund_order],
    )
    return App(name="order_desk", root_agent=agent)


def build_flow(model_name: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the app wrapped in `GoogleAdkRunner`, with a policy for each tool."""
    return AgentSessionFlow(
        GoogleAdkRunner(build_app(model_name)),
        flow_type=FLOW_TYPE,
        # The lookup is a read (its own Step, retried freely); the refund a non-idempotent write that runs
        # at most once, only after a person approved it.
        options=AgentSessionOptions(tool_policies=ORDER_DESK_TOOL_POLICIES),
    )
