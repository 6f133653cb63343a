"""Flows with synchronous handlers, run by the SDK's sync ``Worker`` (generators for progress)."""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from dex import (
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    StepOutput,
    Stream,
    Wait,
    dead_end,
    graceful_complete,
    heartbeat,
    rpc,
)

from .common import fast_retry, move, note, start_with

sync_progress = Stream("sync_progress", str, 64 * 1024)
mailbox = Channel("mailbox", str)


class SyncWait(Step[str]):
    """Generator handlers: Stream writes and a heartbeat checkpoint handed to the next attempt."""

    def wait_for(self, context: Context, input: str) -> Generator[StepOutput, None, Wait]:
        yield sync_progress.write(context, "waiting")
        return Wait.until(mailbox.for_one())

    def execute(self, context: Context, input: str) -> Generator[StepOutput, None, StepDecision]:
        yield heartbeat({"attempt": context.attempt})
        yield sync_progress.write(context, f"attempt {context.attempt}")
        if context.attempt == 1:
            raise RuntimeError("first attempt fails after its checkpoint")
        checkpoint = context.get_last_heartbeat_value(dict[str, int]) or {}
        (message,) = mailbox.results(context)
        return graceful_complete(f"{input}:{message}:{checkpoint.get('attempt')}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(3))


class SyncBlocking(Step[None]):
    """A blocking sync handler; it can only notice cancellation by polling for it."""

    def execute(self, context: Context, input: None) -> StepDecision:
        note(context, "blocking")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if context.is_cancellation_requested():
                note(context, "sync_cancelled")
                return dead_end()
            time.sleep(0.02)
        note(context, "blocking_timed_out")
        return dead_end()


class SyncFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(SyncWait()).other_steps(SyncBlocking())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(sync_progress, mailbox)

    @rpc
    def send(self, context: Context, input: str) -> RPCResult[bool]:
        mailbox.publish(context, input)
        return RPCResult(True)

    @rpc
    def block(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(SyncBlocking, None),))

    @rpc
    def interrupt(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True).with_canceling_steps(SyncBlocking)


SYNC = SyncFlow()
FLOWS: tuple[Flow[Any], ...] = (SYNC,)
