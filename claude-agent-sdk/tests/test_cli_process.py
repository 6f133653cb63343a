"""Ending a CLI run's process tree: every process is killed, one that ignores SIGTERM included."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest
import pytest_asyncio
from dex_agents import UnfinishedModelResponse
from dex_agents.testing import wait_until

from dex_agents_claude_agent_sdk._cli_process import (
    cli_process_id,
    descendant_process_ids,
    ended_when_cancelled,
    kill_process_tree,
)
from tests.processes import is_running

# A parent that ignores SIGTERM and the end of its input, with two children that ignore SIGTERM too.
STUBBORN_TREE = "trap '' TERM; sleep 600 & sleep 600 & wait"


@pytest_asyncio.fixture(loop_scope="function")
async def stubborn() -> AsyncIterator[tuple[subprocess.Popen[bytes], set[int]]]:
    """A running stubborn tree: the parent and its two children; killed at the end whatever happened."""
    process = subprocess.Popen(["bash", "-c", STUBBORN_TREE], stdin=subprocess.PIPE)  # noqa: ASYNC220
    try:

        def both_children() -> set[int] | None:
            found = descendant_process_ids(process.pid)
            return found if len(found) == 2 else None

        yield process, await wait_until("both children to start", both_children)
    finally:
        kill_process_tree(process.pid)
        process.wait(timeout=30)


def client_of(process: subprocess.Popen[bytes]) -> object:
    """An object shaped like a connected `ClaudeSDKClient` whose CLI is ``process``."""
    return SimpleNamespace(_transport=SimpleNamespace(_process=process))


async def test_kill_process_tree_kills_the_root_and_every_descendant(
    stubborn: tuple[subprocess.Popen[bytes], set[int]],
) -> None:
    process, children = stubborn

    killed = kill_process_tree(process.pid)

    assert killed == {process.pid, *children}
    assert process.wait(timeout=30) == -9
    await wait_until("the children to die", lambda: not [pid for pid in children if is_running(pid)])


async def test_a_cancelled_body_kills_the_cli_tree_before_the_cancellation_goes_on(
    stubborn: tuple[subprocess.Popen[bytes], set[int]],
) -> None:
    process, children = stubborn
    client = client_of(process)
    assert cli_process_id(client) == process.pid
    entered = asyncio.Event()

    async def run() -> None:
        async with ended_when_cancelled(client):
            entered.set()
            await asyncio.get_running_loop().create_future()

    task = asyncio.ensure_future(run())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    # Killed by the time the cancellation left the block: nothing was left to a graceful close.
    assert process.poll() == -9 or process.wait(timeout=30) == -9
    await wait_until("the children to die", lambda: not [pid for pid in children if is_running(pid)])


async def test_an_unfinished_model_response_kills_the_cli_tree_too(
    stubborn: tuple[subprocess.Popen[bytes], set[int]],
) -> None:
    # The CLI would go on from the partial answer (or run its calls) while the SDK waited for it to exit.
    process, children = stubborn
    with pytest.raises(UnfinishedModelResponse):
        async with ended_when_cancelled(client_of(process)):
            raise UnfinishedModelResponse("model response msg_1 stopped without a stop_reason")
    assert process.poll() == -9 or process.wait(timeout=30) == -9
    await wait_until("the children to die", lambda: not [pid for pid in children if is_running(pid)])


async def test_another_failure_leaves_the_cli_to_the_sdks_own_close(
    stubborn: tuple[subprocess.Popen[bytes], set[int]],
) -> None:
    process, children = stubborn
    with pytest.raises(RuntimeError, match="model exploded"):
        async with ended_when_cancelled(client_of(process)):
            raise RuntimeError("model exploded")
    assert process.poll() is None and all(is_running(pid) for pid in children)


def test_a_client_without_a_subprocess_has_no_cli_process() -> None:
    # A client that runs a scripted Transport (tests.scripted_transport) has no process to kill.
    assert cli_process_id(SimpleNamespace(_transport=SimpleNamespace())) is None
    assert cli_process_id(object()) is None
