"""Agents for the session-level tests of the SDK specifics; the test and its Worker build them here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from agents import (
    Agent,
    GuardrailFunctionOutput,
    RunContextWrapper,
    Tool,
    TResponseInputItem,
    function_tool,
    handoff,
    input_guardrail,
)
from dex_agents import AgentSessionFlow
from dex_agents.testing import MATRIX_TOOLS, matrix_session_options, with_model_call_scope

from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import ScriptedAnswer, ScriptedResponsesModel, call_item, text_item
from tests.scripted_model import matrix_model


async def _triage_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del items, offered
    return ScriptedAnswer(
        [call_item("transfer_to_billing", {}, "handoff-1")], input_tokens=11, output_tokens=3
    )


async def _billing_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del offered
    looked_up = any(
        cast(Mapping[str, Any], item).get("type") == "function_call_output"
        and cast(Mapping[str, Any], item).get("call_id") == "lookup-1"
        for item in items
    )
    if not looked_up:
        return ScriptedAnswer(
            [
                text_item("Billing here, checking A-1."),
                call_item("lookup_order", {"order_id": "A-1"}, "lookup-1"),
            ],
            input_tokens=13,
            output_tokens=4,
        )
    return ScriptedAnswer([text_item("Billing: order A-1 is paid.")], input_tokens=17, output_tokens=5)


@input_guardrail
async def no_passwords(
    context: RunContextWrapper[Any], agent: Agent[Any], items: str | list[TResponseInputItem]
) -> GuardrailFunctionOutput:
    """Trips when the user's last message asks for a password."""
    last = items if isinstance(items, str) else str(cast(Mapping[str, Any], items[-1]).get("content", ""))
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="password" in last.lower())


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """A plain agent with the matrix tools, a triage agent that hands off, and a guarded agent."""
    tools: list[Tool] = [function_tool(tool) for tool in MATRIX_TOOLS]
    plain = Agent[None](name="orders", model=matrix_model(), tools=tools)
    billing = Agent[None](name="billing", model=ScriptedResponsesModel(_billing_answer), tools=tools)
    triage = Agent[None](
        name="triage", model=ScriptedResponsesModel(_triage_answer), handoffs=[handoff(billing)]
    )
    guarded = Agent[None](name="guarded", model=matrix_model(), tools=tools, input_guardrails=[no_passwords])
    return (
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(plain)),
            flow_type="OpenAIAgentsSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(triage)),
            flow_type="OpenAIAgentsHandoff",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(guarded)),
            flow_type="OpenAIAgentsGuarded",
            options=matrix_session_options(),
        ),
    )
