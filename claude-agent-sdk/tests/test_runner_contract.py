"""The core's runner contract, in process, with the real Claude Code CLI and the scripted Messages API.

The contract's tests assume that one model call defers every tool call of its response. The whole-turn
harness cannot: the CLI runs reads inline and keeps one deferred call per response (the others are
refused and re-issued). The two tests that are about exactly that are expected to fail; the others are
replaced by their harness-mode form, which checks the same promise with the read inline and one
deferred write:

- the stored projection is the shared one (`check_message_projection`);
- the next turn replays the stored conversation;
- another runner's run state is refused before any model call;
- a turn that ends early keeps its items and a result for every call, and the next turn sees them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from dex_agents import (
    CancellationReason,
    MessageRole,
    ToolCallsRequested,
    ToolCallStatus,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    describe_tool_call_outcome,
)
from dex_agents.testing import (
    ProjectedCall,
    RunnerContractSpec,
    ScriptedResponse,
    ScriptedToolCall,
    check_message_projection,
    stored_calls_without_result,
)
from dex_agents.testing.runner_contract import RunnerContract, RunnerContractTests

from tests.matrix_spec import build_matrix_runner
from tests.scripted_claude import SCRIPTED_API

ONE_DEFERRAL_PER_RESPONSE = (
    "harness mode: the CLI runs reads inline and keeps one deferred call per response, so a response's "
    "calls are not all deferred (tests/test_transport_runner.py covers the one-deferral rule)"
)


def inline_read(contract: RunnerContract, tool_call_id: str, output: str) -> ScriptedToolCall:
    """A read call whose inline run returns ``output``."""
    return ScriptedToolCall(contract.tools.read, {"order_id": "A-1"}, tool_call_id, output=output)


class TestClaudeRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=build_matrix_runner,
        foreign_run_state_error="not written by ClaudeAgentRunner",
        # The CLI answers a tool name the agent does not have by itself (see test_harness_specifics.py).
        unknown_tool_message=None,
    )

    @pytest_asyncio.fixture(autouse=True, loop_scope="function")
    async def scripted_api_per_test(self) -> AsyncIterator[None]:
        """Each test's event loop gets the scripted API's server; it stops with the test."""
        yield
        await SCRIPTED_API.aclose()

    @pytest.mark.xfail(strict=True, reason=ONE_DEFERRAL_PER_RESPONSE)
    async def test_a_model_call_defers_every_tool_call_in_model_order_and_runs_none(
        self, contract: RunnerContract
    ) -> None:
        await super().test_a_model_call_defers_every_tool_call_in_model_order_and_runs_none(contract)

    @pytest.mark.xfail(strict=True, reason=ONE_DEFERRAL_PER_RESPONSE)
    async def test_resuming_shows_the_model_every_recorded_result_and_runs_no_tool(
        self, contract: RunnerContract
    ) -> None:
        await super().test_resuming_shows_the_model_every_recorded_result_and_runs_no_tool(contract)

    async def test_a_tool_calling_response_is_stored_in_the_shared_projection(
        self, contract: RunnerContract
    ) -> None:
        """Harness mode: the read runs inline, the write is deferred; both are stored the shared way."""
        read = inline_read(contract, "call-1", "Order A-1 has shipped.")
        mail = contract.call(contract.tools.idempotent_write, "call-3", "C-3")
        contract.script(
            [
                ScriptedResponse(text="Let me check both.", tool_calls=(read, mail)),
                ScriptedResponse(text="Done."),
            ]
        )
        contract.start_turn("Look up A-1 and mail C-3")
        requested = await contract.run_model_step()
        assert isinstance(requested, ToolCallsRequested), requested
        assert [call.tool_call_id for call in requested.tool_calls] == ["call-3"]
        contract.session.defer(requested)
        contract.session.finish("call-3", ToolCallStatus.SUCCEEDED, output="Receipt for C-3 sent.")

        final = await contract.run_model_step()

        assert isinstance(final, TurnCompleted), final
        check_message_projection(
            [*requested.new_messages, *final.new_messages],
            response_text="Let me check both.",
            calls=[ProjectedCall(call.tool_call_id, call.tool_name, call.arguments) for call in (read, mail)],
            outputs={"call-1": "Order A-1 has shipped.", "call-3": "Receipt for C-3 sent."},
        )

    async def test_the_next_turn_replays_the_stored_history(self, contract: RunnerContract) -> None:
        """Harness mode: a read turn is one run; the next turn's model call sees it, from storage alone."""
        read = inline_read(contract, "call-1", "A-1: in transit since Monday")
        contract.script(
            [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Order A-1 has shipped.")],
            [ScriptedResponse(text="You are welcome.")],
        )
        contract.start_turn("Where is order A-1?")
        completed = await contract.run_model_step()
        assert isinstance(completed, TurnCompleted), completed
        contract.session.store(completed.new_messages)
        contract.start_turn("Thanks!")

        second = await contract.run_model_step()

        assert isinstance(second, TurnCompleted), second
        seen = contract.model_calls()[-1].model_input_text
        expected = (
            "Where is order A-1?",
            "A-1: in transit since Monday",
            "Order A-1 has shipped.",
            "Thanks!",
        )
        positions = [seen.find(text) for text in expected]
        assert -1 not in positions and positions == sorted(positions), (expected, seen)
        assert len(contract.model_calls()) == 3

    async def test_a_run_state_of_another_runner_is_refused_before_any_model_call(
        self, contract: RunnerContract
    ) -> None:
        """Harness mode: the deferred call is a write; another runner's state ends the turn at once."""
        mail = contract.call(contract.tools.idempotent_write, "call-3", "C-3")
        contract.script([ScriptedResponse(tool_calls=(mail,)), ScriptedResponse(text="Never said.")])
        contract.start_turn("Mail C-3")
        requested = await contract.run_model_step()
        assert isinstance(requested, ToolCallsRequested), requested
        contract.session.defer(requested)
        contract.session.finish("call-3", ToolCallStatus.SUCCEEDED, output="sent")
        contract.session.framework_run_state = '{"format":"dex-agents-someone-else/run-state","version":1}'

        outcome = await contract.run_model_step()

        assert isinstance(outcome, TurnCompleted) and outcome.turn_error is not None, outcome
        assert self.spec.foreign_run_state_error in outcome.turn_error, outcome.turn_error
        assert len(contract.model_calls()) == 1, "the model was called with another runner's state"
        assert contract.tool_runs() == []

    async def test_a_turn_that_ends_early_keeps_its_items_and_a_result_for_every_call(
        self, contract: RunnerContract
    ) -> None:
        """Harness mode: two deferrals, the second abandoned; the turn keeps every call with its result."""
        tools = contract.tools
        read = inline_read(contract, "call-1", "Order A-1 has shipped.")
        mail = contract.call(tools.idempotent_write, "call-3", "C-3")
        cancel = contract.call(tools.single_attempt_write, "call-4", "D-4")
        contract.script(
            [
                ScriptedResponse(text="Let me see.", tool_calls=(read, mail)),
                ScriptedResponse(tool_calls=(cancel,)),
            ],
            [ScriptedResponse(text="Understood.")],
        )
        contract.start_turn("Look up A-1, mail C-3, cancel D-4")
        session = contract.session
        first = await contract.run_model_step()
        assert isinstance(first, ToolCallsRequested), first
        session.defer(first)
        session.finish("call-3", ToolCallStatus.SUCCEEDED, output="Receipt for C-3 sent.")
        second = await contract.run_model_step()
        assert isinstance(second, ToolCallsRequested), second
        assert [call.tool_call_id for call in second.tool_calls] == ["call-4"]
        session.defer(second)
        session.abandon("call-4", CancellationReason.TURN_CANCELLED)
        abandoned = session.records["call-4"]
        runs = len(contract.tool_runs())

        runner = contract.runner
        assert isinstance(runner, UnfinishedTurnMessageBuilder)
        await session.end_turn_early(runner)

        assert len(contract.model_calls()) == 2, "building the unstored items made a model call"
        assert len(contract.tool_runs()) == runs == 1, "only the inline read ran, in the first model call"
        assert stored_calls_without_result(session.messages) == [], session.messages
        results = {m.tool_call_id: m.tool_output for m in session.messages if m.role is MessageRole.TOOL}
        assert results == {
            "call-1": "Order A-1 has shipped.",
            "call-3": "Receipt for C-3 sent.",
            "call-4": describe_tool_call_outcome(abandoned),
        }
        contract.start_turn("Stop, do nothing more")
        answer = await contract.run_model_step()
        assert isinstance(answer, TurnCompleted), answer
        seen = contract.model_calls()[-1].model_input_text
        for text in (*results.values(), "Stop, do nothing more"):
            assert text in seen, (text, seen)
        assert "Tool result missing" not in seen, seen
