"""A Flow that leaves one of each interesting history event behind."""

from __future__ import annotations

from typing import Any

from dex import (
    Attribute,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)

from .common import RESCUE_OPTIONS, fast_retry, note, start_with

finish = Channel("finish", str)
poked = Attribute("poked", str)


class Shaky(Step[str]):
    """Has a ``wait_for`` and fails its first ``execute`` attempt, so final_attempt is 2."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.skip_immediately()

    def execute(self, context: Context, input: str) -> StepDecision:
        if context.attempt == 1:
            raise RuntimeError("shaky first attempt")
        context.record_event("shaky-note", f"recorded by {context.step_execution_id}")
        return go_to(Fragile, input)

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(3))


class Fragile(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        raise RuntimeError("fragile always fails")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Recover, RESCUE_OPTIONS)


class Recover(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        note(context, "recover_waiting")
        return Wait.until(finish.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"history {input}")


class HistoryFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Shaky()).other_steps(Fragile(), Recover())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(finish, poked)

    @rpc
    def poke(self, context: Context, input: str) -> RPCResult[str]:
        poked.set(context, input)
        return RPCResult(f"poked {input}")

    @rpc
    def finish(self, context: Context) -> RPCResult[bool]:
        finish.publish(context, "done")
        return RPCResult(True)


HISTORY = HistoryFlow()
FLOWS: tuple[Flow[Any], ...] = (HISTORY,)
