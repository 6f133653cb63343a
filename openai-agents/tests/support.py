"""Framework-level test helpers: a scripted SDK model that records what each call saw.

The framework tests drive `OpenAIAgentsRunner` the way the session does with `dex_agents.testing`'s
`SessionSide` (stored messages in, outcomes out, final tool call records on resume), without a server, so
each framework behaviour is checked on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from agents import TResponseInputItem
from agents.items import TResponseOutputItem

from dex_agents_openai_agents.testing import ScriptedAnswer, ScriptedResponsesModel


@dataclass
class ScriptedModel:
    """An SDK model answering one scripted output per call, recording each call's input and tools."""

    answers: list[Sequence[TResponseOutputItem]]
    seen: list[list[TResponseInputItem]] = field(default_factory=list[list[TResponseInputItem]])
    offered_tools: list[list[str]] = field(default_factory=list[list[str]])

    @property
    def model(self) -> ScriptedResponsesModel:
        return ScriptedResponsesModel(self._answer)

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def _answer(self, items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
        self.seen.append(list(items))
        self.offered_tools.append(list(offered))
        if len(self.seen) > len(self.answers):
            raise AssertionError(f"unexpected model call #{len(self.seen)}")
        return ScriptedAnswer(self.answers[len(self.seen) - 1], input_tokens=100, output_tokens=7)

    def outputs_seen(self, call_number: int) -> dict[str, str]:
        """The tool outputs in the input of model call ``call_number`` (one-based), by call ID."""
        outputs: dict[str, str] = {}
        for raw in self.seen[call_number - 1]:
            item = cast(Mapping[str, Any], raw)
            if item.get("type") == "function_call_output":
                outputs[str(item["call_id"])] = str(item["output"])
        return outputs
