"""Fixtures of the devserver contract suite.

Every contract test takes the ``mode`` fixture and so runs twice: with a push Worker (listening on
its own port; the Flow's worker target points at it) and with a pull Worker (outbound task streams).
``mode`` is module-scoped, so pytest runs a module's push tests, then its pull tests, and each
module starts one devserver and one Worker child per mode unless a test needs to kill them.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from contract.blobs import RecordingBlobCache
from contract.processes import DevServer, Mode, WorkerProcess
from contract.registry import build_registry
from contract.sandbox import Sandbox
from dex import Client, ClientOptions, Registry, WorkerTarget

MODES: tuple[Mode, ...] = ("push", "pull")
# Short enough that "no Worker took the task" tests finish quickly; long enough for a Worker to
# restart on a loaded machine without losing attempts it should not lose.
DEFAULT_DISPATCH_WAIT = "2"


@functools.cache
def client_registry() -> Registry:
    """One Registry per session: Client calls must use the exact Flow instances it registered."""
    return build_registry("client")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "devserver_args(*args): extra command-line arguments for the devserver"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mode" in metafunc.fixturenames:
        metafunc.parametrize("mode", MODES, scope="module")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "mode" in callspec.params:
            item.user_properties.append(("mode", callspec.params["mode"]))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    counts: dict[str, Counter[str]] = {mode: Counter() for mode in MODES}
    for outcome in ("passed", "failed", "xfailed", "xpassed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            when = getattr(report, "when", "call")
            if outcome in ("passed", "failed", "xfailed", "xpassed") and when != "call":
                continue
            properties = dict(cast(list[tuple[str, object]], getattr(report, "user_properties", [])))
            mode = properties.get("mode")
            if isinstance(mode, str) and mode in counts:
                counts[mode][outcome] += 1
    terminalreporter.section("contract tests per Worker mode")
    for mode in MODES:
        summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts[mode].items())) or "none ran"
        terminalreporter.write_line(f"{mode}: {summary}")


@pytest.fixture(scope="module")
def sandbox_dir(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    return tmp_path_factory.mktemp(request.path.stem)


@pytest.fixture(scope="module")
def sandbox(sandbox_dir: Path) -> Sandbox:
    return Sandbox(sandbox_dir)


def devserver_args(request: pytest.FixtureRequest) -> list[str]:
    """A module tunes its server with ``pytestmark = pytest.mark.devserver_args(...)``."""
    marker = request.node.get_closest_marker("devserver_args")
    extra = [str(arg) for arg in marker.args] if marker is not None else []
    if "--dispatch-wait" not in extra:
        extra += ["--dispatch-wait", DEFAULT_DISPATCH_WAIT]
    return extra


@pytest.fixture(scope="module")
def devserver(sandbox_dir: Path, request: pytest.FixtureRequest) -> Iterator[DevServer]:
    """One devserver per module, on an SQLite file, shared by both modes."""
    server = DevServer(sandbox_dir, db=sandbox_dir / "devserver.sqlite3", extra_args=devserver_args(request))
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def worker(mode: Mode, devserver: DevServer, sandbox_dir: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(mode, devserver, sandbox_dir, sandbox_dir)
    process.start()
    try:
        yield process
    finally:
        process.kill()


def worker_target(mode: Mode, worker: WorkerProcess) -> WorkerTarget:
    return WorkerTarget(address=worker.push_address) if mode == "push" else WorkerTarget(pull=True)


def make_client(devserver: DevServer, sandbox: Sandbox, target: WorkerTarget | None) -> Client:
    return Client(
        client_registry(),
        RecordingBlobCache(sandbox, "client"),
        ClientOptions(server_address=devserver.address, worker_target=target),
    )


@pytest.fixture(scope="module")
def client(mode: Mode, devserver: DevServer, worker: WorkerProcess, sandbox: Sandbox) -> Iterator[Client]:
    with make_client(devserver, sandbox, worker_target(mode, worker)) as opened:
        yield opened


@pytest.fixture
def flow_id(request: pytest.FixtureRequest) -> str:
    """Unique per test and mode; readable in server logs."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    return f"{name}-{uuid.uuid4().hex[:8]}"
