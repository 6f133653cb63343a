"""The capability that keeps every tool body out of a model Step.

`run_model_step` stops the agent run before Pydantic AI's `CallToolsNode`, so no tool runs there by
construction. `ModelStepToolGate` makes that hold for any path the runner does not foresee (a Pydantic AI
change, a runner regression, a resumed response with a call the session has no result for): it is added
to every model Step's run as the outermost capability, and its `wrap_tool_execute` hook raises
`ToolCallInModelStepError` without calling the handler, so neither the tool nor any other capability's
tool hook runs. A tool Step's run does not have it.

Output tools never reach tool hooks in Pydantic AI (they are internal, like the output functions and
validators they run), so structured output is still processed in the model Step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    CapabilityOrdering,
    ValidatedToolArgs,
    WrapToolExecuteHandler,
)
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition

__all__ = ["ModelStepToolGate", "ToolCallInModelStepError"]


class ToolCallInModelStepError(RuntimeError):
    """Pydantic AI was about to run a tool inside a model Step; the gate stopped it before the tool ran.

    Args:
        tool_name: The tool Pydantic AI was about to run.
        tool_call_id: The call's ID.
    """

    def __init__(self, tool_name: str, tool_call_id: str) -> None:
        super().__init__(
            f"Pydantic AI was about to run tool {tool_name!r} (call {tool_call_id!r}) inside the model "
            "Step; the runner stopped it before it ran, because a tool call runs only in its own Step. "
            "This is a bug in dex-agents-pydantic-ai or a Pydantic AI feature it does not support"
        )
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id


@dataclass
class ModelStepToolGate(AbstractCapability[Any]):
    """Refuses every tool execution in the run it is added to (see the module docstring)."""

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """The gate is added per run by the runner; it is never part of an agent spec."""
        return None

    def get_ordering(self) -> CapabilityOrdering:
        """Wrap every other capability, so no other tool hook runs before the refusal."""
        return CapabilityOrdering(position="outermost")

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Raise `ToolCallInModelStepError` instead of running the tool."""
        del ctx, tool_def, args, handler
        raise ToolCallInModelStepError(call.tool_name, call.tool_call_id)
