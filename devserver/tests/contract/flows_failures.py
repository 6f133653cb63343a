"""Flows for retries, failure routes, heartbeat timeouts, and Steps no Worker can run."""

# The SDK declares Step handlers as sync methods; AsyncWorker accepts coroutine overrides.
# pyright: reportIncompatibleMethodOverride=false

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from dex import (
    AsyncContext,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    graceful_complete,
)

from .common import RESCUE_OPTIONS, Rescue, fast_retry, gate, note, start_with


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


class HeartbeatFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return start_with(Beating())


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
        return StepOptions(execute_retry=fast_retry(5))


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


FLAKY = FlakyFlow()
DOOMED = DoomedFlow()
HOPELESS = HopelessFlow()
HEARTBEAT = HeartbeatFlow()
NO_WORKER = NoWorkerFlow()
GHOST = GhostFlow(knows_ghost=True)
KILL_RETRY = KillRetryFlow()
KILL_ROUTE = KillRouteFlow()


def flows(role: str) -> tuple[Flow[Any], ...]:
    """The Worker child (any role but ``client``) gets a GhostFlow without the Ghost Step."""
    ghost = GHOST if role == "client" else GhostFlow(knows_ghost=False)
    return (FLAKY, DOOMED, HOPELESS, HEARTBEAT, NO_WORKER, ghost, KILL_RETRY, KILL_ROUTE)
