"""What tests read about live processes: a Worker's CLI and everything it started (Linux `/proc`)."""

from __future__ import annotations

from pathlib import Path

from dex_agents_claude_agent_sdk._cli_process import descendant_process_ids


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, killed but not yet reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def running_tree(pid: int) -> set[int]:
    """The live processes below ``pid`` (for a Worker: its CLI runs and what they started)."""
    return {child for child in descendant_process_ids(pid) if is_running(child)}


def command_line(pid: int) -> str:
    """A process's command line, or `""` when it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
