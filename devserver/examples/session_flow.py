"""A small session Flow: a start Step, a loop that waits for messages or a Timer, an RPC, and a Stream.

It uses what the core package's session Flow relies on: async Steps on a pull-mode AsyncWorker, Attributes
and AttributeMaps loaded per movement, a Channel condition raced against a Timer, per-movement StepOptions,
a locked transactional RPC, and a Stream written from Steps.
"""

from __future__ import annotations

from datetime import timedelta

import dex

turns = dex.Attribute("turns", int)
transcript = dex.AttributeMap("transcript", str)
inbox = dex.Channel("inbox", str)
events = dex.Stream("events", str, 64 * 1024)


def _turn_options(key: str) -> dex.StepOptions:
    return dex.StepOptions(
        execute_load_attribute_map_instances=(transcript.load(key),),
        execute_retry=dex.RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
        execute_durability=dex.StepDurability.SYNC,
        heartbeat_timeout=timedelta(seconds=30),
    )


class Greet(dex.Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        turns.set(context, 0)
        transcript.set(context, "t0", f"hello {input}")
        events.write(context, f"session started for {input}")
        return dex.go_to_many(dex.StepMovement.of(AwaitMessage, "t0", options=_turn_options("t0")))


class AwaitMessage(dex.Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> dex.Wait:
        return dex.Wait.any_of(dex.Timer.by_duration(timedelta(seconds=60)), inbox.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        messages = inbox.results(context)
        count = turns.get(context) + 1
        turns.set(context, count)
        if not messages or messages[0] == "bye":
            events.write(context, f"session closed after {count} turns")
            return dex.graceful_complete(f"{transcript.get(context, input)} | bye")
        key = f"t{count}"
        transcript.set(context, key, f"{transcript.get(context, input)} | {messages[0]}")
        events.write(context, f"turn {count}: {messages[0]}")
        return dex.go_to_many(dex.StepMovement.of(AwaitMessage, key, options=_turn_options(key)))


class SessionFlow(dex.Flow[str]):
    greet = Greet()
    await_message = AwaitMessage()

    def get_flow_type(self) -> str:
        return "DemoSession"

    def get_steps(self) -> dex.StepList[str]:
        return dex.StepList.start_step(self.greet).other_steps(self.await_message)

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        return dex.PersistenceSchema.of(turns, transcript, inbox, events)

    @dex.rpc(lock_attributes=(turns.lock(),), is_transactional=True)
    def send(self, context: dex.Context, input: str) -> dex.RPCResult[int]:
        inbox.publish(context, input)
        return dex.RPCResult(turns.get(context))


session_flow = SessionFlow()


def registry() -> dex.Registry:
    """Returns the Registry holding the session Flow."""
    return dex.Registry((session_flow,), allow_async_handlers=True)
