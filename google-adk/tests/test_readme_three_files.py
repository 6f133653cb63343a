"""The README's "Run it yourself: three files", run from the README's own text against a devserver.

The Worker file and the client file are written out exactly as the README has them, except for the
server's address (a private devserver listens on a free port instead of 8801), and run as a user runs
them: the client starts a session, waits for the refund's approval, approves it and prints the transcript.
"""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import readme_snippets, run_readme_files

from tests.matrix_spec import PACKAGE_DIR

README = PACKAGE_DIR / "README.md"


def test_the_worker_and_client_files_run_as_written(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    assert "dex-devserver serve" in text, "the README names the command that starts the server"
    snippets = readme_snippets(README)
    assert set(snippets) == {"worker.py", "client.py"}
    imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"], (
        "the client imports no framework"
    )

    # run_readme_files refuses a Worker or client file that does not name localhost:8801.
    run = run_readme_files(tmp_path, snippets, worker="worker.py", client="client.py")
    assert run.client_returncode == 0, run.client_stderr
    assert run.client_stdout.splitlines() == [
        'approving refund_order {"order_id": "7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: Let me refund that.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert run.worker_exit == 0, run.worker_log
