"""The traced Flows of the tracing tests, as both the test and the traced Worker build them."""

from collections.abc import Sequence
from dataclasses import dataclass, replace

from dex_agents import AgentSessionFlow, CompactionPolicy
from dex_agents.otel import AgentTracing, GenAIConventions
from dex_agents.testing import ScriptedRunner, matrix_session_options
from tests.trace_probe import TraceProbeFlow, build_untraced_flow

AGENT_NAME = "order-desk"
PROVIDER_NAME = "dex.scripted"
#: The compacting Flow's context window, in ScriptedRunner tokens (a token per 4 characters).
COMPACTION_WINDOW_TOKENS = 1000


@dataclass(frozen=True)
class TracedFlows:
    """Content by reference; content recorded; the 1.36.0 conventions; compaction; the untraced Flow."""

    main: TraceProbeFlow
    content: TraceProbeFlow
    compat: TraceProbeFlow
    compacting: TraceProbeFlow
    untraced: TraceProbeFlow

    @property
    def traced(self) -> Sequence[AgentSessionFlow]:
        return (self.main, self.content, self.compat, self.compacting)

    @property
    def all(self) -> Sequence[AgentSessionFlow]:
        return (*self.traced, self.untraced)


def build_traced_flows() -> TracedFlows:
    options = matrix_session_options()
    tracing = AgentTracing(agent_name=AGENT_NAME, provider_name=PROVIDER_NAME, record_message_content=False)

    def flow(
        flow_type: str, tracing: AgentTracing, compaction: CompactionPolicy | None = None
    ) -> TraceProbeFlow:
        traced = replace(options, tracing=tracing, compaction=compaction)
        return TraceProbeFlow(ScriptedRunner(), flow_type=flow_type, options=traced)

    return TracedFlows(
        main=flow("CoreTraced", tracing),
        content=flow("CoreTracedContent", replace(tracing, record_message_content=True)),
        compat=flow("CoreTracedCompat", replace(tracing, conventions=GenAIConventions.V1_36_0)),
        compacting=flow(
            "CoreTracedCompacting",
            replace(tracing, record_message_content=True),
            compaction=CompactionPolicy(context_window_tokens=COMPACTION_WINDOW_TOKENS),
        ),
        untraced=build_untraced_flow(),
    )
