"""Stepwise's pure parts: tool schemas, definitions checked at construction, settings, run state, imports."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

import dex_agents.stepwise
import dex_agents.testing.stepwise
from dex_agents import (
    AgentToolCall,
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    RunStateFormatError,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.stepwise import (
    AgentDefinition,
    FunctionTool,
    FunctionToolSource,
    InstructionContext,
    LiteLLMModelClient,
    ModelSettings,
    StepwiseRunner,
    ToolDefinition,
    ToolDefinitionError,
    ToolSource,
    TurnContinuation,
    function_tool,
)
from dex_agents.stepwise._run_state import StepwiseRunState
from dex_agents.stepwise._tools import chat_tool
from dex_agents.testing.stepwise import render_model_input
from tests.stepwise_agents import CORE_DIR


class Priority(Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str
    city: str = Field(description="The city, in English.")


def create_ticket(
    title: str,
    priority: Priority,
    tags: list[str],
    channel: Literal["email", "phone"] = "email",
    due_in_days: Annotated[int, Field(ge=1)] | None = None,
    address: Address | None = None,
) -> str:
    """Open a support ticket.

    The ticket goes to the team on duty.

    Args:
        title: A one-line summary
            of the problem.
        priority: How urgent it is.
        tags: Labels for the ticket.
        channel: How to reach the customer.

    Returns:
        The ticket's ID.
    """
    return "T-1"


def test_type_hints_and_docstring_become_the_tools_json_schema() -> None:
    definition = FunctionTool(create_ticket, effect="non_idempotent_write").definition

    assert definition.name == "create_ticket"
    assert definition.description == "Open a support ticket.\n\nThe ticket goes to the team on duty."
    assert definition.policy == ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)
    assert definition.input_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "title": {"type": "string", "description": "A one-line summary of the problem."},
            "priority": {"$ref": "#/$defs/Priority", "description": "How urgent it is."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels for the ticket."},
            "channel": {
                "type": "string",
                "enum": ["email", "phone"],
                "default": "email",
                "description": "How to reach the customer.",
            },
            "due_in_days": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": None},
            "address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
        },
        "required": ["title", "priority", "tags"],
        "$defs": {
            "Priority": {"type": "string", "enum": ["low", "high"]},
            "Address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string", "description": "The city, in English."},
                },
                "required": ["street", "city"],
            },
        },
    }
    assert chat_tool(definition) == {
        "type": "function",
        "function": {
            "name": "create_ticket",
            "description": definition.description,
            "parameters": definition.input_schema,
        },
    }


async def test_a_function_tool_converts_the_models_arguments_to_the_parameter_types() -> None:
    received: list[object] = []

    def plan_visit(when: int, address: Address, priority: Priority = Priority.LOW) -> dict[str, object]:
        received.extend([when, address, priority])
        return {"visit": when, "city": address.city}

    tool = function_tool(name="plan-visit", effect=ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)(
        plan_visit
    )

    output = await tool.call(
        {"when": "3", "address": {"street": "Main 1", "city": "Oslo"}, "priority": "high"}
    )

    assert output == '{"visit":3,"city":"Oslo"}'
    assert received == [3, Address(street="Main 1", city="Oslo"), Priority.HIGH]
    assert tool.name == "plan-visit" and tool.definition.policy == ToolPolicy(
        ToolEffect.IDEMPOTENT_WRITE, True
    )
    assert tool(1, Address(street="x", city="y")) == {"visit": 1, "city": "y"}  # still callable as code


async def untyped(order_id) -> str:  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    return str(order_id)  # pyright: ignore[reportUnknownArgumentType]


async def collects(*order_ids: str) -> str:
    return ",".join(order_ids)


async def takes_keywords(**filters: str) -> str:
    return str(filters)


async def positional(order_id: str, /) -> str:
    return order_id


async def private(_order_id: str) -> str:
    return _order_id


async def takes_an_event(done: asyncio.Event) -> str:
    return str(done)


async def forward_reference(order: UndefinedOrder) -> str:  # noqa: F821  # pyright: ignore[reportUndefinedVariable, reportUnknownParameterType]
    return "x"


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (
            untyped,  # pyright: ignore[reportUnknownArgumentType]
            "tool 'untyped': parameter 'order_id' has no type hint; the model needs one to know what to send",
        ),
        (collects, "tool 'collects': parameter 'order_ids' collects extra arguments (*args or **kwargs)"),
        (takes_keywords, "tool 'takes_keywords': parameter 'filters' collects extra arguments"),
        (positional, "tool 'positional': parameter 'order_id' is positional-only"),
        (private, "tool 'private': parameter '_order_id' starts with '_'"),
        (takes_an_event, "tool 'takes_an_event': its parameters have no JSON schema"),
        (forward_reference, "tool 'forward_reference': cannot read its signature and type hints"),
        (lambda order_id: order_id, "tool name '<lambda>' is not 1 to 64 letters, digits, '_' or '-'"),  # pyright: ignore[reportUnknownLambdaType]
        (
            "lookup_order",
            "agent 'orders': a tool must be a function, a FunctionTool or a ToolSource, got str",
        ),
    ],
)
def test_a_tool_that_cannot_be_offered_to_a_model_fails_when_the_agent_is_defined(
    tool: object, message: str
) -> None:
    with pytest.raises(ToolDefinitionError) as error:
        AgentDefinition(name="orders", model="openai/gpt-4.1-mini", tools=[tool])  # pyright: ignore[reportArgumentType]
    assert message in str(error.value)


async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return order_id


def test_a_tool_policy_that_makes_no_sense_fails_when_the_tool_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match="effect 'readonly' is not one of read, idempotent_write"):
        function_tool(lookup_order, effect="readonly")
    with pytest.raises(ToolDefinitionError, match="requires_approval needs an effect too"):
        function_tool(lookup_order, requires_approval=True)
    with pytest.raises(ToolDefinitionError, match="two tools are named 'lookup_order'"):
        AgentDefinition(
            name="orders", model="openai/gpt-4.1-mini", tools=[lookup_order, function_tool(lookup_order)]
        )


def test_an_agent_definition_checks_its_fields_when_it_is_built() -> None:
    with pytest.raises(ValueError, match="agent 'orders' needs a model"):
        AgentDefinition(name="orders")
    with pytest.raises(ValueError, match="needs a non-blank name"):
        AgentDefinition(name=" ", model="openai/gpt-4.1-mini")
    with pytest.raises(TypeError, match="model must be a LiteLLM model string or a ModelClient, got int"):
        AgentDefinition(name="orders", model=4)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="instructions must be text or a function"):
        AgentDefinition(name="orders", model="openai/gpt-4.1-mini", instructions=3)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="decide_turn_continuation must be a function"):
        AgentDefinition(name="orders", model="openai/gpt-4.1-mini", decide_turn_continuation="end")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="tools must be a list"):
        AgentDefinition(name="orders", model="openai/gpt-4.1-mini", tools=lookup_order)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="non-blank message"):
        TurnContinuation("  ")
    with pytest.raises(ValueError, match="max_output_tokens must be at least 1"):
        ModelSettings(max_output_tokens=0)
    with pytest.raises(TypeError, match="StepwiseRunner takes an AgentDefinition"):
        StepwiseRunner("orders")  # pyright: ignore[reportArgumentType]


@dataclass
class InventorySource:
    """A tool source of another kind, as an MCP server is."""

    async def list_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition("count_stock", "Count a product's stock.", {"type": "object", "properties": {}})
        ]

    def deferred_tool_call(
        self, turn: AgentTurnContext, *, tool_call_id: str, tool_name: str, arguments: str
    ) -> DeferredToolCall:
        return DeferredToolCall(tool_call_id, tool_name, arguments, ToolPolicy(ToolEffect.READ), "inventory")

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        return record.tool_source_reference == "inventory"

    async def call_tool(self, execution: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("42")


async def test_functions_and_tool_sources_are_offered_together_and_a_duplicate_name_fails_clearly() -> None:
    definition = AgentDefinition(
        name="shop", model="openai/gpt-4.1-mini", tools=[lookup_order, InventorySource()]
    )
    [functions, inventory] = definition.tool_sources
    assert isinstance(functions, FunctionToolSource) and functions.names == ("lookup_order",)
    assert isinstance(inventory, ToolSource)

    clash = AgentDefinition(
        name="shop", model="openai/gpt-4.1-mini", tools=[InventorySource(), InventorySource()]
    )
    with pytest.raises(ToolDefinitionError, match="agent 'shop' offers two tools named 'count_stock'"):
        await StepwiseRunner(clash)._listed_tools()  # pyright: ignore[reportPrivateUsage]


def test_forced_tool_choice_follows_the_model_map_and_thinking() -> None:
    plain = ModelSettings()
    thinking = ModelSettings(reasoning_effort="high")
    assert LiteLLMModelClient("openai/gpt-4o-mini").supports_forced_tool_choice(plain)
    assert LiteLLMModelClient("anthropic/claude-sonnet-4-5").supports_forced_tool_choice(plain)
    # Anthropic refuses a forced tool choice while extended thinking is on.
    assert not LiteLLMModelClient("anthropic/claude-sonnet-4-5").supports_forced_tool_choice(thinking)
    assert not LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5", thinking={"type": "enabled", "budget_tokens": 1024}
    ).supports_forced_tool_choice(plain)
    assert not LiteLLMModelClient("ollama/llama3").supports_forced_tool_choice(plain)
    assert LiteLLMModelClient("ollama/llama3", forced_tool_choice=True).supports_forced_tool_choice(plain)
    with pytest.raises(ValueError, match="non-empty model string"):
        LiteLLMModelClient("")


def test_the_run_state_round_trips_in_the_core_envelope_and_a_foreign_one_fails_clearly() -> None:
    state = StepwiseRunState(
        pending_tool_call_ids=("c1", "c2"), continuation="Go on.", consecutive_continuations=2
    )
    ended = StepwiseRunState(pending_tool_call_ids=("c3",), end_turn=True, turn_error="the hook raised")

    assert StepwiseRunState.from_json(state.to_json()) == state
    assert StepwiseRunState.from_json(ended.to_json()) == ended
    assert StepwiseRunState.from_json(None) == StepwiseRunState()
    # The state is the loop's bookkeeping only: the turn's messages are stored as they come.
    assert StepwiseRunState().to_json() == '{"format":"dex-agents-stepwise/run-state","version":1}'
    with pytest.raises(RunStateFormatError, match="has no format, and StepwiseRunner reads"):
        StepwiseRunState.from_json('{"items": []}')
    # The run state of the first Stepwise builds, before the envelope, is refused by name.
    with pytest.raises(RunStateFormatError, match="has format 'dex-stepwise/1'"):
        StepwiseRunState.from_json('{"format": "dex-stepwise/1", "items": [], "pending_tool_call_ids": []}')
    with pytest.raises(RunStateFormatError, match="version 2 of 'dex-agents-stepwise/run-state'"):
        StepwiseRunState.from_json('{"format": "dex-agents-stepwise/run-state", "version": 2}')
    with pytest.raises(RunStateFormatError, match="malformed"):
        StepwiseRunState.from_json(
            '{"format": "dex-agents-stepwise/run-state", "version": 1, "pending_tool_call_ids": [1]}'
        )


def test_the_scripted_model_renders_what_the_model_reads() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Where is A-1?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
    ]
    assert render_model_input(messages) == [
        "system: Be brief.",
        "user: Where is A-1?",
        "assistant calls lookup {} [c1]",
        "tool lookup [c1]: shipped",
    ]


STEPWISE_EXPORTS = {
    "END_TURN",
    "INSTALL_HINT",
    "MAX_CONSECUTIVE_CONTINUATIONS",
    "MISSING_TOOL_RESULT",
    "AgentDefinition",
    "FunctionTool",
    "FunctionToolSource",
    "InstructionContext",
    "Instructions",
    "ListedTool",
    "LiteLLMModelClient",
    "ModelClient",
    "ModelRequest",
    "ModelResolver",
    "ModelResponse",
    "ModelSettings",
    "ModelToolCall",
    "PlanningToolChoice",
    "StepwiseHistoryError",
    "StepwiseRunner",
    "ToolChoice",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolSource",
    "TurnContinuation",
    "TurnContinuationContext",
    "TurnContinuationDecider",
    "TurnContinuationDecision",
    "function_tool",
}


def test_the_public_api_is_pinned() -> None:
    assert set(dex_agents.stepwise.__all__) == STEPWISE_EXPORTS
    assert all(hasattr(dex_agents.stepwise, name) for name in STEPWISE_EXPORTS)
    assert set(dex_agents.testing.stepwise.__all__) == {
        "SCRIPTED_PROVIDER",
        "ScriptedLiteLLM",
        "render_model_input",
        "scripted_chunks",
        "scripted_model",
    }


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=CORE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )


def test_importing_dex_agents_never_loads_litellm() -> None:
    result = run_python(
        "import sys, dex_agents, dex_agents.testing, dex_agents.session\n"
        "print(sorted(name for name in sys.modules if name.startswith(('litellm', 'dex_agents.stepwise'))))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_stepwise_without_litellm_fails_with_the_line_that_installs_it() -> None:
    # A None entry makes `import litellm` fail as it does when the package is not installed.
    result = run_python("import sys\nsys.modules['litellm'] = None\nimport dex_agents.stepwise")
    assert result.returncode == 1
    expected = 'dex_agents.stepwise needs LiteLLM, which is not installed: pip install "dex-agents[stepwise]"'
    assert f"ImportError: {expected}" in result.stderr


async def test_the_docs_example_defines_the_agent_it_describes() -> None:
    page_path = CORE_DIR.parent / "docs" / "pages" / "frameworks" / "stepwise" / "index.md"
    page = page_path.read_text(encoding="utf-8")
    block = page.split("<!-- stepwise-example -->\n```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(block, "index.md", "exec"), namespace)

    definition = namespace["definition"]
    assert isinstance(definition, AgentDefinition)
    [functions] = definition.tool_sources
    assert isinstance(functions, FunctionToolSource)
    lookup, refund = functions.definitions
    assert lookup.policy == ToolPolicy(ToolEffect.READ)
    assert lookup.input_schema["properties"] == {
        "order_id": {"type": "string", "description": 'The order\'s ID, such as "A-1".'}
    }
    assert refund.policy is not None and refund.policy.is_approval_required
    assert definition.model_client_for({"tier": "premium"}).model_name == "anthropic/claude-sonnet-4-5"
    assert definition.model_client_for({}).model_name == "openai/gpt-4.1-mini"
    context = InstructionContext(session_settings={"language": "French"}, flow_id="s", turn_id="turn-1")
    assert (
        await definition.instructions_for(context)
        == "You run the order desk of a small shop. Answer in French."
    )
