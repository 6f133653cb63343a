"""The framework run state a turn keeps while its tool calls run.

Usually it holds the SDK's own `RunState` as JSON text, which also names the current agent after a
handoff. When the SDK aborted the run because the model called a tool the agent does not have, there is
no `RunState` to keep; the turn then keeps its own items up to the response's tool calls, and the next
model call starts a fresh SDK run from them with every recorded result appended.

Either way the run's input is kept as a `TurnInput`: the stored messages it starts with are counted,
not copied, so the run state holds the turn's own items and does not grow with the conversation. The
items the run added are kept as input items too, so a turn that ends without an answer (steered,
cancelled or failed) stores them without restoring the SDK run.

The state travels in the `dex_agents.RunStateFormat` envelope ``dex-agents-openai-agents/run-state``,
version 3; versions 1 and 2 were written as the formats ``dex-agents-openai-agents/1`` and ``/2``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from agents import TResponseInputItem
from dex_agents import RunStateFormat, RunStateFormatError

__all__ = ["RUN_STATE_FORMAT", "OpenAIAgentsRunState", "TurnInput"]

RUN_STATE_FORMAT = RunStateFormat("dex-agents-openai-agents/run-state", 3, "OpenAIAgentsRunner")
"""The envelope of the run state this release writes and reads."""

_EARLIER_FORMATS = ("dex-agents-openai-agents/1", "dex-agents-openai-agents/2")


def _plain(items: Sequence[TResponseInputItem]) -> list[Any]:
    return json.loads(json.dumps(list(items)))


@dataclass(frozen=True)
class TurnInput:
    """What an SDK run of the turn takes as input, without repeating the stored conversation.

    The input is the first ``history_message_count`` stored messages, then ``input_items``, then
    ``turn_items`` from ``turn_items_in_input_from`` on. The stored messages do not change while a turn
    runs, so they are put back from the session instead of being kept.

    Attributes:
        history_message_count: How many stored messages the input starts with.
        input_items: The input a handoff input filter rewrote (then ``history_message_count`` is 0);
            empty while the input is the stored conversation.
        turn_items: The turn's items that the SDK run does not hold itself, in order: items of earlier
            runs of the turn (after an unknown tool). They are stored as the turn's first messages.
        turn_items_in_input_from: The first of ``turn_items`` the input shows as it is; the ones before
            it are in ``input_items`` in the form the filter gave them.
    """

    history_message_count: int
    input_items: Sequence[TResponseInputItem] = ()
    turn_items: Sequence[TResponseInputItem] = ()
    turn_items_in_input_from: int = 0

    def run_input(self, history: Sequence[TResponseInputItem]) -> list[TResponseInputItem]:
        """Return the run's input items, given the stored conversation.

        Raises:
            ValueError: If the session has fewer stored messages than the input starts with.
        """
        if len(history) < self.history_message_count:
            raise ValueError("the session has fewer stored messages than the run state started from")
        return [
            *history[: self.history_message_count],
            *self.input_items,
            *self.turn_items[self.turn_items_in_input_from :],
        ]

    def after_run(self, given: Sequence[TResponseInputItem], used: Sequence[TResponseInputItem]) -> TurnInput:
        """Return the turn input once an SDK run given ``given`` went on with ``used`` as its input.

        The two differ when a handoff input filter rewrote the input; the next run must start from the
        rewrite, which then has to be kept as it is.
        """
        if _plain(used) == _plain(given):
            return self
        return TurnInput(0, tuple(used), self.turn_items, len(self.turn_items))

    def with_turn_items(self, items: Sequence[TResponseInputItem]) -> TurnInput:
        """Return this input with ``items`` appended to the turn's items."""
        return replace(self, turn_items=(*self.turn_items, *items))

    def to_data(self) -> dict[str, Any]:
        """Return the input as a JSON object."""
        return {
            "history_message_count": self.history_message_count,
            "input_items": list(self.input_items),
            "turn_items": list(self.turn_items),
            "turn_items_in_input_from": self.turn_items_in_input_from,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TurnInput:
        """Parse an object written by `to_data`."""
        return cls(
            history_message_count=int(data["history_message_count"]),
            input_items=tuple(cast(list[TResponseInputItem], data["input_items"])),
            turn_items=tuple(cast(list[TResponseInputItem], data["turn_items"])),
            turn_items_in_input_from=int(data["turn_items_in_input_from"]),
        )


@dataclass(frozen=True)
class OpenAIAgentsRunState:
    """What `RunModel` stores between a model call and the next one of the same turn.

    Attributes:
        kind: `"run_state"` for an SDK `RunState`, `"items"` after the SDK aborted on an unknown tool.
        turn_input: The run's input, and the turn's items the SDK run does not hold (kind `items`: every
            item of the turn up to the response's tool calls).
        run_state: The SDK's `RunState` JSON text without its input, which ``turn_input`` gives back
            (kind `run_state`).
        run_items: The items the SDK run added after its input, up to the response's tool calls, as the
            SDK hands them to a next run (kind `run_state`; empty for kind `items`, whose items are all
            in ``turn_input``).
        agent_name: The agent that made the model call (kind `items`).
        pending_call_ids: The tool calls whose results the next model call needs (kind `items`).
    """

    kind: Literal["run_state", "items"]
    turn_input: TurnInput = field(default_factory=lambda: TurnInput(0))
    run_state: str | None = None
    run_items: Sequence[TResponseInputItem] = ()
    agent_name: str | None = None
    pending_call_ids: Sequence[str] = ()

    @property
    def unstored_items(self) -> list[TResponseInputItem]:
        """The turn's items the session has not stored, in order; the last response's calls lack outputs."""
        return [*self.turn_input.turn_items, *self.run_items]

    def to_json(self) -> str:
        """Return the state as JSON text in the `RUN_STATE_FORMAT` envelope."""
        fields: dict[str, Any] = {"kind": self.kind, "turn_input": self.turn_input.to_data()}
        if self.kind == "run_state":
            fields["run_state"] = json.loads(self.run_state or "{}")
            fields["run_items"] = list(self.run_items)
        else:
            fields["agent_name"] = self.agent_name
            fields["pending_call_ids"] = list(self.pending_call_ids)
        return RUN_STATE_FORMAT.wrap(fields)

    @classmethod
    def from_json(cls, text: str) -> OpenAIAgentsRunState:
        """Parse a state written by `to_json`.

        Raises:
            RunStateFormatError: If the text is not JSON, another runner's state, or a state of an
                earlier release of this adapter.
            ValueError: If the state has an unknown kind.
        """
        _refuse_earlier_release(text)
        data = RUN_STATE_FORMAT.unwrap(text)
        turn_input = TurnInput.from_data(cast(Mapping[str, Any], data["turn_input"]))
        if data.get("kind") == "run_state":
            return cls(
                kind="run_state",
                turn_input=turn_input,
                run_state=json.dumps(data["run_state"], separators=(",", ":")),
                run_items=tuple(cast(list[TResponseInputItem], data["run_items"])),
            )
        if data.get("kind") == "items":
            return cls(
                kind="items",
                turn_input=turn_input,
                agent_name=cast(str, data["agent_name"]),
                pending_call_ids=tuple(cast(list[str], data["pending_call_ids"])),
            )
        raise ValueError(f"unknown framework run state kind {data.get('kind')!r}")


def _refuse_earlier_release(text: str) -> None:
    """Name an earlier release's state as such; the envelope would call it another runner's."""
    try:
        loaded: object = json.loads(text)
    except json.JSONDecodeError:
        return  # the envelope explains text that is not JSON
    found = cast(Mapping[str, Any], loaded).get("format") if isinstance(loaded, Mapping) else None
    if found in _EARLIER_FORMATS:
        raise RunStateFormatError(
            f"the framework run state has the format {found!r} of an earlier release of "
            f"dex-agents-openai-agents; this release reads version {RUN_STATE_FORMAT.version} of "
            f"{RUN_STATE_FORMAT.name!r}, so the turn cannot continue (send the message again)"
        )
