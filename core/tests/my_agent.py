"""The agent of "A first test" in docs/pages/how-to/test-an-adapter.md: a refund agent, scripted."""

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.testing import ScriptedResponse, ScriptedRunner, ScriptedToolCall

# Every session of this agent asks to refund order 7, which needs approval, then confirms.
REFUND_SCRIPT = [
    [
        ScriptedResponse(tool_calls=(ScriptedToolCall("refund_order", {"order_id": "7"}, "refund-7"),)),
        ScriptedResponse(text="Order 7 is refunded."),
    ]
]


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        ScriptedRunner(default_turns=REFUND_SCRIPT),
        flow_type="ReadmeRefundAgent",
        options=AgentSessionOptions(
            tool_policies={"refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
        ),
    )
