"""Flows for Attributes, AttributeMap loading, locks, transactional and next-step RPCs."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from dex import (
    AsyncContext,
    Attribute,
    AttributeMap,
    AttributeMapNotLoadedError,
    Channel,
    ChannelMap,
    ChannelMessagesNotLoadedError,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Wait,
    dead_end,
    force_complete,
    graceful_complete,
    rpc,
)

from .common import gate, move, note, start_with

balance = Attribute("balance", int)
marker = Attribute("marker", str)
notes = AttributeMap("notes", str)
inbox = Channel("inbox", str)
side = Channel("side", str)
mail = ChannelMap("mail", str)
shutdown = Channel("shutdown", str)


@dataclass(frozen=True)
class Snapshot:
    marker: str | None
    balance: int
    inbox_size: int
    side_size: int


class Idle(Step[None]):
    """Keeps the Flow RUNNING (and RPC-driven) until a ``shutdown`` message arrives."""

    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(shutdown.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        return dead_end()


class Reader(Step[str]):
    """Reads the one notes instance its movement loaded, then one it did not load."""

    def execute(self, context: Context, input: str) -> StepDecision:
        loaded = notes.get(context, input)
        try:
            notes.get(context, "b")
            unloaded = "readable"
        except AttributeMapNotLoadedError:
            unloaded = "AttributeMapNotLoadedError"
        note(context, "read", loaded=loaded, unloaded=unloaded)
        return dead_end()


class MailReader(Step[str]):
    """Reads the pending messages of the one ChannelMap instance its movement loaded."""

    def execute(self, context: Context, input: str) -> StepDecision:
        loaded = [message.value for message in mail.pending_messages(context, input)]
        try:
            mail.pending_messages(context, "other")
            unloaded = "readable"
        except ChannelMessagesNotLoadedError:
            unloaded = "ChannelMessagesNotLoadedError"
        note(context, "read_mail", loaded=loaded, unloaded=unloaded)
        return dead_end()


class ReaderAll(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        keys = notes.get_all_instance_keys(context)
        note(context, "read_all", keys=list(keys), values=[notes.get(context, key) for key in keys])
        return dead_end()


class Holder(Step[None]):
    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        note(context, "holder_start", balance=balance.get(context))
        await gate(context, "release")
        balance.set(context, balance.get(context) + 10)
        note(context, "holder_end")
        return dead_end()

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_lock_attributes=(balance.lock(),))


class MapHolder(Step[None]):
    """Holds the lock of one AttributeMap instance, ``notes/a``, until the test lets it go."""

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        note(context, "map_holder_start")
        await gate(context, "release-map")
        return dead_end()

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_lock_attributes=(notes.lock("a"),))


class LockWaiter(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        # Reads the balance Holder wrote: the snapshot is taken after the lock is acquired.
        note(context, "waiter_start", balance=balance.get(context))
        balance.set(context, balance.get(context) + 1)
        return dead_end()

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_lock_attributes=(balance.lock(),))


class Echo(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "echo", value=input, origin=context.from_step_execution_id)
        return force_complete(input)


class Long(Step[None]):
    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        note(context, "long_started")
        try:
            await gate(context, "never")
        except asyncio.CancelledError:
            note(context, "long_cancelled")
            raise
        note(context, "long_finished")
        return graceful_complete("long")


class StateFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(Idle()).other_steps(
            Reader(), ReaderAll(), MailReader(), Holder(), MapHolder(), LockWaiter(), Echo(), Long()
        )

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(balance, marker, notes, inbox, side, shutdown, mail)

    @rpc
    def add_notes(self, context: Context, input: dict[str, str]) -> RPCResult[bool]:
        for key, value in input.items():
            notes.set(context, key, value)
        return RPCResult(True)

    @rpc
    def read_one(self, context: Context, input: str) -> RPCResult[bool]:
        options = StepOptions(execute_load_attribute_map_instances=(notes.load(input),))
        return RPCResult(True, next_steps=(move(Reader, input, options=options),))

    @rpc
    def send_mail(self, context: Context, input: dict[str, str]) -> RPCResult[bool]:
        for instance, value in input.items():
            mail.publish(context, instance, value)
        return RPCResult(True)

    @rpc
    def read_mail(self, context: Context, input: str) -> RPCResult[bool]:
        options = StepOptions(execute_load_channel_map_instances=(mail.load_messages(input),))
        return RPCResult(True, next_steps=(move(MailReader, input, options),))

    @rpc
    def read_all(self, context: Context) -> RPCResult[bool]:
        options = StepOptions(execute_load_attribute_maps=(notes,))
        return RPCResult(True, next_steps=(move(ReaderAll, None, options=options),))

    @rpc
    def start_holder(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(Holder, None),))

    @rpc
    def start_map_holder(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(MapHolder, None),))

    @rpc
    def write_note(self, context: Context, input: dict[str, str]) -> RPCResult[bool]:
        """Locks and loads nothing itself: the caller chooses the instance with RPCInvokeOptions."""
        for key, value in input.items():
            notes.set(context, key, value)
        return RPCResult(True)

    @rpc
    def start_waiter(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(LockWaiter, None),))

    @rpc(lock_attributes=(balance.lock(),))
    def bump(self, context: Context, input: int) -> RPCResult[int]:
        balance.set(context, balance.get(context) + input)
        return RPCResult(balance.get(context))

    @rpc
    def push(self, context: Context, input: list[str]) -> RPCResult[bool]:
        for value in input:
            inbox.publish(context, value)
        return RPCResult(True)

    @rpc(load_channels=(inbox,))
    def pending_ids(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([message.message_id for message in inbox.pending_messages(context)])

    @rpc(load_channels=(inbox,))
    def pending_values(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([message.value for message in inbox.pending_messages(context)])

    @rpc(is_transactional=True)
    def write_and_delete(self, context: Context, input: str) -> RPCResult[bool]:
        marker.set(context, "written")
        side.publish(context, "side effect")
        inbox.delete(context, input)
        return RPCResult(True)

    @rpc
    def snapshot(self, context: Context) -> RPCResult[Snapshot]:
        return RPCResult(
            Snapshot(marker.get(context), balance.get(context), inbox.size(context), side.size(context))
        )

    @rpc
    def set_marker(self, context: Context, input: str) -> RPCResult[bool]:
        marker.set(context, input)
        return RPCResult(True)

    @rpc
    def explode(self, context: Context, input: str) -> RPCResult[bool]:
        marker.set(context, "must not be applied")
        raise RuntimeError(input)

    @rpc
    def read_marker(self, context: Context) -> RPCResult[str]:
        return RPCResult(marker.get(context) or "")

    @rpc
    def schedule_echo(self, context: Context, input: str) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(Echo, input),))

    @rpc
    def schedule_long(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(Long, None),))

    @rpc
    def restart_long(self, context: Context) -> RPCResult[bool]:
        # Cancellation is resolved before next_steps are queued, so the new Long survives it.
        return RPCResult(True, next_steps=(move(Long, None),)).with_canceling_steps(Long)

    @rpc
    def interrupt(self, context: Context, input: str) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(Echo, input),)).with_canceling_steps(Long)


STATE = StateFlow()
FLOWS: tuple[Flow[Any], ...] = (STATE,)
