"""Tool tasks in Stepwise: which calls may hand remote work to the session, and who polls it.

The session tells a tool whether its runner polls tasks (`DeferredToolExecution.supports_tool_tasks`).
StepwiseRunner always has ``poll_tool_task``, but it can only pass a poll on to a tool source that polls
the tasks of that call: an `McpToolSource`, or a function tool with a `ToolTaskHandler`. Every other tool
runs with ``supports_tool_tasks`` false, so a tool written for both cases finishes its work inside the
call, and `dex_agents.start_tool_task` refuses rather than hand over a task nobody would poll.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from dex_agents._tools._context import current_tool_call_requests, running_tool_execution
from dex_agents.runner import DeferredToolExecution

__all__ = ["without_tool_tasks"]


@contextmanager
def without_tool_tasks(execution: DeferredToolExecution) -> Iterator[DeferredToolExecution]:
    """Run tool code that no poller follows: it sees ``supports_tool_tasks`` false.

    The call is made current again with that flag, and a question the code asks (`dex_agents.ask_user_input`)
    is handed to the session's own record of the call when the block ends, as if it had asked there.

    Args:
        execution: The call as the session hands it over.

    Yields:
        The call to hand to the tool code.
    """
    if not execution.supports_tool_tasks:
        yield execution
        return
    outer = current_tool_call_requests()
    narrowed = dataclasses.replace(execution, supports_tool_tasks=False)
    with running_tool_execution(narrowed) as requests:
        try:
            yield narrowed
        finally:
            if outer is not None and outer[1].outcome is None:
                outer[1].outcome = requests.outcome
