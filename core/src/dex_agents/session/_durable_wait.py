"""``durable_wait``: the model pauses the conversation on a durable Timer ("check again tomorrow").

`RunModel` records the call `waiting_for_timer` with ``wait_until`` and moves to `AwaitTimer`, which waits
on a Dex Timer, so the wait survives Worker and server restarts and holds no Worker. The Timer is the
authority: when it fires, or `SkipTimer` skips it, the call succeeds. Steering abandons the wait, as it
abandons an approval; `cancel_turn` cancels the Step and `FinishTurnCancellation` records the call.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta

from dex import AsyncContext, StepDecision, Timer, Wait, dead_end

from dex_agents._tools._builtins import parse_durable_wait_arguments
from dex_agents.persistence import TOOL_CALL_CANCELLATIONS
from dex_agents.session._control import apply_cancellation_wake
from dex_agents.session._records import finish_call
from dex_agents.session._state import now, parse_time, read_tool_call
from dex_agents.session._step import SessionStep
from dex_agents.values import AgentToolCall, ToolCallStatus

__all__ = ["DURABLE_WAIT_TIMER_ID", "AwaitTimer", "durable_wait_result"]

DURABLE_WAIT_TIMER_ID = "durable_wait"
"""The condition ID of `AwaitTimer`'s Timer, for `SkipTimer`."""

# The arguments were checked in RunModel; reading them again must not apply the session's limit anew.
_NO_LIMIT = timedelta(days=365 * 1000)


def _remaining_seconds(record: AgentToolCall) -> int:
    if record.wait_until is None:
        return 0
    return max(0, math.ceil((parse_time(record.wait_until) - now()).total_seconds()))


def durable_wait_result(record: AgentToolCall) -> str:
    """Return the model-visible result of a ``durable_wait`` call whose Timer fired (or was skipped).

    ``waited_seconds`` is the wait asked for less the whole seconds that were left of it. Dex counts Timers
    in whole seconds from a floored start, so a Timer may fire up to a second early; that still reports the
    whole wait, and a skipped wait reports how long it really waited, rounded up.
    """
    arguments = parse_durable_wait_arguments(record.arguments, _NO_LIMIT)
    left = 0.0 if record.wait_until is None else (parse_time(record.wait_until) - now()).total_seconds()
    waited = max(0, arguments.seconds - math.floor(max(0.0, left)))
    return json.dumps(
        {"status": "completed", "waited_seconds": waited, "reason": arguments.reason},
        ensure_ascii=False,
        separators=(",", ":"),
    )


class AwaitTimer(SessionStep[str]):
    """Waits for a ``durable_wait`` call's Timer, or for steering to abandon the wait."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Wait for the Timer (Dex picks Timers before Channels) or a steering wake."""
        record = read_tool_call(context, input)
        seconds = 0 if record is None else _remaining_seconds(record)
        return Wait.any_of(
            Timer.by_duration(timedelta(seconds=seconds), condition_id=DURABLE_WAIT_TIMER_ID),
            TOOL_CALL_CANCELLATIONS.for_one(input),
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Record the wait completed, or abandon it for steering, or wait again after a stale wake."""
        record = read_tool_call(context, input)
        if record is None or record.status is not ToolCallStatus.WAITING_FOR_TIMER:
            return dead_end()
        if TOOL_CALL_CANCELLATIONS.results(context, input):
            return apply_cancellation_wake(context, self._deps, self._moves, record, None, ())
        return finish_call(
            context, self._deps, record, ToolCallStatus.SUCCEEDED, output=durable_wait_result(record)
        )
