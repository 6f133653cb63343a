"""The Stepwise agents of the core's tests, as the test process and the Worker children build them.

Every agent is a real `StepwiseRunner` whose model is the scripted LiteLLM provider of
`dex_agents.testing.stepwise`, so each model call goes through ``litellm.acompletion(stream=True)``.
"""

from datetime import timedelta
from pathlib import Path

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    CompactionPolicy,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.mcp import McpStdioServer, McpToolSource
from dex_agents.stepwise import AgentDefinition, StepwiseRunner, TurnContinuation, TurnContinuationContext
from dex_agents.testing import MATRIX_TOOLS, MatrixSpec, mcp_inventory_server_command, with_model_call_scope
from dex_agents.testing.stepwise import scripted_model
from tests.long_session_agents import TINY_STORAGE

CORE_DIR = Path(__file__).resolve().parents[1]

KEEP_GOING = "Keep going."
"""The continuation the restless agent asks for after every draft."""


def build_matrix_runner() -> StepwiseRunner:
    """The matrix's tools as plain functions; the matrix's session options give them their policies."""
    definition = AgentDefinition(
        name="order-desk",
        model=scripted_model(),
        instructions="You handle orders: look them up, send receipts, refund and cancel them.",
        tools=list(MATRIX_TOOLS),
    )
    return StepwiseRunner(definition)


SPEC = MatrixSpec(
    build_runner=build_matrix_runner,
    worker_module="tests.stepwise_worker",
    flow_type_prefix="Stepwise",
    worker_cwd=CORE_DIR,
    approval_deadline=timedelta(seconds=4),
    unknown_tool_message="unknown tool 'launch_rocket'",
    supports_turn_control=True,
    supports_built_in_tools=True,
)


def continue_after_drafts(context: TurnContinuationContext) -> TurnContinuation | None:
    """Ask for more after every answer that calls itself a draft, however often that happens."""
    return TurnContinuation(KEEP_GOING) if "draft" in context.answer.lower() else None


def restless_writer() -> StepwiseRunner:
    """An agent whose continuation hook never tires of drafts, to hit the limit of continuations."""
    definition = AgentDefinition(
        name="restless-writer",
        model=scripted_model(),
        instructions="Write, then improve what you wrote.",
        decide_turn_continuation=continue_after_drafts,
    )
    return StepwiseRunner(definition)


def build_continuation_flow() -> AgentSessionFlow:
    """The restless writer as a session."""
    return AgentSessionFlow(with_model_call_scope(restless_writer()), flow_type="StepwiseRestless")


class ContractOnlyRunner:
    """Offers only the three required runner methods of the runner it wraps, none of the optional ones."""

    def __init__(self, runner: StepwiseRunner) -> None:
        self._runner = runner

    def build_user_message(self, text: str) -> FrameworkMessage:
        return self._runner.build_user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        return await self._runner.run_model_step(turn)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return await self._runner.execute_deferred_tool_call(call)


def build_builderless_flow() -> AgentSessionFlow:
    """The restless writer behind a runner without ``build_unfinished_turn_messages``."""
    runner = with_model_call_scope(ContractOnlyRunner(restless_writer()))
    return AgentSessionFlow(runner, flow_type="StepwiseBuilderless")


#: The compacting agent's instructions and summary instructions, short so the token figures stay readable.
ANSWER_INSTRUCTIONS = "Answer each question."
SUMMARY_INSTRUCTIONS = "Summarize the conversation."


def build_compacting_flow() -> AgentSessionFlow:
    """An agent in a session with a 1,000-token window (a token per 4 characters for the scripted model),
    tiny message storage so the summarized messages sit in chunks, and retention that keeps four messages.
    """
    definition = AgentDefinition(
        name="long-talker",
        model=scripted_model(),
        instructions=ANSWER_INSTRUCTIONS,
        summary_instructions=SUMMARY_INSTRUCTIONS,
    )
    options = AgentSessionOptions(
        **TINY_STORAGE,  # pyright: ignore[reportArgumentType]
        retained_message_limit=4,
        compaction=CompactionPolicy(context_window_tokens=1000),
    )
    return AgentSessionFlow(
        with_model_call_scope(StepwiseRunner(definition)), flow_type="StepwiseCompacting", options=options
    )


def stepwise_mcp_log(state_dir: Path) -> Path:
    """The request log of the inventory MCP server the Stepwise MCP agent starts."""
    return state_dir / "stepwise-mcp-requests.log"


def build_mcp_flow(state_dir: Path) -> AgentSessionFlow:
    """An agent whose tools are the kit's inventory MCP server's, through an `McpToolSource` (stdio).

    The server's annotations give ``count_items`` ``read`` and ``reserve_stock`` ``idempotent_write``; this
    Worker wants each reservation approved. Building it contacts no server.
    """
    command = mcp_inventory_server_command(stepwise_mcp_log(state_dir))
    inventory = McpStdioServer(
        "inventory",
        command.command,
        command.args,
        env=command.env,
        trust_annotations=True,
        tool_policies={"reserve_stock": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)},
    )
    definition = AgentDefinition(
        name="stock-keeper",
        model=scripted_model(),
        instructions="You keep the stock.",
        tools=[McpToolSource([inventory])],
    )
    return AgentSessionFlow(with_model_call_scope(StepwiseRunner(definition)), flow_type="StepwiseMcp")
