"""The README's "Run it yourself", run from the README's text: a devserver, its `worker.py`, its `client.py`.

The Worker runs the real Claude Code CLI against the README's scripted model; the client imports no
framework. The only change to the files is the devserver's address (a free port instead of 8801).
"""

from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, readme_snippets, run_readme_files

from tests.matrix_spec import PACKAGE_DIR

README = PACKAGE_DIR / "README.md"


def test_the_worker_and_client_files_run_as_written(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    assert "dex-devserver serve" in text
    snippets = readme_snippets(README)
    assert set(snippets) >= {"worker.py", "client.py"}
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    # run_readme_files refuses a Worker or client file that does not name localhost:8801.
    files = {name: snippets[name] for name in ("worker.py", "client.py")}
    # The scripted model keeps its scripts and invocation log in the directory STATE_DIR_ENV names; the
    # real CLI makes the turn slower than the other adapters', hence the longer timeout.
    env = {STATE_DIR_ENV: str(tmp_path)}
    run = run_readme_files(tmp_path, files, worker="worker.py", client="client.py", env=env, timeout=150)
    assert run.client_returncode == 0, run.client_stderr
    assert run.client_stdout.splitlines() == [
        'approving refund_order {"order_id": "7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: Let me look.",
        "assistant: lookup_order",
        "tool: lookup_order",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert run.worker_exit == 0, run.worker_log
