"""The traced Flows of the tracing tests, as both the test and the traced Worker build them."""

from collections.abc import Sequence
from dataclasses import dataclass, replace

from dex_agents import AgentSessionFlow
from dex_agents.otel import AgentTracing, GenAIConventions
from dex_agents.testing import ScriptedRunner, matrix_session_options
from tests.trace_probe import TraceProbeFlow, build_untraced_flow

AGENT_NAME = "order-desk"
PROVIDER_NAME = "dex.scripted"


@dataclass(frozen=True)
class TracedFlows:
    """Content by reference; content recorded; the 1.36.0 conventions; and the untraced Flow."""

    main: TraceProbeFlow
    content: TraceProbeFlow
    compat: TraceProbeFlow
    untraced: TraceProbeFlow

    @property
    def traced(self) -> Sequence[AgentSessionFlow]:
        return (self.main, self.content, self.compat)

    @property
    def all(self) -> Sequence[AgentSessionFlow]:
        return (*self.traced, self.untraced)


def build_traced_flows() -> TracedFlows:
    options = matrix_session_options()
    tracing = AgentTracing(agent_name=AGENT_NAME, provider_name=PROVIDER_NAME, record_message_content=False)

    def flow(flow_type: str, tracing: AgentTracing) -> TraceProbeFlow:
        return TraceProbeFlow(
            ScriptedRunner(), flow_type=flow_type, options=replace(options, tracing=tracing)
        )

    return TracedFlows(
        main=flow("CoreTraced", tracing),
        content=flow("CoreTracedContent", replace(tracing, record_message_content=True)),
        compat=flow("CoreTracedCompat", replace(tracing, conventions=GenAIConventions.V1_36_0)),
        untraced=build_untraced_flow(),
    )
