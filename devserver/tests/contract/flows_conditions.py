"""Flows for Channel, ChannelMap and Timer conditions and their combinations."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dex import (
    AsyncContext,
    Channel,
    ChannelMap,
    ConditionCombination,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)

from .common import gate, note, start_with

inbox = Channel("inbox", str)
boxes = ChannelMap("boxes", str)
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Batch:
    """Messages an RPC publishes in one atomic result; an empty ``instance`` means the static inbox."""

    values: list[str]
    instance: str = ""


def _condition_wait(spec: str) -> Wait:
    match spec:
        case "for_one":
            return Wait.until(inbox.for_one())
        case "for_n":
            return Wait.until(inbox.for_n(2))
        case "at_least":
            return Wait.until(inbox.at_least(2))
        case "at_most":
            return Wait.until(inbox.at_most(2))
        case "for_range":
            return Wait.until(inbox.for_range(at_least=2, at_most=3))
        case "map_for_one":
            return Wait.until(boxes.for_one("y"))
        case "timer_skip":
            return Wait.until(Timer.by_duration(HOUR, condition_id="long"))
        case "any_of":
            return Wait.any_of(Timer.by_duration(HOUR, condition_id="long"), inbox.for_one())
        case "all_of":
            return Wait.all_of(Timer.by_duration(timedelta(seconds=1), condition_id="short"), inbox.for_one())
        case "timer_first":
            return Wait.any_of(Timer.by_duration(timedelta(0), condition_id="zero"), inbox.for_one())
        case "two_pass":
            return Wait.all_of(
                inbox.for_range(at_least=1, at_most=2, condition_id="a"),
                inbox.for_range(at_least=1, at_most=2, condition_id="b"),
            )
        case "any_combination":
            one = inbox.for_one(condition_id="one")
            return Wait.any_combination_of(
                ConditionCombination.of(one, boxes.for_one("y", condition_id="y")),
                ConditionCombination.of(inbox.for_n(2, condition_id="two")),
            )
        case _:
            raise RuntimeError(f"unknown condition spec {spec}")


class Consume(Step[str]):
    """Waits on the condition named by its input, then reports what it consumed and what is left."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:
        # The gate lets a test queue messages before the condition exists (needed for at_most).
        await gate(context, "arm")
        note(context, "waiting", spec=input)
        if input == "self_publish":
            # Applied before the wait is first evaluated, so this Step can satisfy its own condition.
            inbox.publish(context, "from wait_for")
            return Wait.until(inbox.for_one())
        return _condition_wait(input)

    def execute(self, context: Context, input: str) -> StepDecision:
        values = list(boxes.results(context, "y")) if input == "map_for_one" else list(inbox.results(context))
        note(
            context,
            "consumed",
            values=values,
            fired=context.has_timer_fired(),
            inbox_left=inbox.size(context),
            x_left=boxes.size(context, "x"),
            y_left=boxes.size(context, "y"),
        )
        return graceful_complete(",".join(values))


class ConditionFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Consume())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(inbox, boxes)

    @rpc
    def push(self, context: Context, input: Batch) -> RPCResult[bool]:
        for value in input.values:
            if input.instance:
                boxes.publish(context, input.instance, value)
            else:
                inbox.publish(context, value)
        return RPCResult(True)


class Drain(Step[int]):
    """Consumes one message per execution until ``stop``, so FIFO order shows across executions."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(inbox.for_one())

    def execute(self, context: Context, input: int) -> StepDecision:
        (value,) = inbox.results(context)
        note(context, "got", value=value)
        if value == "stop":
            return graceful_complete(input)
        return go_to(Drain, input + 1)


class FifoFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return start_with(Drain())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(inbox)

    @rpc
    def push(self, context: Context, input: Batch) -> RPCResult[bool]:
        for value in input.values:
            inbox.publish(context, value)
        return RPCResult(True)


CONDITIONS = ConditionFlow()
FIFO = FifoFlow()
FLOWS: tuple[Flow[Any], ...] = (CONDITIONS, FIFO)
