"""A stdio MCP server behind a tap that logs every JSON-RPC line each way: ``python -m`` this module.

Usage: ``python -m dex_agents.testing._mcp_wire_tap <log> <program> [args...]``. The tap starts the program,
copies its own stdin to the program's stdin and the program's stdout to its own stdout, line by line, and
appends each line to ``<log>`` as ``{"connection": <the tap's pid>, "direction": "client" | "server",
"message": <the line's JSON>}``, so the messages of connections that share a log can be told apart. The
program's stderr is the tap's. When the client closes stdin, or the tap gets SIGTERM, the program is ended
too, so the server dies with its connection as it would without the tap.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

__all__: list[str] = []


class _Log:
    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, direction: str, line: bytes) -> None:
        try:
            message: Any = json.loads(line)
        except ValueError:
            message = line.decode("utf-8", errors="replace").rstrip("\n")
        entry = json.dumps(
            {"connection": os.getpid(), "direction": direction, "message": message}, ensure_ascii=False
        )
        with self._lock:
            self._file.write(entry + "\n")
            self._file.flush()


def _copy(source: IO[bytes], target: IO[bytes], log: _Log, direction: str) -> None:
    for line in iter(source.readline, b""):
        log.write(direction, line)
        try:
            target.write(line)
            target.flush()
        except (BrokenPipeError, ValueError):
            return


def main(argv: list[str]) -> int:
    """Run the tapped server until the client closes stdin; return its exit code."""
    if len(argv) < 2:
        print("usage: python -m dex_agents.testing._mcp_wire_tap <log> <program> [args...]", file=sys.stderr)
        return 2
    log = _Log(Path(argv[0]))
    server = subprocess.Popen(argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None

    def end_server(_signal: int, _frame: object) -> None:
        server.terminate()

    signal.signal(signal.SIGTERM, end_server)
    replies = threading.Thread(
        target=_copy, args=(server.stdout, sys.stdout.buffer, log, "server"), daemon=True
    )
    replies.start()
    _copy(sys.stdin.buffer, server.stdin, log, "client")
    # The client hung up: end the server the way closing its stdin would.
    server.stdin.close()
    try:
        code = server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.kill()
        code = server.wait()
    replies.join(timeout=5)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
