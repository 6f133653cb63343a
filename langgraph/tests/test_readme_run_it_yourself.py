"""The README's "Run it yourself": its agent and client files, run from the README's text on a devserver."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from dex_agents.testing import DevServerProcess, readme_snippets

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_agent_and_client_files_run_as_written(tmp_path: Path) -> None:
    snippets = readme_snippets(README)
    assert set(snippets) == {"devserver.sh", "agent.py", "client.py"}
    assert snippets["devserver.sh"].startswith("dex-devserver serve ")
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    # DevServerProcess runs `dex-devserver serve` on a free port instead of 8801; that is the one change.
    server = DevServerProcess(tmp_path / "devserver.sqlite3", tmp_path / "devserver.log")
    server.start()
    try:
        for name in ("agent.py", "client.py"):
            (tmp_path / name).write_text(snippets[name].replace("localhost:8801", server.address), "utf-8")
        with (tmp_path / "worker.log").open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "agent.py"], cwd=tmp_path, env=dict(os.environ), stdout=log, stderr=log
            )
        try:
            client = subprocess.run(
                [sys.executable, "client.py"],
                check=False,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker_exit = worker.wait(timeout=60)
    finally:
        server.stop()
    assert client.returncode == 0, client.stderr
    assert client.stdout.splitlines() == [
        'approving refund_order {"order_id":"7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: I will refund it.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert worker_exit == 0, (tmp_path / "worker.log").read_text()
