"""The runner contract as tests any adapter runs in process, without a server.

`RunnerContractTests` plays the session's side of the contract with `SessionSide` (stored messages in,
outcomes out, final records on resume) against the adapter's runner built around its scripted model, the
same runner its matrix uses::

    # tests/test_runner_contract.py
    from dex_agents.testing import RunnerContractSpec
    from dex_agents.testing.runner_contract import RunnerContractTests
    from tests.matrix_spec import build_runner

    class TestRunnerContract(RunnerContractTests):
        spec = RunnerContractSpec(
            build_runner=build_runner,
            foreign_run_state_error="not written by MyRunner",
            unknown_tool_message="Unknown tool name: 'launch_rocket'",
        )

Each test asserts what a session relies on: a model call defers every tool call in model order and runs
none; resuming shows the model each recorded result and runs no tool; the stored messages project a
tool-calling response the one way every adapter shares (`check_message_projection`); the next turn
replays the stored conversation; a run state another runner wrote is refused with a clear error before
any model call; a call to a tool name the agent does not have is deferred with `UNKNOWN_TOOL_POLICY` and
fails in its tool Step with a message the model sees at its next call; and, for a runner that implements
``build_unfinished_turn_messages``, a turn that steering or a cancellation ends keeps its items and a result
for every call, which the next turn's model call sees. A harness that runs reads inline inside its model
Step sets ``RunnerContractSpec.runs_reads_inline``, and the tests take their inline path where it differs.
Like ``dex_agents.testing.matrix``, this module needs pytest and pytest-asyncio; the kit registers it for
pytest's assertion rewriting.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from dex_agents import (
    UNKNOWN_TOOL_POLICY,
    AgentFrameworkRunner,
    AgentTurnOutcome,
    CancellationReason,
    MessageRole,
    RunStateFormat,
    ToolCallsRequested,
    ToolCallStatus,
    ToolExecutionError,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    describe_tool_call_outcome,
)
from dex_agents.testing._invocations import Invocation
from dex_agents.testing._matrix_tools import MatrixToolNames
from dex_agents.testing._projection import ProjectedCall, check_message_projection
from dex_agents.testing._runner_contract_spec import RunnerContractSpec
from dex_agents.testing._scoped_runner import with_model_call_scope
from dex_agents.testing._script import STATE_DIR_ENV, ScriptedResponse, ScriptedToolCall, ScriptStore
from dex_agents.testing._session_side import SessionSide
from dex_agents.testing._transcript import stored_calls_without_result

__all__ = ["RunnerContract", "RunnerContractSpec", "RunnerContractTests"]

_UNKNOWN_TOOL_NAME = "launch_rocket"
_FOREIGN_RUN_STATE = RunStateFormat("dex-agents-someone-else/run-state", 1, "SomeoneElsesRunner").wrap(
    {"messages": [], "pending": ["call-1"]}
)


class RunnerContract:
    """One contract test's runner, session side and script store.

    Args:
        spec: The adapter's spec.
        state_dir: The script store's directory, which ``DEX_AGENTS_TEST_STATE_DIR`` names.
    """

    def __init__(self, spec: RunnerContractSpec, state_dir: Path) -> None:
        self.spec = spec
        self.tools: MatrixToolNames = spec.tool_names
        self.store = ScriptStore(state_dir)
        self.runner: AgentFrameworkRunner = with_model_call_scope(spec.build_runner())
        self.session = SessionSide(tool_policies=spec.tool_names.policies())

    def script(self, *turns: Sequence[ScriptedResponse]) -> None:
        """Write the session's script, one sequence of responses per turn."""
        self.store.set_turns(self.session.flow_id, turns)

    def call(
        self, tool_name: str, tool_call_id: str, order_id: str, output: str | None = None
    ) -> ScriptedToolCall:
        """Build a scripted call of a matrix tool; ``output`` is its result when it runs (inline reads)."""
        return ScriptedToolCall(tool_name, {"order_id": order_id}, tool_call_id, output=output)

    def one_call_per_tool(self) -> tuple[ScriptedToolCall, ...]:
        """One scripted call per matrix tool, ``call-1`` to ``call-4``, in the order of `MatrixToolNames`."""
        tools = self.tools
        return (
            self.call(tools.read, "call-1", "A-1"),
            self.call(tools.approval_write, "call-2", "B-2"),
            self.call(tools.idempotent_write, "call-3", "C-3"),
            self.call(tools.single_attempt_write, "call-4", "D-4"),
        )

    def start_turn(self, text: str) -> None:
        """Store the user's message as the next turn's first message."""
        self.session.start_turn(self.runner.build_user_message(text))

    async def run_model_step(self) -> AgentTurnOutcome:
        """Call `run_model_step` with the turn context a `RunModel` Step builds now."""
        return await self.runner.run_model_step(self.session.context())

    def model_calls(self) -> list[Invocation]:
        """The model calls the scripted model logged, oldest first."""
        return self.store.invocations.model_calls(self.session.flow_id)

    def tool_runs(self) -> list[Invocation]:
        """The real tool runs the matrix tools logged."""
        return self.store.invocations.tool_calls(self.session.flow_id)


def _error_text(outcome: AgentTurnOutcome | BaseException) -> str:
    if isinstance(outcome, BaseException):
        return f"{type(outcome).__name__}: {outcome}"
    assert isinstance(outcome, TurnCompleted), f"expected the turn to end, got {outcome!r:.300}"
    assert outcome.turn_error is not None, "the turn ended without turn_error"
    return outcome.turn_error


class RunnerContractTests:
    """The runner contract as pytest tests; subclass as ``Test...`` and set :attr:`spec`."""

    spec: ClassVar[RunnerContractSpec]
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.asyncio]

    @pytest.fixture
    def contract(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunnerContract]:
        """A fresh runner, session side and script store; the scripted model finds the store."""
        monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
        yield RunnerContract(self.spec, tmp_path)

    async def test_a_model_call_defers_every_tool_call_in_model_order_and_runs_none(
        self, contract: RunnerContract
    ) -> None:
        """One response's calls become one `ToolCallsRequested`, in model order, with their policies."""
        calls = contract.one_call_per_tool()
        contract.script([ScriptedResponse(text="Let me see.", tool_calls=calls)])
        contract.start_turn("Look up A-1, refund B-2, mail C-3, cancel D-4")

        outcome = await contract.run_model_step()

        assert isinstance(outcome, ToolCallsRequested), outcome
        assert [
            (call.tool_call_id, call.tool_name, json.loads(call.arguments)) for call in outcome.tool_calls
        ] == [(call.tool_call_id, call.tool_name, dict(call.arguments)) for call in calls]
        policies = contract.tools.policies()
        assert [call.policy for call in outcome.tool_calls] == [policies[call.tool_name] for call in calls]
        assert outcome.framework_run_state, "the run state must be non-empty text"
        assert outcome.usage.model_calls == 1, outcome.usage
        assert len(contract.model_calls()) == 1
        assert contract.tool_runs() == [], "no tool may run inside a model Step"

    async def test_resuming_shows_the_model_every_recorded_result_and_runs_no_tool(
        self, contract: RunnerContract
    ) -> None:
        """Each final record's model-visible result reaches the next model call; the turn stores them."""
        calls = contract.one_call_per_tool()
        contract.script([ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Done.")])
        contract.start_turn("Do all four")
        requested = await contract.run_model_step()
        assert isinstance(requested, ToolCallsRequested), requested
        session = contract.session
        session.defer(requested)
        session.finish("call-1", ToolCallStatus.SUCCEEDED, output="Order A-1 has shipped.")
        session.finish("call-2", ToolCallStatus.REJECTED, rejection_message="Refunds need a manager.")
        session.finish("call-3", ToolCallStatus.FAILED, error="the mail server is down")
        session.finish("call-4", ToolCallStatus.OUTCOME_UNKNOWN, error="the Worker was lost")

        final = await contract.run_model_step()

        assert isinstance(final, TurnCompleted), final
        assert final.turn_error is None, final.turn_error
        model_calls = contract.model_calls()
        assert len(model_calls) == 2, "resuming makes exactly one model call"
        seen = model_calls[1].model_input_text
        for record in session.records.values():
            assert describe_tool_call_outcome(record) in seen, (record.tool_call_id, seen)
        assert contract.tool_runs() == [], "resuming runs no tool"
        stored_results = {
            message.tool_call_id for message in final.new_messages if message.role is MessageRole.TOOL
        }
        assert stored_results == {"call-1", "call-2", "call-3", "call-4"}, final.new_messages
        assert final.new_messages[-1].role is MessageRole.ASSISTANT, final.new_messages[-1]
        assert "Done." in (final.new_messages[-1].text or ""), final.new_messages[-1]

    async def test_a_tool_calling_response_is_stored_in_the_shared_projection(
        self, contract: RunnerContract
    ) -> None:
        """Text on its own assistant message, one assistant message per call, one tool message per result."""
        tools = contract.tools
        outputs = {"call-1": "Order A-1 has shipped.", "call-3": "Receipt for C-3 sent."}
        read = contract.call(tools.read, "call-1", "A-1", output=outputs["call-1"])
        mail = contract.call(tools.idempotent_write, "call-3", "C-3")
        asks = ScriptedResponse(text="Let me check both.", tool_calls=(read, mail))
        contract.script([asks, ScriptedResponse(text="Done.")])
        contract.start_turn("Look up A-1 and mail C-3")
        requested = await contract.run_model_step()
        assert isinstance(requested, ToolCallsRequested), requested
        deferred = list(outputs)
        if self.spec.runs_reads_inline:
            deferred = ["call-3"]
            assert [call.tool_call_id for call in requested.tool_calls] == deferred, requested.tool_calls
        contract.session.defer(requested)
        for tool_call_id in deferred:
            contract.session.finish(tool_call_id, ToolCallStatus.SUCCEEDED, output=outputs[tool_call_id])

        final = await contract.run_model_step()

        assert isinstance(final, TurnCompleted), final
        check_message_projection(
            [*requested.new_messages, *final.new_messages],
            response_text="Let me check both.",
            calls=[ProjectedCall(call.tool_call_id, call.tool_name, call.arguments) for call in (read, mail)],
            outputs=outputs,
        )

    async def test_the_next_turn_replays_the_stored_history(self, contract: RunnerContract) -> None:
        """A new turn's model call sees the earlier turn's messages, rebuilt from what the session stored."""
        result = "A-1: in transit since Monday"
        read = contract.call(contract.tools.read, "call-1", "A-1", output=result)
        contract.script(
            [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Order A-1 has shipped.")],
            [ScriptedResponse(text="You are welcome.")],
        )
        contract.start_turn("Where is order A-1?")
        completed = await contract.run_model_step()
        if not self.spec.runs_reads_inline:
            assert isinstance(completed, ToolCallsRequested), completed
            contract.session.defer(completed)
            contract.session.finish("call-1", ToolCallStatus.SUCCEEDED, output=result)
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
        """Another runner's run state is refused with a clear error, before any model call."""
        if self.spec.runs_reads_inline:
            deferred = contract.call(contract.tools.idempotent_write, "call-3", "C-3")
            contract.start_turn("Mail C-3")
        else:
            deferred = contract.call(contract.tools.read, "call-1", "A-1")
            contract.start_turn("Where is order A-1?")
        contract.script([ScriptedResponse(tool_calls=(deferred,)), ScriptedResponse(text="Never said.")])
        requested = await contract.run_model_step()
        assert isinstance(requested, ToolCallsRequested), requested
        contract.session.defer(requested)
        contract.session.finish(deferred.tool_call_id, ToolCallStatus.SUCCEEDED, output="done")
        contract.session.framework_run_state = _FOREIGN_RUN_STATE

        try:
            outcome: AgentTurnOutcome | BaseException = await contract.run_model_step()
        except Exception as error:
            outcome = error

        assert len(contract.model_calls()) == 1, "the model was called with another runner's state"
        assert contract.tool_runs() == []
        if self.spec.runs_reads_inline:
            # A harness reports what went wrong in its run as the turn's error; it does not raise.
            assert isinstance(outcome, TurnCompleted), outcome
        message = _error_text(outcome)
        assert self.spec.foreign_run_state_error in message, message

    async def test_a_call_to_an_unknown_tool_is_recorded_failed_and_the_model_sees_why(
        self, contract: RunnerContract
    ) -> None:
        """An unknown tool name is deferred with `UNKNOWN_TOOL_POLICY` and fails in its tool Step."""
        expected = self.spec.unknown_tool_message
        if expected is None:
            pytest.skip("RunnerContractSpec.unknown_tool_message is None: no unknown-tool message to check")
        rocket = ScriptedToolCall(_UNKNOWN_TOOL_NAME, {"target": "moon"}, "call-1")
        contract.script([ScriptedResponse(tool_calls=(rocket,)), ScriptedResponse(text="I cannot do that.")])
        contract.start_turn("Launch a rocket")

        requested = await contract.run_model_step()

        assert isinstance(requested, ToolCallsRequested), requested
        assert [(call.tool_name, call.policy) for call in requested.tool_calls] == [
            (_UNKNOWN_TOOL_NAME, UNKNOWN_TOOL_POLICY)
        ]
        assert len(contract.model_calls()) == 1, (
            "the framework's answer to the name is not a hidden model call"
        )
        contract.session.defer(requested)
        with pytest.raises(ToolExecutionError) as error:
            await contract.session.execute(contract.runner, "call-1")
        assert expected in error.value.message, error.value.message
        contract.session.finish("call-1", ToolCallStatus.FAILED, error=error.value.message)

        final = await contract.run_model_step()

        assert isinstance(final, TurnCompleted), final
        assert len(contract.model_calls()) == 2
        assert expected in contract.model_calls()[-1].model_input_text
        assert contract.tool_runs() == []

    async def test_a_turn_that_ends_early_keeps_its_items_and_a_result_for_every_call(
        self, contract: RunnerContract
    ) -> None:
        """`build_unfinished_turn_messages` returns the turn's items with a result per call, and no more."""
        runner = contract.runner
        if not isinstance(runner, UnfinishedTurnMessageBuilder):
            pytest.skip("the runner has no build_unfinished_turn_messages; an early turn end stores a note")
        if self.spec.runs_reads_inline:
            await self._end_a_turn_early_with_the_read_inline(contract, runner)
            return
        calls = contract.one_call_per_tool()
        contract.script(
            [ScriptedResponse(text="Let me see.", tool_calls=calls)],
            [ScriptedResponse(text="Understood.")],
        )
        contract.start_turn("Do all four")
        requested = await contract.run_model_step()
        assert isinstance(requested, ToolCallsRequested), requested
        session = contract.session
        session.defer(requested)
        session.finish("call-1", ToolCallStatus.SUCCEEDED, output="Order A-1 has shipped.")
        session.abandon("call-2", CancellationReason.STEERED)
        session.finish("call-3", ToolCallStatus.FAILED, error="the mail server is down")
        session.abandon("call-4", CancellationReason.TURN_CANCELLED)
        records = list(session.records.values())

        await session.end_turn_early(runner)

        assert len(contract.model_calls()) == 1, "building the unstored items made a model call"
        assert contract.tool_runs() == []
        assert stored_calls_without_result(session.messages) == [], session.messages
        stored = session.messages
        stored_results = {message.tool_call_id for message in stored if message.role is MessageRole.TOOL}
        assert stored_results == {"call-1", "call-2", "call-3", "call-4"}, session.messages
        contract.start_turn("Stop, do nothing more")
        answer = await contract.run_model_step()
        assert isinstance(answer, TurnCompleted), answer
        seen = contract.model_calls()[-1].model_input_text
        for record in records:
            assert describe_tool_call_outcome(record) in seen, (record.tool_call_id, seen)

    async def _end_a_turn_early_with_the_read_inline(
        self, contract: RunnerContract, runner: UnfinishedTurnMessageBuilder
    ) -> None:
        """The inline form: the read runs in the first model call, a write is done, the next is abandoned."""
        tools = contract.tools
        read = contract.call(tools.read, "call-1", "A-1", output="Order A-1 has shipped.")
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
        assert [call.tool_call_id for call in first.tool_calls] == ["call-3"], first.tool_calls
        session.defer(first)
        session.finish("call-3", ToolCallStatus.SUCCEEDED, output="Receipt for C-3 sent.")
        second = await contract.run_model_step()
        assert isinstance(second, ToolCallsRequested), second
        assert [call.tool_call_id for call in second.tool_calls] == ["call-4"], second.tool_calls
        session.defer(second)
        session.abandon("call-4", CancellationReason.TURN_CANCELLED)
        abandoned = session.records["call-4"]
        runs = len(contract.tool_runs())

        await session.end_turn_early(runner)

        assert len(contract.model_calls()) == 2, "building the unstored items made a model call"
        assert len(contract.tool_runs()) == runs == 1, "only the inline read ran, in the first model call"
        assert stored_calls_without_result(session.messages) == [], session.messages
        results = {m.tool_call_id: m.tool_output for m in session.messages if m.role is MessageRole.TOOL}
        assert results == {
            "call-1": "Order A-1 has shipped.",
            "call-3": "Receipt for C-3 sent.",
            "call-4": describe_tool_call_outcome(abandoned),
        }, session.messages
        contract.start_turn("Stop, do nothing more")
        answer = await contract.run_model_step()
        assert isinstance(answer, TurnCompleted), answer
        seen = contract.model_calls()[-1].model_input_text
        for text in (*results.values(), "Stop, do nothing more"):
            assert text in seen, (text, seen)
        assert "Tool result missing" not in seen, seen
