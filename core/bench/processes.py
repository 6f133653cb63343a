"""CPU time of the benchmark's child processes (the devserver and the Worker), read from ``/proc``."""

from __future__ import annotations

import os

__all__ = ["child_processes", "cpu_seconds"]


def cpu_seconds(pid: int) -> float:
    """Return the user and system CPU seconds process ``pid`` used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_processes() -> dict[int, str]:
    """Return this process's children by pid: ``"devserver"`` or ``"worker"``."""
    found: dict[int, str] = {}
    for thread in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{thread}/children", encoding="ascii") as children:
            for pid in children.read().split():
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    words = cmdline.read().split(b"\0")
                name = "devserver" if any(b"dex_devserver" in word for word in words) else "worker"
                found[int(pid)] = name
    return found
