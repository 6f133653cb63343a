"""Flows for retries, failure routes, heartbeat timeouts, and Steps no Worker can run."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

from dex import (
    AsyncContext,
    Context,
    Flow,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Stream,
    Wait,
    WaitForFailurePolicy,
    dead_end,
    go_to_many,
    graceful_complete,
    retry_after,
    rpc,
)

from .common import RESCUE_OPTIONS, Rescue, fast_retry, gate, move, note, start_with


class Flaky(Step[str]):
    """Fails its first two attempts; the third succeeds."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "attempt", first_attempt_at=context.first_attempt_at.isoformat())
        if context.attempt < 3:
            raise RuntimeError(f"flaky attempt {context.attempt}")
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(3))


class FlakyFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Flaky())


class Backoff(Step[str]):
    """Fails twice under a doubling backoff: the second delay must be about twice the first."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "attempt", at=time.time())
        if context.attempt < 3:
            raise RuntimeError(f"backoff attempt {context.attempt}")
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=3
        )
        return StepOptions(execute_retry=retry)


class BackoffFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Backoff())


class Doomed(Step[str]):
    """Always fails; after two attempts its failure route takes over."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "attempt")
        raise RuntimeError(f"doomed: {input}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(2)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class DoomedFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Doomed()).other_steps(Rescue())


class Hopeless(Step[str]):
    """Always fails and has no failure route, so the Flow fails."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "attempt")
        raise RuntimeError(f"hopeless: {input}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(2))


class HopelessFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Hopeless())


# The server's documented minimum for an explicit heartbeat timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)


class Beating(Step[str]):
    """Attempt 1 checkpoints once, then goes silent; attempt 2 must see that checkpoint."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        if context.attempt == 1:
            await context.heartbeat({"progress": 1})
            note(context, "beat")
            try:
                await gate(context, "never")
            except asyncio.CancelledError:
                note(context, "cancelled")
                raise
            return graceful_complete("attempt 1 was never released")
        has_checkpoint = context.has_last_heartbeat_value()
        checkpoint = context.get_last_heartbeat_value(dict[str, int]) if has_checkpoint else None
        note(context, "resumed", has_checkpoint=has_checkpoint, checkpoint=checkpoint)
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(heartbeat_timeout=HEARTBEAT_TIMEOUT, execute_retry=fast_retry(3))


class Orphan(Step[str]):
    """Single attempt; when no Worker takes it, the failure route runs instead."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "orphan_ran")
        return graceful_complete("orphan ran")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class NoWorkerFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Orphan()).other_steps(Rescue())


class Ghost(Step[str]):
    """Registered only on the Client side: the Worker has never heard of this Step type."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "ghost_ran")
        return graceful_complete("ghost ran")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class GhostFlow(Flow[str]):
    def __init__(self, *, knows_ghost: bool) -> None:
        self.knows_ghost = knows_ghost

    def get_steps(self) -> StepList[str]:
        if self.knows_ghost:
            return start_with(Ghost()).other_steps(Rescue())
        return StepList[str].without_start_step(Rescue())


class Lingering(Step[str]):
    """Parks in ``execute`` after a heartbeat, so a test can SIGKILL the Worker mid-attempt."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        # The heartbeat makes the attempt visibly in flight (output already sent) before the kill.
        await context.heartbeat({"attempt": context.attempt})
        note(context, "lingering")
        await gate(context, f"release-{context.attempt}")
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        # Unlimited, like Rescue: while the replacement Worker starts, each one-second retry can fail
        # with no Worker, and a slow start must not use up a fixed budget before the gate can open.
        return StepOptions(execute_retry=fast_retry())


class KillRetryFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Lingering())


class OneShot(Step[str]):
    """Single attempt with a failure route: a killed attempt must never run again."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        await context.heartbeat({"attempt": context.attempt})
        note(context, "one_shot")
        await gate(context, "never")
        return graceful_complete("one shot finished")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class KillRouteFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(OneShot()).other_steps(Rescue())


class SilentShot(Step[str]):
    """Like OneShot but sends no output at all before the kill: the attempt is still used up."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        note(context, "silent_shot")
        await gate(context, "never")
        return graceful_complete("silent shot finished")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class SilentKillFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(SilentShot()).other_steps(Rescue())


class Patient(Step[str]):
    """Attempt 1 asks for a two-second delay, twice the one-second retry policy."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "attempt", at=time.time())
        if context.attempt == 1:
            raise retry_after(2, RuntimeError("not ready yet"))
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(3))


class PatientFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Patient())


class Slowpoke(Step[str]):
    """Attempt 1 outlives its method timeout; attempt 2 returns at once."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        note(context, "attempt")
        if context.attempt == 1:
            try:
                await gate(context, "never")
            except asyncio.CancelledError:
                note(context, "cancelled")
                raise
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        # The timeout also bounds attempt 2, which must finish as "@2": three seconds leave it room on a
        # loaded machine, and attempt 1 still times out because its gate never opens.
        return StepOptions(execute_method_timeout=timedelta(seconds=3), execute_retry=fast_retry(3))


class MethodTimeoutFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Slowpoke())


class Hesitant(Step[str]):
    """``wait_for`` always fails; with PROCEED, ``execute`` still runs and is told so."""

    def wait_for(self, context: Context, input: str) -> Wait:
        raise RuntimeError(f"wait_for refused {input}")

    def execute(self, context: Context, input: str) -> StepDecision:
        error = context.recovery_error
        note(
            context,
            "proceeded",
            wait_failed=context.wait_for_method_failed(),
            detail=None if error is None else error.detail,
        )
        return graceful_complete(input)

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(wait_for_retry=fast_retry(1), wait_for_failure=WaitForFailurePolicy.PROCEED)


class ProceedFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Hesitant())


chatter = Stream("chatter", str, 64 * 1024)


class Chatty(Step[str]):
    """Never heartbeats explicitly but writes a Stream frame every second for longer than the timeout."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        note(context, "attempt")
        # Outlives the timeout by enough that a timeout would have fired first.
        deadline = time.monotonic() + HEARTBEAT_TIMEOUT.total_seconds() + 1.5
        index = 0
        while time.monotonic() < deadline:
            chatter.write(context, f"c{index}")
            index += 1
            await asyncio.sleep(1)
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(heartbeat_timeout=HEARTBEAT_TIMEOUT, execute_retry=fast_retry(3))


class Pulse(Step[None]):
    """Runs the silent Step and the chatty Step side by side, so one heartbeat timeout covers both."""

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(move(Beating, "beats"), move(Chatty, "chatty"))


class HeartbeatFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(Pulse()).other_steps(Beating(), Chatty())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(chatter)


class Blocker(Step[None]):
    """Holds a task slot until the test lets it go."""

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        note(context, "blocker_started")
        await gate(context, "free")
        return dead_end()


class Quick(Step[str]):
    """Single attempt: if a declined dispatch used it up, the failure route would run instead."""

    def execute(self, context: Context, input: str) -> StepDecision:
        note(context, "quick_ran")
        return graceful_complete(f"{input}@{context.attempt}")

    def get_step_options(self) -> StepOptions | None:
        return StepOptions(execute_retry=fast_retry(1)).on_execute_failure_proceed_to(Rescue, RESCUE_OPTIONS)


class CapacityFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return start_with(Blocker()).other_steps(Quick(), Rescue())

    @rpc
    def schedule_quick(self, context: Context, input: str) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(move(Quick, input),))


FLAKY = FlakyFlow()
DOOMED = DoomedFlow()
HOPELESS = HopelessFlow()
HEARTBEAT = HeartbeatFlow()
NO_WORKER = NoWorkerFlow()
GHOST = GhostFlow(knows_ghost=True)
KILL_RETRY = KillRetryFlow()
KILL_ROUTE = KillRouteFlow()
BACKOFF = BackoffFlow()
SILENT_KILL = SilentKillFlow()
CAPACITY = CapacityFlow()
PATIENT = PatientFlow()
METHOD_TIMEOUT = MethodTimeoutFlow()
PROCEED = ProceedFlow()


def flows(role: str) -> tuple[Flow[Any], ...]:
    """The Worker child (any role but ``client``) gets a GhostFlow without the Ghost Step."""
    ghost = GHOST if role == "client" else GhostFlow(knows_ghost=False)
    return (
        FLAKY,
        DOOMED,
        HOPELESS,
        HEARTBEAT,
        NO_WORKER,
        ghost,
        KILL_RETRY,
        KILL_ROUTE,
        PATIENT,
        METHOD_TIMEOUT,
        PROCEED,
        BACKOFF,
        SILENT_KILL,
        CAPACITY,
    )
