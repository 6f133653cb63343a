"""A stack per test module: a private devserver (or DEX_SERVER_ADDRESS) and one scripted-agent Worker.

The browser tests of the chat page share a headless Chromium per module (Debian's ``/usr/bin/chromium``,
driven by Playwright for Python) and a fresh browser context per test.
"""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from dex_agents.testing import AgentTestStack
from dex_agents.testing.matrix import MatrixHarness
from tests.agents import CORE_DIR, SPEC
from tests.builtin_agents import build_built_in_flows
from tests.builtin_support import BuiltIns

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
# Without the networking flags Chromium keeps calling out, and this machine refuses every such connection.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Each Playwright wait of the browser tests, in milliseconds; generous, because the machines are shared.
BROWSER_WAIT_MS = 30_000


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_harness(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[MatrixHarness]:
    # A module may set SERVER_ARGS (devserver flags) and WORKER_TASK_SLOTS (the Worker's capacity).
    server_args: tuple[str, ...] = getattr(request.module, "SERVER_ARGS", ())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    task_slots: int = getattr(request.module, "WORKER_TASK_SLOTS", 16)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    flows = SPEC.build_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("stack"),
        flows.all,
        SPEC.worker_module,
        worker_cwd=SPEC.worker_cwd,
        server_args=server_args,
        max_concurrent_tasks=task_slots,
    ) as stack:
        harness = MatrixHarness(SPEC, stack, flows)
        await harness.ensure_worker()
        yield harness


@pytest_asyncio.fixture(loop_scope="module")
async def harness(module_harness: MatrixHarness) -> MatrixHarness:
    """The module's stack, with a running Worker before each test."""
    await module_harness.ensure_worker()
    return module_harness


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def built_ins_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BuiltIns]:
    """The built-in tool Flows on the module's own stack."""
    flows = build_built_in_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("built-ins"), flows.all, "tests.builtin_worker", worker_cwd=CORE_DIR
    ) as stack:
        yield BuiltIns(stack, flows)


@pytest_asyncio.fixture(loop_scope="module")
async def built_ins(built_ins_stack: BuiltIns) -> BuiltIns:
    """The module's built-in tool stack, with a running Worker before each test."""
    if not built_ins_stack.stack.workers:
        await built_ins_stack.stack.start_worker()
    return built_ins_stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> "AsyncIterator[Browser]":
    """Headless Chromium for the module's browser tests."""
    from playwright.async_api import async_playwright, expect

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing; ci.sh installs Debian's chromium package")
    expect.set_options(timeout=BROWSER_WAIT_MS)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: "Browser") -> "AsyncIterator[Page]":
    """A page in a fresh browser context."""
    context = await browser.new_context(viewport={"width": 900, "height": 900})
    opened = await context.new_page()
    opened.set_default_timeout(BROWSER_WAIT_MS)
    yield opened
    await context.close()
