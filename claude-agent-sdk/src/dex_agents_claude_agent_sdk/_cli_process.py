"""Ending a run's Claude Code CLI at once, with every process it started, when `RunModel` is cancelled.

The same holds when the run turns out to hold an unfinished model response (`UnfinishedModelResponse`):
the CLI would otherwise go on from the partial answer while the SDK waits for it to exit.

The SDK closes the CLI gracefully: it closes stdin, waits up to five seconds, then terminates and kills.
A cancelled `RunModel` (`cancel_turn`) cannot wait for that, and the SDK's own escalation is skipped when
a plain asyncio cancellation reaches it. A run's CLI may also have children of its own: a `Bash` command,
a stdio MCP server from `ClaudeAgentOptions.mcp_servers`. Those outlive their parent when only the CLI is
killed, so this module stops the whole tree first (so no process can start another while the tree is
listed) and then kills every process in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dex_agents import UnfinishedModelResponse

__all__ = ["cli_process_id", "descendant_process_ids", "ended_when_cancelled", "kill_process_tree"]

_PROC = Path("/proc")


def cli_process_id(client: object) -> int | None:
    """Return the process ID of a connected `ClaudeSDKClient`'s CLI, or `None` when it has none.

    A client built with a custom `Transport` (a test's scripted CLI) has no subprocess.
    """
    # The SDK keeps the subprocess on its private transport; this package pins the SDK version, and the
    # cancellation tests fail should the attribute move.
    transport: Any = getattr(client, "_transport", None)
    process: Any = getattr(transport, "_process", None)
    pid: Any = getattr(process, "pid", None)
    return pid if isinstance(pid, int) else None


def _parents_from_proc() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended while the table was read
        # The command name (field 2) is in parentheses and may hold spaces; the parent ID follows the state.
        fields = stat[stat.rfind(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def _parents_from_ps() -> dict[int, int]:
    listing = subprocess.run(
        ["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True, check=True
    ).stdout
    parents: dict[int, int] = {}
    for line in listing.splitlines():
        pid, _, ppid = line.strip().partition(" ")
        if pid.isdigit() and ppid.strip().isdigit():
            parents[int(pid)] = int(ppid.strip())
    return parents


def _process_parents() -> Mapping[int, int]:
    """Every process's parent ID: from `/proc` on Linux, from `ps` elsewhere (macOS)."""
    return _parents_from_proc() if _PROC.is_dir() else _parents_from_ps()


def descendant_process_ids(pid: int) -> set[int]:
    """Return the IDs of every process below ``pid`` (children, their children, and so on)."""
    children: dict[int, list[int]] = {}
    for child, parent in _process_parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _signal(pid: int, signal_number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal_number)


def kill_process_tree(pid: int) -> set[int]:
    """SIGKILL ``pid`` and every process below it; return the IDs that were signalled.

    Each process is stopped (SIGSTOP) before its children are listed, so none can start a process that
    the kill would miss. A process that ended meanwhile is skipped.

    Args:
        pid: The root of the tree (the CLI).

    Returns:
        The root and its descendants as they were found.
    """
    tree = {pid}
    _signal(pid, signal.SIGSTOP)
    while True:
        below = descendant_process_ids(pid) - tree
        if not below:
            break
        for child in below:
            _signal(child, signal.SIGSTOP)
        tree |= below
    for member in tree:
        _signal(member, signal.SIGKILL)
    return tree


@asynccontextmanager
async def ended_when_cancelled(client: object) -> AsyncIterator[None]:
    """Kill the client's CLI tree when the body is cancelled or meets an unfinished model response.

    The tree is killed before the client closes; then the error is re-raised.

    Args:
        client: A connected `ClaudeSDKClient`.

    Yields:
        Nothing.
    """
    try:
        yield
    except (asyncio.CancelledError, UnfinishedModelResponse):
        pid = cli_process_id(client)
        if pid is not None:
            kill_process_tree(pid)
        raise
