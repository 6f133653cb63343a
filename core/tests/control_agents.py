"""The Flows of the steering and cancellation tests, as both the test and its Worker build them.

``ControlTestFlow`` adds two RPCs a real session does not have, each standing in for a writer this
release does not ship: one queues a ``plan_mode`` message (as a release with plan mode does), one rewrites
``AgentState`` as a Worker without steering does, dropping ``accepts_turn_control`` and
``active_turn_release``.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from dex import Context, RPCResult, rpc

from dex_agents import (
    AGENT_STATE,
    QUEUED_USER_MESSAGES,
    AgentFrameworkRunner,
    AgentSessionFlow,
    AgentState,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUserMessage,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
)
from dex_agents.testing import ScriptedRunner, matrix_session_options


class ControlTestFlow(AgentSessionFlow):
    @rpc(is_transactional=True)
    def queue_plan_mode_message(self, context: Context, message: AgentUserMessage) -> RPCResult[bool]:
        QUEUED_USER_MESSAGES.publish(context, AgentUserMessage(text=message.text, plan_mode=True))
        return RPCResult(True)

    @rpc(is_transactional=True)
    def write_state_as_earlier_worker(self, context: Context) -> RPCResult[bool]:
        state = cast(AgentState | None, AGENT_STATE.get(context))
        if state is None:
            return RPCResult(False)
        AGENT_STATE.set(context, replace(state, accepts_turn_control=False, active_turn_release=None))
        return RPCResult(True)


class NoteOnlyRunner:
    """The scripted runner without ``build_unfinished_turn_messages``: an ended turn keeps only a note."""

    def __init__(self, runner: AgentFrameworkRunner) -> None:
        self._runner = runner

    def build_user_message(self, text: str) -> FrameworkMessage:
        return self._runner.build_user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        return await self._runner.run_model_step(turn)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return await self._runner.execute_deferred_tool_call(call)


class BrokenBuilderRunner(ScriptedRunner):
    """A runner whose ``build_unfinished_turn_messages`` raises: the session must still end the turn."""

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> list[FrameworkMessage]:
        raise RuntimeError("the run state cannot be read")


@dataclass(frozen=True)
class ControlFlows:
    """items in run state with a builder; incremental storage; no builder; a builder that raises."""

    main: ControlTestFlow
    incremental: ControlTestFlow
    notes: ControlTestFlow
    broken_builder: ControlTestFlow

    @property
    def all(self) -> Sequence[AgentSessionFlow]:
        return (self.main, self.incremental, self.notes, self.broken_builder)


def build_control_flows() -> ControlFlows:
    options = matrix_session_options()
    return ControlFlows(
        main=ControlTestFlow(ScriptedRunner(), flow_type="CoreControl", options=options),
        incremental=ControlTestFlow(
            ScriptedRunner(stores_incrementally=True), flow_type="CoreControlIncremental", options=options
        ),
        notes=ControlTestFlow(
            NoteOnlyRunner(ScriptedRunner()), flow_type="CoreControlNotes", options=options
        ),
        broken_builder=ControlTestFlow(
            BrokenBuilderRunner(), flow_type="CoreControlBrokenBuilder", options=options
        ),
    )
