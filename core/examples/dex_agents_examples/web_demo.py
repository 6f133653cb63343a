"""Serve one agent's sessions in the browser on a private devserver.

    python -m dex_agents_examples.web_demo FLOW_FACTORY WORKER_MODULE [--worker-cwd DIR]
                                           [--worker-env NAME=VALUE] [--session-id ID] [--port 8000]

``FLOW_FACTORY`` is ``module:function`` returning the session Flow (the Worker module builds the same one).
The demo starts ``dex-devserver`` and a Worker process with ``dex_agents.testing``'s stack, starts an idle
session, serves `create_agent_web_app` with uvicorn on loopback only (it checks no access, so it refuses
another ``--host``) and prints the page's URL. When the Worker dies (try
``kill -9`` on the pid it prints, in the middle of a turn) it starts a replacement, and the page recovers.
The project ``dex-agents-examples`` brings the ``web`` and ``testing`` extras and uvicorn; ``scripts/demo
--web`` runs it for the order desk.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import uvicorn

from dex_agents.session import AgentSessionFlow
from dex_agents.testing import AgentTestStack
from dex_agents.web import create_agent_web_app

__all__ = ["main"]

_WATCH_SECONDS = 0.5
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _flow_factory(spec: str) -> Callable[[], AgentSessionFlow]:
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise SystemExit(f"FLOW_FACTORY must be module:function, got {spec!r}")
    factory = getattr(importlib.import_module(module_name), function_name, None)
    if not callable(factory):
        raise SystemExit(f"{spec!r} is not a function")
    return cast(Callable[[], AgentSessionFlow], factory)


def _environment(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            raise SystemExit(f"--worker-env takes NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


async def _keep_a_worker(stack: AgentTestStack) -> None:
    while True:
        await asyncio.sleep(_WATCH_SECONDS)
        if not stack.workers:
            worker = await stack.start_worker()
            print(f"The Worker died; replacement Worker pid {worker.pid}", flush=True)


async def _serve(arguments: argparse.Namespace, state_dir: Path) -> None:
    flow = _flow_factory(arguments.flow_factory)()
    async with AgentTestStack(
        state_dir,
        [flow],
        arguments.worker_module,
        worker_cwd=Path(arguments.worker_cwd).resolve(),
        worker_env=_environment(arguments.worker_env),
    ) as stack:
        worker = await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session(arguments.session_id)
        # A development demo on loopback: anyone who can reach it may see and drive its sessions.
        app = create_agent_web_app(sessions, allow_any_session=True)
        server = uvicorn.Server(
            uvicorn.Config(app, host=arguments.host, port=arguments.port, log_level="warning", lifespan="off")
        )
        watcher = asyncio.create_task(_keep_a_worker(stack))
        print(f"devserver at {stack.server_address}; Worker pid {worker.pid}")
        print(f"Open http://{arguments.host}:{arguments.port}/sessions/{arguments.session_id}", flush=True)
        try:
            await server.serve()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


def main(argv: Sequence[str] | None = None) -> None:
    """Run the demo until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m dex_agents_examples.web_demo", description="Serve an agent's sessions in the browser."
    )
    parser.add_argument("flow_factory", help="module:function returning the session Flow")
    parser.add_argument("worker_module", help="the Worker module, run as python -m WORKER_MODULE")
    parser.add_argument("--worker-cwd", default=".", help="where the Worker starts, so its module imports")
    parser.add_argument("--worker-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--session-id", default="web-demo-1")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    arguments = parser.parse_args(argv)
    if arguments.host not in _LOOPBACK:
        # The demo checks no access: on another address, anyone on the network could approve its tools.
        parser.error(f"--host must be a loopback address ({', '.join(_LOOPBACK)}), got {arguments.host!r}")
    with (
        tempfile.TemporaryDirectory(prefix="dex-web-demo-") as directory,
        contextlib.suppress(KeyboardInterrupt),
    ):
        asyncio.run(_serve(arguments, Path(directory)))


if __name__ == "__main__":
    main()
