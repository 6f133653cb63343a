"""The Flows of the built-in tool, plan mode, question and task tests, as the test and its Worker build them.

``main`` enables every built-in and plan mode; ``deadline`` is the same agent with a short interrupt
deadline and plan mode off, so questions expire and ``plan_mode`` messages are refused.
"""

from dataclasses import dataclass
from datetime import timedelta

from dex_agents import BUILT_IN_TOOL_NAMES, AgentSessionFlow, AgentSessionOptions
from dex_agents.testing import MatrixToolNames, ScriptedRunner

#: The longest durable_wait the test Flows allow.
MAX_WAIT = timedelta(hours=1)
#: The question deadline of the ``deadline`` Flow.
QUESTION_DEADLINE = timedelta(seconds=3)


@dataclass(frozen=True)
class BuiltInFlows:
    main: AgentSessionFlow
    deadline: AgentSessionFlow

    @property
    def all(self) -> tuple[AgentSessionFlow, ...]:
        return (self.main, self.deadline)


def build_built_in_flows() -> BuiltInFlows:
    policies = dict(MatrixToolNames().policies())
    return BuiltInFlows(
        main=AgentSessionFlow(
            ScriptedRunner(),
            flow_type="CoreBuiltIns",
            options=AgentSessionOptions(
                tool_policies=policies,
                built_in_tools=BUILT_IN_TOOL_NAMES,
                max_durable_wait=MAX_WAIT,
                plan_mode_enabled=True,
            ),
        ),
        deadline=AgentSessionFlow(
            ScriptedRunner(),
            flow_type="CoreBuiltInsDeadline",
            options=AgentSessionOptions(
                tool_policies=policies,
                built_in_tools=BUILT_IN_TOOL_NAMES,
                max_durable_wait=MAX_WAIT,
                interrupt_deadline=QUESTION_DEADLINE,
            ),
        ),
    )
