"""The framework run state a turn keeps while its tool calls run.

Usually it is the SDK's own `RunState` as JSON text, which also names the current agent after a handoff.
When the SDK aborted the run because the model called a tool the agent does not have, there is no
`RunState` to keep; the turn then keeps the run's input items plus the response's tool calls, and the
next model call starts a fresh SDK run from them with every recorded result appended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from agents import TResponseInputItem

__all__ = ["OpenAIAgentsRunState"]

_FORMAT = "dex-agents-openai-agents/1"


@dataclass(frozen=True)
class OpenAIAgentsRunState:
    """What `RunModel` stores between a model call and the next one of the same turn.

    Attributes:
        kind: `"run_state"` for an SDK `RunState`, `"items"` after the SDK aborted on an unknown tool.
        run_state: The SDK's `RunState` JSON text (kind `run_state`).
        items: The run's input items, ending with the response's tool calls (kind `items`).
        agent_name: The agent that made the model call (kind `items`).
        pending_call_ids: The tool calls whose results the next model call needs (kind `items`).
        history_message_count: When set, the `RunState`'s input was the first this many stored messages
            and is left out of ``run_state``; resuming puts them back from the session's messages, which
            do not change while a turn runs. This keeps the run state from repeating the conversation.
    """

    kind: Literal["run_state", "items"]
    run_state: str | None = None
    items: Sequence[TResponseInputItem] = ()
    agent_name: str | None = None
    pending_call_ids: Sequence[str] = ()
    history_message_count: int | None = None

    def to_json(self) -> str:
        """Return the state as JSON text."""
        data: dict[str, Any] = {"format": _FORMAT, "kind": self.kind}
        if self.kind == "run_state":
            data["run_state"] = json.loads(self.run_state or "{}")
            if self.history_message_count is not None:
                data["history_message_count"] = self.history_message_count
        else:
            data["items"] = list(self.items)
            data["agent_name"] = self.agent_name
            data["pending_call_ids"] = list(self.pending_call_ids)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> OpenAIAgentsRunState:
        """Parse a state written by `to_json`.

        Raises:
            ValueError: If the text is not a state of this adapter.
        """
        try:
            loaded: object = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"the framework run state is not JSON: {error}") from error
        if not isinstance(loaded, Mapping) or cast(Mapping[str, Any], loaded).get("format") != _FORMAT:
            raise ValueError("the framework run state was not written by dex-agents-openai-agents")
        data = cast(Mapping[str, Any], loaded)
        if data.get("kind") == "run_state":
            count = data.get("history_message_count")
            return cls(
                kind="run_state",
                run_state=json.dumps(data["run_state"], separators=(",", ":")),
                history_message_count=count if isinstance(count, int) else None,
            )
        if data.get("kind") == "items":
            return cls(
                kind="items",
                items=tuple(cast(list[TResponseInputItem], data["items"])),
                agent_name=cast(str, data["agent_name"]),
                pending_call_ids=tuple(cast(list[str], data["pending_call_ids"])),
            )
        raise ValueError(f"unknown framework run state kind {data.get('kind')!r}")
