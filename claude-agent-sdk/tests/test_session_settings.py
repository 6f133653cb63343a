"""Session settings choose each turn's model and add to its system prompt, in a real devserver session.

The settings agent's scripted API answers every model call with the model and the last system prompt block
it received, so each turn's answer shows what the CLI really sent.
"""

from __future__ import annotations

import pytest
from dex_agents.testing import wait_for_turn_end

from tests.conftest import Features

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_update_session_settings_changes_the_next_turns_model_and_system_prompt(
    features: Features,
) -> None:
    sessions = features.settings
    session = features.stack.new_session_id("settings")
    await sessions.start_session(session, "Hi", session_settings={"model": "small"})
    first = await wait_for_turn_end(sessions, session, 1)
    assert first.messages[-1].text == "claude-small model; system: You are the order desk."

    assert await sessions.update_session_settings(session, {"model": "large", "tone": "formal"})
    assert await sessions.send_user_message(session, "Hello again")
    second = await wait_for_turn_end(sessions, session, 2)
    # The same CLI conversation, resumed: the new model, and the prompt rebuilt with the instructions.
    assert second.messages[-1].text == (
        "claude-large model; system: You are the order desk.\n\nAnswer in a formal tone."
    )

    # A model name the hook does not know ends the turn saying so; the session then takes a normal turn.
    assert await sessions.update_session_settings(session, {"model": "huge"})
    assert await sessions.send_user_message(session, "And now?")
    refused = await wait_for_turn_end(sessions, session, 3)
    assert refused.state is not None
    assert refused.state.last_turn_error == (
        "the session settings chose no usable model or instructions: KeyError: 'huge'"
    )
    assert await sessions.update_session_settings(session, {})
    assert await sessions.send_user_message(session, "Plain?")
    plain = await wait_for_turn_end(sessions, session, 4)
    assert plain.state is not None and plain.state.last_turn_error is None
    # No settings: the options' own model, and the instructions of turn 2 are gone from the prompt.
    assert plain.messages[-1].text == "claude-default model; system: You are the order desk."
