"""The application: the order desk as a Stepwise agent, the core's own agent loop on LiteLLM.

Everything an application writes is in this file, but for the shop's two tools: plain functions that
every order-desk example shares (`dex_agents_examples`). `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type. The tools carry their own effects, so the Flow needs no
tool policies. The session has plan mode: a message sent with ``plan_mode=True`` starts a turn in which the
agent may only draft a plan with the ``write_todos`` built-in, and ``execute_plan`` approves it.
"""

from __future__ import annotations

from dex_agents_examples import ORDER_DESK_INSTRUCTIONS, lookup_order, refund_order

from dex_agents import WRITE_TODOS, AgentSessionFlow, AgentSessionOptions
from dex_agents.stepwise import AgentDefinition, ModelClient, StepwiseRunner, function_tool
from examples.order_desk_stepwise.scripted import scripted_model

FLOW_TYPE = "StepwiseOrderDesk"


def resolve_model(name: str) -> ModelClient | str:
    """Return the model for ``--model``: the scripted LiteLLM provider, or a LiteLLM model string.

    Args:
        name: ``scripted``, or any model LiteLLM knows, such as ``openai/gpt-4.1-mini`` (the provider's API
            key must be in the environment of the Worker).
    """
    return scripted_model() if name == "scripted" else name


def build_agent(model_name: str = "scripted") -> AgentDefinition:
    """The agent: model, instructions and tools."""
    return AgentDefinition(
        name="order-desk",
        model=resolve_model(model_name),
        instructions=(
            f"{ORDER_DESK_INSTRUCTIONS} "
            "When there is a plan, keep its tasks' statuses current with write_todos as you work."
        ),
        tools=[
            function_tool(lookup_order, effect="read"),  # runs in its own Step, retried freely
            # At most once, and only after a person approved it.
            function_tool(refund_order, effect="non_idempotent_write", requires_approval=True),
        ],
    )


def build_flow(model_name: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the agent run by `StepwiseRunner`, with plan mode on."""
    options = AgentSessionOptions(built_in_tools=(WRITE_TODOS,), plan_mode_enabled=True)
    return AgentSessionFlow(StepwiseRunner(build_agent(model_name)), flow_type=FLOW_TYPE, options=options)
