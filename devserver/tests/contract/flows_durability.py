"""Flows that a test crashes the devserver under, then checks what survived."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dex import (
    AsyncContext,
    Attribute,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepOptions,
    Timer,
    Wait,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)

from .common import gate, move, note, start_with

inbox = Channel("inbox", str)
remark = Attribute("remark", str)
# Long enough to outlast a devserver restart, so the test can read the deadline on both sides of it.
SNOOZE = timedelta(seconds=6)


class Collect(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(inbox.for_n(2))

    def execute(self, context: Context, input: None) -> StepDecision:
        values = list(inbox.results(context))
        note(context, "collected", values=values)
        return go_to(Snooze, ",".join(values))


class Snooze(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        note(context, "snooze_waiting")
        return Wait.until(Timer.by_duration(SNOOZE, condition_id="snooze"))

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "snoozed", fired=context.has_timer_fired())
        return graceful_complete(f"{input}|{remark.get(context)}")


class CrashFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(Collect()).other_steps(Snooze())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(inbox, remark)

    @rpc
    def put(self, context: Context, input: str) -> RPCResult[bool]:
        remark.set(context, input)
        inbox.publish(context, input)
        return RPCResult(True)

    @rpc(load_channels=(inbox,))
    def pending(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([message.value for message in inbox.pending_messages(context)])


def durability_options(durability: str) -> StepOptions:
    return StepOptions(execute_durability=StepDurability[durability])


class Kick(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to_with(Effect, input)


class Effect(Step[str]):
    """The method whose result ASYNC may lose and SYNC must keep across a crash."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "effect")
        return go_to_with(Parked, input)


class Parked(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        note(context, "parked")
        await gate(context, "release")
        return graceful_complete(input)


def go_to_with(step: type[Step[str]], durability: str) -> StepDecision:
    """Per-movement options carry the durability under test (they replace the Step's own options)."""
    return go_to_many(move(step, durability, options=durability_options(durability)))


class DurabilityFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Kick()).other_steps(Effect(), Parked())


CRASH = CrashFlow()
DURABILITY = DurabilityFlow()
FLOWS: tuple[Flow[Any], ...] = (CRASH, DURABILITY)
