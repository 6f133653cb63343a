"""A tool policy for a name the agent has no tool by is refused when the Flow is built (issue 32)."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    FrameworkMessage,
    ToolEffect,
    ToolExecutionResult,
    ToolNamesRunner,
    ToolPolicy,
    UnknownToolPolicyError,
)
from dex_agents.mcp import McpStdioServer, McpToolSource
from dex_agents.session._tool_names import unknown_tool_policy_problem
from dex_agents.stepwise import AgentDefinition, StepwiseRunner
from dex_agents.testing import ScriptedRunner

READ = ToolPolicy(ToolEffect.READ)


async def find_slots(day: str) -> str:
    """Find free slots."""
    return day


async def book_slot(slot: str) -> str:
    """Book a slot."""
    return slot


def _options(*names: str, built_in_tools: Collection[str] = ()) -> AgentSessionOptions:
    return AgentSessionOptions(tool_policies=dict.fromkeys(names, READ), built_in_tools=built_in_tools)


def _flow(runner: object, options: AgentSessionOptions) -> AgentSessionFlow:
    return AgentSessionFlow(runner, flow_type="Clinic", options=options)  # pyright: ignore[reportArgumentType]


class _ListedLater:
    """A runner whose tools come from a listing it has not made yet."""

    def __init__(self, names: object = None) -> None:
        self.names = names

    def agent_tool_names(self) -> Collection[str] | None:
        return self.names  # pyright: ignore[reportReturnType]

    def build_user_message(self, text: str) -> FrameworkMessage:
        raise NotImplementedError

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        raise NotImplementedError

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        raise NotImplementedError


def test_a_misspelled_policy_is_refused_naming_the_closest_tool_and_the_agents_tools() -> None:
    runner = ScriptedRunner(tools=(find_slots, book_slot))
    assert isinstance(runner, ToolNamesRunner)
    with pytest.raises(UnknownToolPolicyError) as refused:
        _flow(runner, _options("find_slot", "book_slot"))
    assert str(refused.value) == (
        "tool_policies names 'find_slot', but the agent has no tool by that name; did you mean "
        "'find_slots'? Its tools: book_slot, find_slots"
    )
    assert isinstance(refused.value, ValueError)


def test_every_unknown_key_is_named_and_a_name_nothing_resembles_gets_no_guess() -> None:
    runner = ScriptedRunner(tools=(find_slots, book_slot))
    with pytest.raises(UnknownToolPolicyError) as refused:
        _flow(runner, _options("find_slot", "launch_rocket", built_in_tools=("ask_user",)))
    assert str(refused.value) == (
        "tool_policies names 'find_slot', 'launch_rocket', but the agent has no tools by those names; did "
        "you mean 'find_slots' for 'find_slot'? Its tools: ask_user, book_slot, find_slots"
    )
    assert unknown_tool_policy_problem({"launch_rocket": READ}, (), ()) == (
        "tool_policies names 'launch_rocket', but the agent has no tool by that name. It lists no tools"
    )


def test_built_in_names_and_real_tools_are_accepted() -> None:
    runner = ScriptedRunner(tools=(find_slots, book_slot))
    # A built-in's name is real whether or not the session enables it.
    flow = _flow(runner, _options("find_slots", "ask_user", "write_todos"))
    assert set(flow.options.tool_policies) == {"find_slots", "ask_user", "write_todos"}


def test_a_runner_that_cannot_list_its_tools_yet_leaves_the_check_to_the_first_model_call() -> None:
    _flow(_ListedLater(), _options("find_slot"))
    _flow(ScriptedRunner(tools=(find_slots,), lists_tool_names_after_model_call=True), _options("find_slot"))
    # A client-only Flow has no runner to ask.
    AgentSessionFlow.for_client(flow_type="Clinic", options=_options("find_slot"))


@pytest.mark.parametrize(("names", "named"), [("find_slots", "str"), ([1], "int"), (7, "int")])
def test_agent_tool_names_must_be_a_collection_of_names(names: object, named: str) -> None:
    with pytest.raises(TypeError, match=f"agent_tool_names must return .*got {named}"):
        _flow(_ListedLater(names), _options("find_slots"))


def test_stepwise_lists_its_function_tools_and_an_mcp_sources_once_listed() -> None:
    plain = StepwiseRunner(AgentDefinition(name="clinic", model="openai/gpt-4.1-mini", tools=[find_slots]))
    assert plain.agent_tool_names() == ("find_slots",)
    with pytest.raises(UnknownToolPolicyError, match="did you mean 'find_slots'"):
        _flow(plain, _options("find_slot"))
    # MCP tools are named <server>__<tool> and known only once this Worker listed the server.
    source = McpToolSource([McpStdioServer("calendar", "python")])
    assert source.agent_tool_names() == ()
    with_mcp = StepwiseRunner(
        AgentDefinition(name="clinic", model="openai/gpt-4.1-mini", tools=[find_slots, source])
    )
    assert with_mcp.agent_tool_names() == ("find_slots",)
    _flow(with_mcp, _options("find_slots", "calendar__book"))
    with pytest.raises(UnknownToolPolicyError, match="names 'find_slot'"):
        _flow(with_mcp, _options("find_slot", "calendar__book"))


def test_an_mcp_servers_keys_are_checked_once_the_runner_lists_one_of_its_tools() -> None:
    listed = ("find_slots", "calendar__book_slot", "calendar__free_busy")
    assert unknown_tool_policy_problem({"calendar__book_slot": READ, "crm__note": READ}, listed, ()) is None
    assert unknown_tool_policy_problem({"calendar__book": READ}, listed, ()) == (
        "tool_policies names 'calendar__book', but the agent has no tool by that name; did you mean "
        "'calendar__book_slot'? Its tools: calendar__book_slot, calendar__free_busy, find_slots"
    )
    # Not an MCP name: a key with an empty server or tool part is checked as any other.
    assert unknown_tool_policy_problem({"__book": READ}, listed, ()) is not None
