"""Pieces every Flow module shares: event notes, gates, fast retry policies, and the Rescue Step."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import TypeVar

from dex import (
    AsyncContext,
    Context,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    graceful_complete,
)

from .sandbox import Sandbox

SECOND = timedelta(seconds=1)
T = TypeVar("T")


def fast_retry(maximum_attempts: int = 0) -> RetryPolicy:
    """One-second constant backoff: the smallest whole-second interval the wire allows."""
    return RetryPolicy(
        initial_interval=SECOND,
        backoff_coefficient=1.0,
        maximum_interval=SECOND,
        maximum_attempts=maximum_attempts,
    )


@functools.cache
def sandbox() -> Sandbox:
    """The Worker child's view of the shared directory (handlers run only in the child)."""
    return Sandbox.from_env()


def note(context: Context, kind: str, **data: object) -> None:
    """Append what a handler observed, tagged with the execution ID and attempt it ran as."""
    sandbox().record(context.flow_id, kind, context.step_execution_id, context.attempt, **data)


async def gate(context: Context, name: str) -> None:
    await sandbox().wait_gate(context.flow_id, name)


class Rescue(Step[str]):
    """Failure-route target: reports the recovery error it was handed and completes the Flow."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        error = context.recovery_error
        note(
            context,
            "rescued",
            input=input,
            origin=context.from_step_execution_id,
            detail=None if error is None else error.detail,
            error_type=None if error is None else error.error_type,
        )
        return graceful_complete(f"rescued {input}")

    def get_step_options(self) -> StepOptions | None:
        return RESCUE_OPTIONS


# Unlimited one-second retries: a Rescue that finds no Worker keeps trying until one appears.
RESCUE_OPTIONS = StepOptions(execute_retry=fast_retry())


def start_with(step: Step[T]) -> StepList[T]:
    """``StepList.start_step`` with its type parameter bound (the SDK's static method leaves it unknown)."""
    return StepList[T].start_step(step)


def move(step: type[Step[T]], input: T, options: StepOptions | None = None) -> StepMovement[T]:
    """``StepMovement.of`` with its type parameter bound, for the same reason."""
    return StepMovement[T].of(step, input, options=options)
