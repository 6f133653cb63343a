"""The chat page in headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright for Python).

One browser for the module. The page streams a turn, takes an approval, survives a Worker killed inside a
model call (the retried call's text replaces the dropped attempt's), rebuilds after a reload, and shows the
model's reaction to a rejected approval.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from dex_agents.testing import ScriptedResponse, wait_for_turn_end
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.web import EventStreamTimings, create_agent_web_app
from tests.web_support import serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

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
#: Set to a path to save a screenshot of the page while the approval waits (the README's picture).
SCREENSHOT_ENV = "DEX_AGENTS_WEB_SCREENSHOT"
WAIT_MS = 30_000
expect.set_options(timeout=WAIT_MS)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def base_url(module_harness: MatrixHarness) -> AsyncIterator[str]:
    app = create_agent_web_app(
        module_harness.sessions, timings=EventStreamTimings(long_poll_seconds=2, settle_seconds=1)
    )
    async with serve(app) as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing; ci.sh installs Debian's chromium package")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 900, "height": 900})
    opened = await context.new_page()
    opened.set_default_timeout(WAIT_MS)
    yield opened
    await context.close()


async def test_a_turn_streams_an_approval_is_granted_and_a_killed_worker_is_survived(
    harness: MatrixHarness, base_url: str, page: Page
) -> None:
    session = harness.stack.new_session_id("page-approve")
    read = harness.call(harness.tools.read, "lookup-1")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session,
        [
            ScriptedResponse(text="Let me look up A-1.", tool_calls=(read, write)),
            ScriptedResponse(
                text="Refunded; checking the ledger.",
                partial_text="Working on it... ",
                gate="answer",
                tool_calls=(harness.call(harness.tools.read, "lookup-2", gate="ledger"),),
            ),
            ScriptedResponse(text="Refunded order A-1."),
        ],
    )
    await harness.sessions.start_session(session)
    await page.goto(f"{base_url}/sessions/{session}")
    await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    await page.fill("#message", "Please refund A-1")
    await page.click("#send")

    approval = page.locator('[data-interrupt-id="refund-1"]')
    await expect(page.locator("[data-live] .bubble").first).to_contain_text("Let me look up A-1.")
    await expect(page.locator('[data-tool-call-id="lookup-1"]')).to_have_attribute("data-status", "succeeded")
    await expect(page.locator('[data-tool-call-id="refund-1"]')).to_have_attribute(
        "data-status", "awaiting_approval"
    )
    await expect(page.locator('[data-tool-call-id="refund-1"] .effect')).to_have_text("non idempotent write")
    if screenshot := os.environ.get(SCREENSHOT_ENV):
        await page.screenshot(path=screenshot)
    await approval.locator('[data-action="approve"]').click()

    # The second model call streams, and its Worker dies mid-call: the text shows live while it waits.
    gate = harness.stack.gate(session, "answer")
    await gate.wait_until_reached()
    live = page.locator("[data-live]").last
    await expect(live).to_contain_text("Working on it...")
    await harness.replace_worker()
    # The retry streams the same start again: the page keeps only the new attempt's text, once.
    ledger = harness.stack.gate(session, "ledger")
    await ledger.wait_until_reached()
    await expect(live.locator(".text")).to_have_text("Working on it... Refunded; checking the ledger.")
    await expect(live).to_have_attribute("data-attempt", "2")
    await expect(page.locator('[data-tool-call-id="lookup-2"]')).to_be_visible()
    await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    ledger.release()
    await expect(page.locator('.msg[data-role="assistant"]').last).to_have_text("Refunded order A-1.")
    await wait_for_turn_end(harness.sessions, session, 1)
    await expect(page.locator("#status")).to_have_attribute("data-status", "waiting_for_user_message")
    await expect(page.locator("[data-live]")).to_have_count(0)
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1

    # A reload rebuilds the whole conversation from the snapshot.
    await page.reload()
    await expect(page.locator('.msg[data-role="user"]')).to_have_text(["Please refund A-1"])
    await expect(page.locator('.msg[data-role="assistant"]')).to_have_text(
        ["Let me look up A-1.", "Refunded; checking the ledger.", "Refunded order A-1."]
    )
    await expect(page.locator('[data-tool-call-id="refund-1"] [data-output]')).to_contain_text("refund_order")
    await expect(page.locator("#connection")).to_have_attribute("data-state", "live")


async def test_a_reload_mid_turn_replays_its_live_text_and_a_rejection_shows_the_reaction(
    harness: MatrixHarness, base_url: str, page: Page
) -> None:
    session = harness.stack.new_session_id("page-reject")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session,
        [
            ScriptedResponse(text="I can refund A-1.", tool_calls=(write,)),
            ScriptedResponse(text="Understood, no refund."),
        ],
    )
    await harness.sessions.start_session(session, "Refund A-1")
    await page.goto(f"{base_url}/sessions/{session}")
    card = page.locator('[data-interrupt-id="refund-1"]')
    await expect(card).to_be_visible()
    # Reloaded while the turn waits: the turn's live text comes back from the events, the approval from
    # the snapshot.
    await page.reload()
    await expect(page.locator("[data-live] .text")).to_have_text(["I can refund A-1."])
    await card.locator('[data-field="rejection-message"]').fill("The customer changed their mind")
    await card.locator('[data-action="reject"]').click()
    await expect(page.locator('.msg[data-role="assistant"]').last).to_have_text("Understood, no refund.")
    await expect(page.locator('[data-tool-call-id="refund-1"] [data-output]')).to_contain_text(
        "The customer changed their mind"
    )
    assert not harness.tool_runs(session, harness.tools.approval_write)
    assert "The customer changed their mind" in harness.model_calls(session)[-1].model_input_text
