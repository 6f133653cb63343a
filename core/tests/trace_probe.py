"""A session Flow that can show its `AgentTraceContext`, without importing OpenTelemetry.

The untraced Worker builds it too, so this module must not import ``dex_agents.otel``.
"""

from typing import cast

from dex import Context, RPCResult, rpc

from dex_agents import AGENT_TRACE_CONTEXT, AgentSessionFlow
from dex_agents.testing import ScriptedRunner, matrix_session_options

UNTRACED_FLOW_TYPE = "CoreUntraced"


class TraceProbeFlow(AgentSessionFlow):
    @rpc
    def read_trace_context(self, context: Context) -> RPCResult[str]:
        """The stored traceparent, or an empty string when none is stored."""
        return RPCResult(cast(str | None, AGENT_TRACE_CONTEXT.get(context)) or "")


def build_untraced_flow() -> TraceProbeFlow:
    return TraceProbeFlow(ScriptedRunner(), flow_type=UNTRACED_FLOW_TYPE, options=matrix_session_options())
