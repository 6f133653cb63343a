"""Flows that write Streams from Steps."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

from typing import Any

from dex import AsyncContext, Flow, PersistenceSchema, Step, StepDecision, StepList, Stream, graceful_complete

from .common import gate, note, start_with

progress = Stream("progress", str, 1024 * 1024)
# Small enough that thirty short messages cannot all be retained.
TINY_CAPACITY = 64
tiny = Stream("tiny", str, TINY_CAPACITY)


class Writer(Step[int]):
    """Writes ``input`` messages, parks on a gate, then writes two more."""

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        for index in range(input):
            progress.write(context, f"s{index}")
        # A heartbeat is queued behind the writes, so once it is sent the writes were sent too.
        await context.heartbeat()
        note(context, "first_batch")
        await gate(context, "more")
        for index in range(input, input + 2):
            progress.write(context, f"s{index}")
        note(context, "second_batch")
        return graceful_complete("written")


class Spammer(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        for index in range(input):
            tiny.write(context, f"t{index:02d}")
        return graceful_complete("spammed")


class StreamFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return start_with(Writer())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(progress)


class TinyStreamFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return start_with(Spammer())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(tiny)


STREAMS = StreamFlow()
TINY_STREAM = TinyStreamFlow()
FLOWS: tuple[Flow[Any], ...] = (STREAMS, TINY_STREAM)
