"""The chat page in headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright for Python).

One browser for the module (``tests/conftest.py``). The page streams a turn, takes an approval, survives a
Worker killed inside a model call (the retried call's text replaces the dropped attempt's), rebuilds after a
reload, shows the model's reaction to a rejected approval, steers and deletes queued messages, and stops a
turn.

Every wait is for a condition the page or the session shows, with generous deadlines (30 s for each
Playwright wait, 60 s for the session's own), because the machines that run this are shared.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from playwright.async_api import Page, expect

from dex_agents.testing import ScriptedResponse, wait_for_turn_end, wait_until
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.web import EventStreamTimings, create_agent_web_app
from tests.web_support import save_screenshot, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: Waits on the session itself (a gate reached, a turn ended) span Worker restarts and several Steps.
SESSION_WAIT_SECONDS = 60.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def base_url(module_harness: MatrixHarness) -> AsyncIterator[str]:
    app = create_agent_web_app(
        module_harness.sessions,
        allow_any_session=True,
        timings=EventStreamTimings(long_poll_seconds=2, settle_seconds=1),
    )
    async with serve(app) as url:
        yield url


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
    # The app's Content-Security-Policy allows no inline script or style: the page must need none.
    blocked: list[str] = []
    page.on(
        "console",
        lambda message: blocked.append(message.text) if "Content Security Policy" in message.text else None,
    )
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
    await approval.locator('[data-action="approve"]').click()

    # The second model call streams, and its Worker dies mid-call: the text shows live while it waits.
    gate = harness.stack.gate(session, "answer")
    await gate.wait_until_reached(SESSION_WAIT_SECONDS)
    live = page.locator("[data-live]").last
    await expect(live).to_contain_text("Working on it...")
    [killed] = [call for call in harness.model_calls(session) if call.step_execution_id != "RunModel-1"]
    await harness.replace_worker()
    # The retry streams the same start again: the page keeps only the new attempt's text, once.
    ledger = harness.stack.gate(session, "ledger")
    await ledger.wait_until_reached(SESSION_WAIT_SECONDS)
    # Which attempt the retry is depends on the machine: a replacement Worker that registers after the
    # server's dispatch wait costs the retry an attempt. The page must show the one that answered.
    retry = max(
        call.attempt
        for call in harness.model_calls(session)
        if call.step_execution_id == killed.step_execution_id
    )
    assert retry > killed.attempt
    await expect(live.locator(".text")).to_have_text("Working on it... Refunded; checking the ledger.")
    await expect(live).to_have_attribute("data-attempt", str(retry))
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
    assert blocked == []


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


async def test_queued_messages_are_deleted_and_steered_from_the_page_and_the_model_sees_the_steers(
    harness: MatrixHarness, base_url: str, page: Page
) -> None:
    session = harness.stack.new_session_id("page-steer")
    write = harness.tools.approval_write
    harness.script(
        session,
        [ScriptedResponse(text="I can refund A-1.", tool_calls=(harness.call(write, "refund-1"),))],
        [ScriptedResponse(text="Checking A-2 first.", tool_calls=(harness.call(write, "refund-2", "A-2"),))],
        [ScriptedResponse(text="A-3 is on its way.")],
    )
    await harness.sessions.start_session(session, "Refund A-1")
    await page.goto(f"{base_url}/sessions/{session}")
    await expect(page.locator('[data-interrupt-id="refund-1"]')).to_be_visible()
    await expect(page.locator("#stop")).to_be_visible()
    # Messages sent while the turn waits are queued for the next turn, each with its buttons.
    for text in ("Forget this", "Where is A-3?"):
        await page.fill("#message", text)
        await page.click("#send")
    queued = page.locator('.pending[data-kind="queued"]')
    await expect(queued.locator(".bubble")).to_have_text(["Forget this", "Where is A-3?"])
    await expect(queued.locator('[data-action="steer-now"]')).to_have_count(2)
    await save_screenshot(page, "web-chat")
    await queued.filter(has_text="Forget this").locator('[data-action="delete"]').click()
    await expect(queued.locator(".bubble")).to_have_text(["Where is A-3?"])

    # The steer box ends turn 1 at its approval wait, and its text starts turn 2 ahead of the queue.
    await page.fill("#steer-text", "Refund A-2 instead")
    await page.click("#steer")
    await expect(page.locator('[data-interrupt-id="refund-2"]')).to_be_visible()
    refund_1 = page.locator('[data-tool-call-id="refund-1"]')
    await expect(refund_1).to_have_attribute("data-status", "cancelled")
    await expect(refund_1).to_have_attribute("data-cancellation-reason", "steered")
    await expect(page.locator('[data-turn-end="steered"]')).to_have_count(1)
    await expect(queued.locator(".bubble")).to_have_text(["Where is A-3?"])
    # "Steer now" moves the queued message into turn 2, which ends the same way.
    await queued.locator('[data-action="steer-now"]').click()
    await expect(page.locator('.msg[data-role="assistant"]').last).to_have_text("A-3 is on its way.")
    await wait_for_turn_end(harness.sessions, session, 3)
    await expect(page.locator("#status")).to_have_attribute("data-status", "waiting_for_user_message")
    await expect(page.locator(".pending")).to_have_count(0)
    await expect(page.locator("#turn-controls")).to_be_hidden()
    await expect(page.locator('.msg[data-role="user"]')).to_have_text(
        ["Refund A-1", "Refund A-2 instead", "Where is A-3?"]
    )
    await expect(page.locator('.msg[data-role="assistant"]')).to_have_text(
        ["I can refund A-1.", "Checking A-2 first.", "A-3 is on its way."]
    )
    await expect(page.locator('[data-tool-call-id="refund-2"]')).to_have_attribute("data-status", "cancelled")
    await expect(page.locator('[data-turn-end="steered"]')).to_have_count(2)

    assert not harness.tool_runs(session, write)
    [second] = harness.model_calls(session, "turn-2")
    [third] = harness.model_calls(session, "turn-3")
    for call, steered in ((second, "Refund A-2 instead"), (third, "Where is A-3?")):
        assert steered in call.model_input_text, call.model_input_text
        assert "superseded_by_steered_user_message" in call.model_input_text, call.model_input_text
    assert all("Forget this" not in call.model_input_text for call in harness.model_calls(session))

    # After a reload the abandoned calls still show as cancelled, from the stored results.
    await page.reload()
    await expect(refund_1).to_have_attribute("data-status", "cancelled")
    await expect(refund_1.locator(".state")).to_have_text("cancelled: the user steered")


async def test_a_turn_is_stopped_from_the_page_during_a_model_call_and_the_next_turn_works(
    harness: MatrixHarness, base_url: str, page: Page
) -> None:
    session = harness.stack.new_session_id("page-stop")
    harness.script(
        session,
        [ScriptedResponse(partial_text="Thinking about A-1... ", block_until_cancelled=True)],
        [ScriptedResponse(text="Hello again.")],
    )
    await harness.sessions.start_session(session)
    await page.goto(f"{base_url}/sessions/{session}")
    await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    await expect(page.locator("#turn-controls")).to_be_hidden()
    await page.fill("#message", "Where is A-1?")
    await page.click("#send")
    # The model call streamed its start and never answers until it is cancelled.
    await expect(page.locator("[data-live] .text")).to_have_text(["Thinking about A-1..."])
    await page.click("#stop")
    await expect(page.locator('[data-turn-end="cancelled"]')).to_have_text("You stopped this turn.")
    await expect(page.locator("[data-live]")).to_have_count(0)
    await expect(page.locator("#turn-controls")).to_be_hidden()
    await expect(page.locator("#status")).to_have_attribute("data-status", "waiting_for_user_message")
    await wait_until(
        "the model call's coroutine to be cancelled",
        lambda: harness.stack.invocations.cancelled_model_calls(session, "turn-1"),
        SESSION_WAIT_SECONDS,
    )
    stopped = await harness.sessions.get_agent_snapshot(session)
    assert stopped.state is not None and stopped.state.last_turn_error is None, stopped.state
    assert [message.text for message in stopped.messages] == ["Where is A-1?"]

    await page.fill("#message", "Hello?")
    await page.click("#send")
    await expect(page.locator('.msg[data-role="assistant"]').last).to_have_text("Hello again.")
    await expect(page.locator('.msg[data-role="user"]')).to_have_text(["Where is A-1?", "Hello?"])
    done = await wait_for_turn_end(harness.sessions, session, 2)
    assert done.messages[-1].text == "Hello again."
