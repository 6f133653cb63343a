"""A traced session's `chat` spans carry the model call metadata the Claude Code CLI streamed.

The traced agent (`tests.feature_agents`) writes every span its Worker emits to a file. One `RunModel` is
one CLI run: the first makes two model calls (a read runs inline between them), so its `chat` span is
INTERNAL without usage; the resumed one makes a single call, so its span is CLIENT with usage. Both name
the request model and carry the last response's model, ID and stop reason.
"""

from __future__ import annotations

import pytest
from dex_agents.testing import ScriptedResponse, ScriptedToolCall, wait_for_turn_end, wait_until
from dex_agents.testing.otel_spans import ExportedSpan, read_exported_spans

from tests.conftest import Features
from tests.feature_agents import SPAN_FILE
from tests.scripted_claude import BASE_OPTIONS

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_chat_spans_carry_the_model_call_metadata(features: Features) -> None:
    stack, sessions = features.stack, features.traced
    session = stack.new_session_id("traced")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1", output="A-1 shipped")
    receipt = ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-1", output="receipt sent")
    stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(read,)),
                ScriptedResponse(tool_calls=(receipt,)),
                ScriptedResponse(text="Shipped; receipt sent."),
            ]
        ],
    )
    await sessions.start_session(session, "Where is A-1? Send me the receipt.")
    done = await wait_for_turn_end(sessions, session, 1, timeout=90)
    assert done.state is not None and done.state.last_turn_error is None, done.state

    span_file = stack.state_dir / SPAN_FILE

    def chat_spans() -> list[ExportedSpan] | None:
        spans = [span for span in read_exported_spans(span_file, session) if span.name.startswith("chat")]
        return spans if len(spans) == 2 else None

    first, resumed = await wait_until("two chat spans", chat_spans, timeout=30)
    model = BASE_OPTIONS.model
    for span in (first, resumed):
        assert span.name == f"chat {model}"
        assert span.attributes["gen_ai.request.model"] == model
        # The scripted API answers as the model it was asked for, with IDs msg_scripted_<n>.
        assert span.attributes["gen_ai.response.model"] == model
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
        assert str(span.attributes["gen_ai.response.id"]).startswith("msg_scripted_")
    assert first.attributes["gen_ai.response.id"] != resumed.attributes["gen_ai.response.id"]
    # Two model calls in one CLI run: no single call to describe, so INTERNAL and no usage.
    assert first.kind == "INTERNAL" and "gen_ai.usage.input_tokens" not in first.attributes
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert resumed.kind == "CLIENT" and resumed.attributes["gen_ai.usage.output_tokens"] == 5
    assert resumed.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
