"""Stepwise: the core's own agent loop on LiteLLM, for agents written without a framework.

Define the agent with `AgentDefinition` (model, instructions, tools with effects, hooks) and register
``AgentSessionFlow(StepwiseRunner(definition), flow_type=...)`` like any adapter's runner. Each `RunModel`
makes one streaming ``litellm.acompletion`` call, and each tool call runs in its own Step.

Needs the ``stepwise`` extra (``pip install "dex-agents[stepwise]"``); ``import dex_agents`` never loads
LiteLLM. The test kit's `stepwise` module has a scripted model that plugs into LiteLLM as a custom provider.
The runner compacts (`dex_agents.ContextCompactionRunner`), and `dex_agents.mcp.McpToolSource` is a tool
source as it is: ``AgentDefinition(tools=[lookup_order, McpToolSource([...])])``. It offers the session's
built-in tools, supports plan mode (``AgentDefinition.planning_tool_choice``), lets function tools ask the
user (`dex_agents.ask_user_input`) and start tasks (`dex_agents.start_tool_task`, polled by a
`dex_agents.ToolTaskHandler`), polls MCP tasks, and reports `dex_agents.ModelCallMetadata` for tracing.
"""

from dex_agents.stepwise._definition import (
    END_TURN,
    MAX_CONSECUTIVE_CONTINUATIONS,
    AgentDefinition,
    InstructionContext,
    Instructions,
    ModelResolver,
    PlanningToolChoice,
    TurnContinuation,
    TurnContinuationContext,
    TurnContinuationDecider,
    TurnContinuationDecision,
)
from dex_agents.stepwise._litellm import INSTALL_HINT
from dex_agents.stepwise._messages import MISSING_TOOL_RESULT, StepwiseHistoryError
from dex_agents.stepwise._model import (
    LiteLLMModelClient,
    ModelClient,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelToolCall,
    ToolChoice,
)
from dex_agents.stepwise._runner import StepwiseRunner
from dex_agents.stepwise._tools import (
    FunctionTool,
    FunctionToolSource,
    ListedTool,
    ToolDefinition,
    ToolDefinitionError,
    ToolSource,
    function_tool,
)

__all__ = [
    "END_TURN",
    "INSTALL_HINT",
    "MAX_CONSECUTIVE_CONTINUATIONS",
    "MISSING_TOOL_RESULT",
    "AgentDefinition",
    "FunctionTool",
    "FunctionToolSource",
    "InstructionContext",
    "Instructions",
    "ListedTool",
    "LiteLLMModelClient",
    "ModelClient",
    "ModelRequest",
    "ModelResolver",
    "ModelResponse",
    "ModelSettings",
    "ModelToolCall",
    "PlanningToolChoice",
    "StepwiseHistoryError",
    "StepwiseRunner",
    "ToolChoice",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolSource",
    "TurnContinuation",
    "TurnContinuationContext",
    "TurnContinuationDecider",
    "TurnContinuationDecision",
    "function_tool",
]
