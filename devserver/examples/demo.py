"""Starts a devserver and a Worker, runs the session Flow, and prints its history.

Run with ``uv run python examples/demo.py`` from ``devserver/``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import dex
from session_flow import events, registry, session_flow

HERE = Path(__file__).resolve().parent


def _start(command: list[str], ready: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith(ready):
        process.kill()
        raise RuntimeError(f"{command[0]} did not start: {line!r}")
    return process, line


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def _drive(address: str) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = dex.open_blob_cache(dex.BlobCacheConfig(directory=cache_dir, max_bytes=16 * 1024 * 1024))
        client = dex.AsyncClient(
            registry(),
            cache,
            dex.ClientOptions(server_address=address, worker_target=dex.WorkerTarget(pull=True)),
        )
        flow_id = "demo-session"
        await client.start_flow(session_flow, flow_id, "demo")
        for text in ("what is dex?", "thanks", "bye"):
            turns = await client.invoke_rpc(session_flow.send, flow_id, text)
            print(f"sent {text!r} (turns so far: {turns})")
        result = await client.wait_for_flow(flow_id, timeout=timedelta(seconds=60))
        print(f"flow finished: {result.status.name} {[c.decode(str) for c in result.completions]}")
        token = ""
        while True:
            try:
                message = await client.read_stream(flow_id, events, token, timeout=timedelta(seconds=1))
            except dex.LongPollTimeoutError:
                break
            print(f"stream: {message.value}")
            token = message.resume_token
        await client.close()
        cache.close()


def main() -> int:
    with tempfile.TemporaryDirectory() as data:
        db = os.path.join(data, "demo.sqlite3")
        server, line = _start(
            [sys.executable, "-m", "dex_devserver", "serve", "--port", "0", "--db", db], "listening on "
        )
        address = line.removeprefix("listening on ")
        print(f"devserver {line}")
        worker = None
        try:
            worker, _ = _start([sys.executable, str(HERE / "worker.py"), address], "worker ready")
            asyncio.run(_drive(address))
            history = subprocess.run(
                [sys.executable, "-m", "dex_devserver", "history", "demo-session", "--server", address],
                capture_output=True,
                text=True,
                check=True,
            )
            document = json.loads(history.stdout)
            print(f"history of {document['flowId']} run {document['runId']}:")
            for event in document["events"]:
                print(f"  {event['eventId']:>3} {event['type']}")
        finally:
            if worker is not None:
                _stop(worker)
            _stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
