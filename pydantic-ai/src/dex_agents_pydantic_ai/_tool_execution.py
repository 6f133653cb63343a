"""Runs one deferred tool call through Pydantic AI's own tool pipeline.

A tool Step has the call's name, ID and arguments, but no Pydantic AI run. Rather than calling the tool
function directly (and skipping argument validation, `prepare` functions, capability hooks and
`RunContext`), the runner starts a short agent run whose history is that one call, approves it with
`DeferredToolResults`, and stops before the next model request. Pydantic AI validates the arguments and
runs the tool exactly as it would inside `Agent.run`. The run's model is a stand-in that refuses every
request, so a tool Step needs no provider credentials and can never call a model.

Arguments nested deeper than `MAX_JSON_NESTING_DEPTH` fail before Pydantic AI sees them, with the core's
text, as in every adapter. (Pydantic AI's own parser stops a level later and then hands its validator
``{"INVALID_JSON": <text>}``, which fails as an unexpected argument.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Generic, cast

from dex_agents import ToolExecutionError
from dex_agents.limits import MAX_JSON_NESTING_DEPTH
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRequestNode,
    ToolApproved,
    UserError,
)
from pydantic_ai.messages import BaseToolReturnPart, ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import AgentDepsT
from pydantic_graph import End

__all__ = ["TOOL_STEP_MODEL_NAME", "ToolCallRunner", "json_nesting_depth"]

TOOL_STEP_MODEL_NAME = "dex-tool-step"
"""The name of the stand-in model a tool's `RunContext.model` shows in a tool Step."""


def _refuse_model_request(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    del messages, info
    raise RuntimeError("a Dex tool Step never calls the model; this is a bug in dex-agents-pydantic-ai")


async def _refuse_streamed_model_request(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    _refuse_model_request(messages, info)
    yield ""  # pragma: no cover - unreachable; makes this an async generator


class ToolCallRunner(Generic[AgentDepsT]):
    """Runs approved tool calls of one agent, one call per `run` call.

    Args:
        agent: The user's agent, whose toolsets hold the tools.
        deps: The dependencies tools receive in `RunContext.deps`.
    """

    def __init__(self, agent: Agent[AgentDepsT, Any], *, deps: AgentDepsT) -> None:
        self._agent = agent
        self._deps = deps
        self._model = FunctionModel(
            _refuse_model_request,
            stream_function=_refuse_streamed_model_request,
            model_name=TOOL_STEP_MODEL_NAME,
        )

    async def run(self, *, tool_name: str, tool_call_id: str, arguments: str) -> str:
        """Run one tool call once and return the text the model sees.

        Args:
            tool_name: The tool's name as the model called it.
            tool_call_id: The call's ID.
            arguments: The call's arguments as JSON text.

        Returns:
            The tool's result as text.

        Raises:
            ToolExecutionError: When Pydantic AI would show the model an error instead of a result: the
                arguments do not validate, the tool raised `ModelRetry` or `ToolFailed`, or no tool has
                this name. Any other exception the tool raises propagates unchanged, so the session
                retries or records the call by its effect.
        """
        brackets = arguments.count("[") + arguments.count("{")
        if brackets > MAX_JSON_NESTING_DEPTH and json_nesting_depth(arguments) > MAX_JSON_NESTING_DEPTH:
            raise ToolExecutionError(
                f"the arguments of {tool_name!r} nest too deeply: arrays and objects nest more than "
                f"{MAX_JSON_NESTING_DEPTH} levels deep"
            )
        call = ToolCallPart(tool_name, arguments, tool_call_id=tool_call_id)
        history: Sequence[ModelMessage] = [ModelResponse(parts=[call])]
        approval = DeferredToolResults(approvals={tool_call_id: ToolApproved()})
        async with self._agent.iter(
            message_history=history, deferred_tool_results=approval, deps=self._deps, model=self._model
        ) as run:
            node = run.next_node
            # The approved call runs in the first CallToolsNode; the run stops at the model request that
            # would follow, so no model call ever happens here.
            while not isinstance(node, (ModelRequestNode, End)):
                try:
                    node = await run.next(node)
                except UserError as error:
                    # Pydantic AI refuses the call itself, for example a tool that raised `CallDeferred`
                    # in an agent without `DeferredToolRequests` output; every attempt would repeat it.
                    raise ToolExecutionError(
                        f"Pydantic AI could not run tool {tool_name!r}: {error}"
                    ) from error
            if isinstance(node, End):
                output = cast(object, node.data.output)
                if isinstance(output, DeferredToolRequests):
                    raise ToolExecutionError(
                        f"tool {tool_name!r} deferred its own call (CallDeferred or ApprovalRequired); "
                        "a tool that runs in a Dex tool Step must return its result"
                    )
                raise ToolExecutionError(
                    f"tool {tool_name!r} ended the agent run instead of returning a result"
                )
            request = node.request
        for part in request.parts:
            if isinstance(part, BaseToolReturnPart) and part.tool_call_id == tool_call_id:
                text = part.model_response_str(wrap_if_error=False)
                # Every other outcome (failed, retried, denied, interrupted) reaches the model as an error.
                if part.outcome != "success":
                    raise ToolExecutionError(text)
                return text
        raise ToolExecutionError(
            f"Pydantic AI returned no result for tool call {tool_call_id!r} of {tool_name!r}"
        )


def json_nesting_depth(text: str) -> int:
    """Return how deep the arrays and objects of JSON text nest, counting no bracket inside a string.

    A scan without recursion or parsing, so no depth makes it fail; for text that is not JSON the count
    is only an estimate.
    """
    depth = deepest = 0
    in_string = escaped = False
    for character in text:
        if in_string:
            if escaped:
                escaped = False
            elif character == "\\":
                escaped = True
            elif character == '"':
                in_string = False
        elif character == '"':
            in_string = True
        elif character in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif character in "]}":
            depth -= 1
    return deepest
