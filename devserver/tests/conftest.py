"""Fixtures of the devserver contract suite.

Every contract test takes the ``mode`` fixture and so runs twice: with a push Worker (listening on
its own port; the Flow's worker target points at it) and with a pull Worker (outbound task streams).
``mode`` is session-scoped, so pytest runs every push test, then every pull test, against one shared
devserver and one Worker child per mode. Modules that kill processes or need a different Worker
start their own (the worker-crash, devserver-crash, sync-worker and pull-capacity modules).
"""

from __future__ import annotations

import functools
import re
import uuid
from collections import Counter
from collections.abc import Generator, Iterator
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
DISPATCH_WAIT_SECONDS = 2
# Far below the 2 MiB default so the over-limit tests move little data; far above the 1 KiB offload
# threshold and every other value the suite writes.
MAX_VALUE_BYTES = 64 * 1024
SHARED_DEVSERVER_ARGS = (
    "--dispatch-wait",
    str(DISPATCH_WAIT_SECONDS),
    "--max-value-bytes",
    str(MAX_VALUE_BYTES),
)


@functools.cache
def client_registry() -> Registry:
    """One Registry per session: Client calls must use the exact Flow instances it registered."""
    return build_registry("client")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mode" in metafunc.fixturenames:
        metafunc.parametrize("mode", MODES, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "mode" in callspec.params:
            item.user_properties.append(("mode", callspec.params["mode"]))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On failure, attach the tails of the devserver and Worker logs the test used."""
    report = yield
    if report.failed:
        arguments = cast(dict[str, object], getattr(item, "funcargs", {}))
        for name, value in arguments.items():
            # Fixtures hold processes directly, in a tuple, or as ``server``/``worker`` attributes.
            candidates = [cast(object, getattr(value, attribute, None)) for attribute in ("server", "worker")]
            candidates += [*cast(tuple[object, ...], value)] if isinstance(value, tuple) else [value]
            for candidate in candidates:
                if isinstance(candidate, DevServer):
                    report.sections.append((f"devserver log tail ({name})", candidate.log_tail()))
                elif isinstance(candidate, WorkerProcess):
                    report.sections.append((f"Worker log tail ({name})", candidate.log_tail()))
    return report


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


@pytest.fixture(scope="session")
def sandbox_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the whole session: the shared Worker child is told about it once."""
    return tmp_path_factory.mktemp("contract")


@pytest.fixture(scope="session")
def sandbox(sandbox_dir: Path) -> Sandbox:
    return Sandbox(sandbox_dir)


@pytest.fixture(scope="session")
def devserver(sandbox_dir: Path) -> Iterator[DevServer]:
    """One devserver on an SQLite file, shared by both modes and every module that kills nothing."""
    server = DevServer(sandbox_dir, db=sandbox_dir / "devserver.sqlite3", extra_args=SHARED_DEVSERVER_ARGS)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
def client(mode: Mode, devserver: DevServer, worker: WorkerProcess, sandbox: Sandbox) -> Iterator[Client]:
    with make_client(devserver, sandbox, worker_target(mode, worker)) as opened:
        yield opened


@pytest.fixture
def flow_id(request: pytest.FixtureRequest) -> str:
    """Unique per test and mode; readable in server logs."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    return f"{name}-{uuid.uuid4().hex[:8]}"
