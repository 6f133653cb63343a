"""Flows for blob offload of large values and the value-size limit."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

import hashlib
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
    Stream,
    Wait,
    dead_end,
    force_complete,
    rpc,
)

from .common import RESCUE_OPTIONS, Rescue, fast_retry, move, note, start_with

big = Attribute("big", str)
small = Attribute("small", str)
shutdown = Channel("shutdown", str)
bulletin = Stream("bulletin", str, 16 * 1024 * 1024)


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Hold(Step[str]):
    """Keeps the Flow RUNNING so RPCs can drive it."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(shutdown.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return dead_end()


class BigReader(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        value = big.get(context) or ""
        note(context, "read_big", length=len(value), digest=digest(value), small=small.get(context))
        return dead_end()


class Grower(Step[str]):
    """Writes an Attribute of ``input`` bytes (a str, because the failure route's Rescue decodes it)."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "grow_attempt")
        big.set(context, "g" * int(input))
        return dead_end()

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class Flooder(Step[str]):
    """Writes a Stream message of ``input`` bytes, then one small one."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "flood_attempt")
        bulletin.write(context, "f" * int(input))
        bulletin.write(context, "after")
        return dead_end()

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class BigEcho(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "echo_input", length=len(input), digest=digest(input))
        return force_complete(input)


class BlobFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Hold()).other_steps(BigReader(), Grower(), Flooder(), Rescue(), BigEcho())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(big, small, shutdown, bulletin)

    @rpc
    def set_values(self, context: Context, input: dict[str, str]) -> RPCResult[bool]:
        big.set(context, input["big"])
        small.set(context, input["small"])
        return RPCResult(True)

    @rpc
    def get_big(self, context: Context) -> RPCResult[str]:
        return RPCResult(big.get(context) or "")

    @rpc
    def read_in_step(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(BigReader, None),))

    @rpc
    def echo(self, context: Context, input: str) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(BigEcho, input),))

    @rpc
    def grow(self, context: Context, input: int) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(Grower, str(input)),))

    @rpc
    def flood(self, context: Context, input: int) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(Flooder, str(input)),))


BLOBS = BlobFlow()
FLOWS: tuple[Flow[Any], ...] = (BLOBS,)
