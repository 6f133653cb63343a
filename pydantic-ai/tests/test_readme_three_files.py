"""The README's "Run it yourself", run from the README's own text against a devserver.

The Worker file (the Pydantic AI agent with its scripted model) and the client file are written out
exactly as the README spells them, except for the server's address: the test's private devserver listens
on a free port instead of 8801.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from dex_agents.testing import DevServerProcess, readme_snippets

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readmes_three_files_run_as_written(tmp_path: Path) -> None:
    snippets = readme_snippets(README)
    assert set(snippets) == {"agent_worker.py", "client.py", "devserver.sh"}
    assert snippets["devserver.sh"].splitlines()[-1].startswith("dex-devserver serve")
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == [
        "import asyncio",
        "import uuid",
        "from dex_agents import AgentSessionClient, AgentSessionFlow",
    ], "the client imports no framework"

    server = DevServerProcess(tmp_path / "devserver.sqlite3", tmp_path / "devserver.log")
    server.start()
    try:
        for name in ("agent_worker.py", "client.py"):
            assert "localhost:8801" in snippets[name]
            code = snippets[name].replace("localhost:8801", server.address)
            (tmp_path / name).write_text(code, encoding="utf-8")
        with (tmp_path / "worker.log").open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "agent_worker.py"],
                cwd=tmp_path,
                env=dict(os.environ),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            client = subprocess.run(
                [sys.executable, "client.py"],
                check=False,
                cwd=tmp_path,
                env=dict(os.environ),
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
        "user: Order 7 arrived broken, please refund it.",
        "assistant: Sorry about that, I will refund order 7.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert worker_exit == 0, (tmp_path / "worker.log").read_text()
