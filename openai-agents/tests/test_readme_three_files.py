"""The README's "Run it yourself", run from the README's text: its Worker and client files, on a devserver."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import readme_snippets, run_readme_files

from tests.matrix_spec import PACKAGE_DIR

README = PACKAGE_DIR / "README.md"


def test_the_worker_and_client_files_run_as_written(tmp_path: Path) -> None:
    snippets = readme_snippets(README)
    assert set(snippets) == {"worker.py", "client.py"}
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    # The one change: the private devserver listens on a free port instead of the files' localhost:8801.
    run = run_readme_files(tmp_path, snippets, worker="worker.py", client="client.py")
    assert run.client_returncode == 0, run.client_stderr
    assert run.client_stdout.splitlines() == [
        'approving refund_order {"order_id": "7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert run.worker_exit == 0, run.worker_log
    # The README shows the output it prints.
    assert "\n".join(run.client_stdout.splitlines()) in README.read_text(encoding="utf-8")
