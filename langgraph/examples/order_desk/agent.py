"""The application: an ordinary LangChain `create_agent` agent, wrapped for a durable Dex session.

Everything an application writes is in this file, but for the shop's two tools: plain functions that
every order-desk example shares (`dex_agents_examples`). `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type.
"""

from __future__ import annotations

from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents_examples import ORDER_DESK_INSTRUCTIONS, ORDER_DESK_TOOL_POLICIES, lookup_order, refund_order
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from examples.order_desk.scripted import scripted_model

FLOW_TYPE = "LangGraphOrderDesk"


def resolve_model(name: str) -> BaseChatModel | str:
    """Return the model for ``--model``: the built-in scripted model, or a LangChain model string.

    Args:
        name: ``scripted``, or a model string for `init_chat_model`, such as ``openai:gpt-4.1`` (the
            provider's LangChain package, here ``langchain-openai``, must be installed and its API key in
            the environment of the Worker).
    """
    return scripted_model() if name == "scripted" else name


def build_agent(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent, exactly as it would run without Dex, plus `DexToolGate()` and the runner's checkpointer.

    Its own model is the scripted one; `build_flow` gives the runner the model every turn runs with.
    """
    return create_agent(
        scripted_model(),
        # LangChain's `tool` reads the plain functions' names, type hints and docstrings.
        tools=[tool(lookup_order), tool(refund_order)],
        system_prompt=ORDER_DESK_INSTRUCTIONS,
        middleware=[DexToolGate()],  # first: every tool call becomes its own Step
        checkpointer=checkpointer,  # the runner's saver; the graph's state travels in the run state
    )


def build_flow(model_name: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the agent wrapped in `LangGraphRunner`, with a policy for each tool."""
    model = resolve_model(model_name)
    return AgentSessionFlow(
        LangGraphRunner(
            build_agent,
            # The runner builds the graph once, with the model in it; this hook chooses each turn's model
            # instead. The runner resolves a model string with `init_chat_model` in the Worker, at the first
            # model call, so the process that only starts and reads sessions needs neither the provider's
            # package nor its key.
            model_for_settings=lambda _settings: model,
        ),
        flow_type=FLOW_TYPE,
        # The lookup is a read (its own Step, retried freely); the refund a non-idempotent write that runs
        # at most once, only after a person approved it.
        options=AgentSessionOptions(tool_policies=ORDER_DESK_TOOL_POLICIES),
    )
