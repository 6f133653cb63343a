"""The framework run state a turn keeps while its tool calls run.

Between a model call that asked for tools and the next one, the session stores this text in
`FrameworkRunState`. It holds only what the stored messages do not: the Pydantic AI messages this turn
produced so far (the user message is already stored), ending with the response whose tool calls wait,
and the output tool calls of that response, which Pydantic AI processes itself when the turn resumes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from dex_agents import RunStateFormat, RunStateFormatError
from pydantic_ai.messages import ModelMessage, ModelResponse

from dex_agents_pydantic_ai._messages import decode_messages, encode_messages

__all__ = ["RUN_STATE_FORMAT", "PydanticAiRunState"]

RUN_STATE_FORMAT = RunStateFormat("dex-agents-pydantic-ai/run-state", 1, "PydanticAiRunner")
"""The run state's envelope: its name, so another runner's state fails clearly, and its version."""


@dataclass(frozen=True)
class PydanticAiRunState:
    """A turn between a model call that asked for tools and the model call that continues it.

    Attributes:
        turn_messages: The Pydantic AI messages this turn produced after its user message; the last one
            is the `ModelResponse` whose tool calls the session runs.
        output_tool_call_ids: Calls of that response to the agent's output tools. They are not tool
            Steps: Pydantic AI validates them itself when the turn resumes.
    """

    turn_messages: Sequence[ModelMessage]
    output_tool_call_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.turn_messages or not isinstance(self.turn_messages[-1], ModelResponse):
            raise ValueError("a Pydantic AI run state must end with the model response whose tool calls wait")

    @property
    def pending_response(self) -> ModelResponse:
        """The response whose tool calls the session runs."""
        return cast(ModelResponse, self.turn_messages[-1])

    def to_json(self) -> str:
        """Return the run state as the JSON text the session stores."""
        return RUN_STATE_FORMAT.wrap(
            {
                "output_tool_call_ids": list(self.output_tool_call_ids),
                "turn_messages": json.loads(encode_messages(self.turn_messages)),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> PydanticAiRunState:
        """Read a run state written by `to_json`.

        Args:
            text: The stored `FrameworkRunState`.

        Returns:
            The run state.

        Raises:
            dex_agents.RunStateFormatError: If the text is not a run state of this runner and version, or
                its fields are damaged.
        """
        fields: dict[str, Any] = RUN_STATE_FORMAT.unwrap(text)
        try:
            return cls(
                turn_messages=decode_messages(json.dumps(fields["turn_messages"])),
                output_tool_call_ids=tuple(
                    str(tool_call_id) for tool_call_id in fields["output_tool_call_ids"]
                ),
            )
        except (KeyError, TypeError, ValueError) as error:  # pydantic's ValidationError is a ValueError
            raise RunStateFormatError(
                f"the framework run state of PydanticAiRunner is damaged, the turn cannot go on: {error}"
            ) from error
