"""Flows for start, Step IDs, movements, completion, cancellation and stop behaviours."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

import asyncio
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
    StepList,
    Wait,
    dead_end,
    force_complete,
    force_complete_if_channels_empty,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)

from .common import gate, move, note, start_with

release = Channel("release", str)


class Park(Step[str]):
    """Waits for one ``release`` message, so the Flow stays RUNNING until the test lets it go."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(release.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"{input}:{','.join(release.results(context))}")


class ParkedFlow(Flow[str]):
    park = Park()

    def get_steps(self) -> StepList[str]:
        return start_with(self.park)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(release)

    @rpc
    def release(self, context: Context, input: str) -> RPCResult[bool]:
        release.publish(context, input)
        return RPCResult(True)


class HandledTimeoutFlow(Flow[str]):
    """Parks like ParkedFlow but overrides ``handle_timeout``, so a positive timeout uses HANDLER."""

    park = Park()

    def get_steps(self) -> StepList[str]:
        return start_with(self.park)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(release)

    def handle_timeout(self, context: Context) -> StepDecision:
        return force_complete("handled timeout")


class Hop(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        note(context, "hop", origin=context.from_step_execution_id, n=input)
        if input > 0:
            return go_to(Hop, input - 1)
        return go_to_many(move(Leaf, "a"), move(Leaf, "b"))


class Leaf(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "leaf", origin=context.from_step_execution_id, value=input)
        return graceful_complete(f"{input}@{context.step_execution_id}")


class ChainFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return start_with(Hop()).other_steps(Leaf())


class Spread(Step[int]):
    """Fans out to ``input`` parallel Twigs in one decision."""

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(*(move(Twig, index) for index in range(input)))


class Twig(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return graceful_complete(input)


class WideFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return start_with(Spread()).other_steps(Twig())


stage = Attribute("stage", str)


class Prepare(Step[str]):
    """``wait_for`` hands a local and an Attribute write to ``execute`` of the same execution."""

    def wait_for(self, context: Context, input: str) -> Wait:
        note(context, "wait_for")
        context.set_step_execution_local("token", input.upper())
        stage.set(context, "waited")
        return Wait.skip_immediately()

    def execute(self, context: Context, input: str) -> StepDecision:
        token = context.get_step_execution_local("token", str)
        note(context, "execute", token=token, stage=stage.get(context))
        return force_complete(f"{token}/{stage.get(context)}")


class WaitThenExecuteFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Prepare())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(stage)


class Fan(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(
            move(QuickDone, "first"),
            move(SlowDone, "second"),
            move(DeadBranch, None),
        )


class QuickDone(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "quick_done")
        return graceful_complete(input)


class DeadBranch(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        note(context, "dead_end")
        return dead_end()


class SlowDone(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        note(context, "slow_started")
        await gate(context, "finish")
        return graceful_complete(input)


class GracefulFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(Fan()).other_steps(QuickDone(), SlowDone(), DeadBranch())


class ForkForce(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(move(Forcer, "forced"), move(Sleeper, None), move(QuickDone, "early"))


class Forcer(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        note(context, "forcer_started")
        await gate(context, "force")
        return force_complete(input)


class Sleeper(Step[None]):
    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        note(context, "sleeper_started")
        try:
            await gate(context, "never")
        except asyncio.CancelledError:
            note(context, "sleeper_cancelled")
            raise
        note(context, "sleeper_finished")
        return graceful_complete("sleeper")


class ForceFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(ForkForce()).other_steps(Forcer(), Sleeper(), QuickDone())


class Boom(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return force_fail(input)


class FailFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Boom())


go = Channel("go", str)


class Sib(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        note(context, "sib_waiting", origin=context.from_step_execution_id, tag=input)
        return Wait.until(go.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "sib_executed", tag=input)
        return graceful_complete(input)


class SplitRoot(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(move(BranchA, None), move(BranchB, None))


class BranchA(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(move(Sib, "A"), move(SibKiller, None))


class BranchB(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Sib, "B")


class SibKiller(Step[None]):
    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        await gate(context, "kill")
        return dead_end().with_canceling_sibling_steps(Sib)


class SiblingCancelFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(SplitRoot()).other_steps(BranchA(), BranchB(), Sib(), SibKiller())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(go)

    @rpc
    def go(self, context: Context, input: int) -> RPCResult[bool]:
        for index in range(input):
            go.publish(context, f"go-{index}")
        return RPCResult(True)


class Crowd(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(move(Sib, "x"), move(Sib, "y"), move(TypeKiller, None))


class TypeKiller(Step[None]):
    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        await gate(context, "kill")
        # The new Sib created by this same decision is outside the cancellation snapshot.
        return go_to(Sib, "z").with_canceling_steps(Sib)


class TypeCancelFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(Crowd()).other_steps(Sib(), TypeKiller())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(go)

    @rpc
    def go(self, context: Context, input: int) -> RPCResult[bool]:
        for index in range(input):
            go.publish(context, f"go-{index}")
        return RPCResult(True)


pending = Channel("pending", str)


class Check(Step[str]):
    """Completes only if ``pending`` is empty; otherwise hands over to Fallback."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:
        await gate(context, "arm")
        return Wait.skip_immediately()

    def execute(self, context: Context, input: str) -> StepDecision:
        return force_complete_if_channels_empty("empty", move(Fallback, "fallback"), pending)


class Fallback(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(pending.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"{input}:{','.join(pending.results(context))}")


class ChannelsEmptyFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Check()).other_steps(Fallback())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(pending)

    @rpc
    def push(self, context: Context, input: str) -> RPCResult[bool]:
        pending.publish(context, input)
        return RPCResult(True)


PARKED = ParkedFlow()
CHAIN = ChainFlow()
WIDE = WideFlow()
WAIT_THEN_EXECUTE = WaitThenExecuteFlow()
GRACEFUL = GracefulFlow()
FORCE = ForceFlow()
FAIL = FailFlow()
SIBLING_CANCEL = SiblingCancelFlow()
TYPE_CANCEL = TypeCancelFlow()
CHANNELS_EMPTY = ChannelsEmptyFlow()
HANDLED_TIMEOUT = HandledTimeoutFlow()

FLOWS: tuple[Flow[Any], ...] = (
    PARKED,
    CHAIN,
    WIDE,
    WAIT_THEN_EXECUTE,
    GRACEFUL,
    FORCE,
    FAIL,
    SIBLING_CANCEL,
    TYPE_CANCEL,
    CHANNELS_EMPTY,
    HANDLED_TIMEOUT,
)
