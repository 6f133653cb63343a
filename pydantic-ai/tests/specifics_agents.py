"""Agents for the session-level tests of Pydantic AI specifics; the test and its Worker build them here."""

from __future__ import annotations

from dex_agents import AgentSessionFlow
from dex_agents.testing import MATRIX_TOOLS, matrix_session_options, with_model_call_scope
from pydantic import BaseModel
from pydantic_ai import Agent

from dex_agents_pydantic_ai import PydanticAiRunner
from tests.scripted_model import scripted_function_model


class Forecast(BaseModel):
    """The structured output of the forecast agent."""

    city: str
    temperature_c: int


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow]:
    """A plain agent with the matrix tools, and the same agent with structured output."""
    plain = Agent(scripted_function_model(), tools=list(MATRIX_TOOLS))
    forecast = Agent(scripted_function_model(), tools=list(MATRIX_TOOLS), output_type=Forecast)
    return (
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(plain)),
            flow_type="PydanticAiSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(forecast)),
            flow_type="PydanticAiForecast",
            options=matrix_session_options(),
        ),
    )
