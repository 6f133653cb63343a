"""The chat page's "Serving it": ``web.py`` and ``main.py`` from the docs page's text, served by uvicorn.

The page is ``docs/pages/how-to/chat-page.md``. ``run_readme_files`` starts a devserver and the README's
``worker.py`` (with ``my_agent.py``, the scripted refund agent of ``test_readme_three_files``). The client it
runs is this test's driver: it starts a session, then serves ``web.py`` as its own process (``python web.py``,
the port changed to a free one) and ``main.py`` with ``uvicorn main:api``, and drives both over HTTP as a
browser would. Every API call answering proves the
Dex client was connected in the serving loop, not at import.
"""

import re
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, readme_snippets, run_readme_files
from tests.test_readme_three_files import MY_AGENT

README = Path(__file__).resolve().parents[1] / "README.md"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "pages" / "how-to" / "chat-page.md"
# The page marks the blocks this test runs with `<!-- checked: NAME -->` rather than the runnable-block
# convention's `file:` marker: `scripts/docs` cannot serve a web app, this test does.
CHECKED = re.compile(
    r"^<!-- checked: (?P<name>[^\s>]+) -->\n```[a-z]*\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL
)

DRIVER = """
import asyncio
import socket
import subprocess
import sys
import time

import httpx

from dex_agents import AgentSessionClient, AgentSessionFlow

SESSION = "alice-1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stopped(server, name, log):
    # uvicorn ends a SIGTERM by running the lifespan's shutdown (closing the Dex client), then exits with
    # the signal (-15) or 0, depending on its version.
    server.terminate()
    code = server.wait(timeout=30)
    shut_down = "Application shutdown complete." in open(log, encoding="utf-8").read()
    print(name, "stopped" if code in (0, -15) and shut_down else f"failed: {code}")
    if not shut_down:
        print(open(log, encoding="utf-8").read(), file=sys.stderr)


async def until(what, probe, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = await probe()
        except httpx.TransportError:
            value = None
        if value:
            return value
        await asyncio.sleep(0.2)
    raise TimeoutError(what)


async def drive_web_py(port: int) -> None:
    text = open("web.py", encoding="utf-8").read()
    assert "port=8000" in text
    open("web_served.py", "w", encoding="utf-8").write(text.replace("port=8000", f"port={port}"))
    log = open("web.log", "wb")
    server = subprocess.Popen([sys.executable, "web_served.py"], stdout=log, stderr=log)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            alice = {"x-authenticated-user": "alice"}
            api = f"/api/sessions/{SESSION}"

            async def pending():
                response = await http.get(f"{api}/snapshot", headers=alice)
                return response.json()["pending_interrupts"] if response.status_code == 200 else None

            [interrupt] = await until("the approval", pending)
            print("page", (await http.get(f"/sessions/{SESSION}", headers=alice)).status_code)
            bob = {"x-authenticated-user": "bob"}
            print("snapshot for bob", (await http.get(f"{api}/snapshot", headers=bob)).status_code)
            approve = f"{api}/interrupts/{interrupt['interrupt_id']}/approve"
            support = await http.post(approve, json={}, headers={"x-authenticated-user": "support"})
            print("approve as support", support.status_code)
            print("approve as alice", (await http.post(approve, json={}, headers=alice)).status_code)

            async def ended():
                snapshot = (await http.get(f"{api}/snapshot", headers=alice)).json()
                return snapshot if snapshot["state"]["turn_count"] == 1 else None

            snapshot = await until("the turn to end", ended)
            print("assistant:", snapshot["messages"][-1]["text"])
    finally:
        stopped(server, "web.py", "web.log")


async def drive_main_py(port: int) -> None:
    command = [sys.executable, "-m", "uvicorn", "main:api", "--port", str(port)]
    log = open("main.log", "wb")
    server = subprocess.Popen(command, stdout=log, stderr=log)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:

            async def snapshot():
                response = await http.get(
                    f"/agent/api/sessions/{SESSION}/snapshot", headers={"x-authenticated-user": "support"}
                )
                return response if response.status_code != 503 else None

            response = await until("the mounted app", snapshot)
            print("mounted snapshot", response.status_code, response.json()["messages"][-1]["text"])
    finally:
        stopped(server, "main.py", "main.log")


async def main() -> None:
    flow = AgentSessionFlow.for_client(flow_type="RefundAgent")
    async with AgentSessionClient.connect("localhost:8801", flow) as sessions:
        await sessions.start_session(SESSION, "Please refund order 7, it arrived broken.")
    await drive_web_py(free_port())
    await drive_main_py(free_port())


asyncio.run(main())
"""


def test_the_serving_files_run_as_written(tmp_path: Path) -> None:
    page = {match["name"]: match["code"] for match in CHECKED.finditer(PAGE.read_text(encoding="utf-8"))}
    assert set(page) == {"web.py", "main.py"}
    files = {
        "worker.py": readme_snippets(README)["worker.py"],
        "my_agent.py": MY_AGENT,
        "web.py": page["web.py"],
        "main.py": page["main.py"],
        "drive.py": DRIVER,
    }
    run = run_readme_files(
        tmp_path, files, worker="worker.py", client="drive.py", env={STATE_DIR_ENV: str(tmp_path)}
    )
    assert run.client_returncode == 0, run.client_stderr
    assert run.client_stdout.splitlines() == [
        "page 200",
        "snapshot for bob 404",
        "approve as support 403",
        "approve as alice 200",
        "assistant: Order 7 is refunded.",
        "web.py stopped",
        "mounted snapshot 200 Order 7 is refunded.",
        "main.py stopped",
    ]
    for log in ("web.log", "main.log"):
        assert "attached to a different loop" not in (tmp_path / log).read_text(encoding="utf-8")
    assert run.worker_exit == 0, run.worker_log
