"""Errors the session raises to fail a Step attempt, and how it reads recovery errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "NO_WORKER_AVAILABLE_ERROR_TYPE",
    "RunnerCallError",
    "SessionStateError",
    "describe_exception",
    "plain_recovery_detail",
    "runner_errors",
]

#: The recovery error type of a Step attempt that no Worker accepted within the server's dispatch wait.
NO_WORKER_AVAILABLE_ERROR_TYPE = "NO_WORKER_AVAILABLE"

# AsyncWorker reports a TypeError or ValueError raised in a handler as
# "Flow <flow> Step <step> execute returned an invalid result: <message>"; only the message is useful.
_INVALID_RESULT_WRAPPER = re.compile(
    r"^Flow .+? Step .+? (?:execute|wait_for) returned an invalid result: ", re.DOTALL
)


class RunnerCallError(Exception):
    """A runner method raised; the attempt fails and its error names the original exception.

    The session re-raises runner exceptions as this type because AsyncWorker would otherwise report a
    runner's TypeError or ValueError as "returned an invalid result", which hides what went wrong.
    """


class SessionStateError(Exception):
    """The session's stored state contradicts itself; the attempt fails so an operator can look."""


@contextmanager
def runner_errors() -> Iterator[None]:
    """Re-raise an exception from a runner method as `RunnerCallError`; cancellation passes through."""
    try:
        yield
    except RunnerCallError:
        raise
    except Exception as error:
        raise RunnerCallError(describe_exception(error)) from error


def describe_exception(error: BaseException) -> str:
    """Return ``"<ExceptionType>: <message>"``, or just the type when the message is empty."""
    message = str(error)
    name = type(error).__name__
    return f"{name}: {message}" if message else name


def plain_recovery_detail(detail: str) -> str:
    """Return a recovery detail without the SDK's "returned an invalid result" wrapper."""
    return _INVALID_RESULT_WRAPPER.sub("", detail, count=1)
