"""What every Step of one session Flow type depends on, as one frozen value.

A Step receives this and the movements it may make (`Moves`); a helper receives the part it uses (the
options, the runner, an event writer), never the whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from dex import AsyncContext, Context, Stream

from dex_agents._tracing._session import SessionTracing
from dex_agents.compaction import is_compaction_runner
from dex_agents.events import DEFAULT_DELTA_COALESCING, AgentEventWriter
from dex_agents.runner import AgentFrameworkRunner, ToolDescriber
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._state import read_context_summary
from dex_agents.values import AgentEvent

__all__ = ["SessionDeps"]


@dataclass(frozen=True)
class SessionDeps:
    """The runner, the options, the event Stream, tracing and the Flow type of one session Flow type.

    Attributes:
        runner: The framework adapter.
        options: The session options.
        agent_events: The Flow type's `AgentEvents` Stream.
        tracing: The Steps' tracing calls; pass-throughs without `AgentSessionOptions.tracing`.
        flow_type: The Flow type name.
        compacts: Whether the runner compacts: it then sees only the messages after the summary.
    """

    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    agent_events: Stream[AgentEvent]
    tracing: SessionTracing
    flow_type: str
    compacts: bool

    @classmethod
    def of(
        cls,
        runner: AgentFrameworkRunner,
        options: AgentSessionOptions,
        agent_events: Stream[AgentEvent],
        flow_type: str,
    ) -> SessionDeps:
        """Build the dependencies of one Flow type."""
        return cls(
            runner=runner,
            options=options,
            agent_events=agent_events,
            tracing=SessionTracing(
                options.tracing,
                flow_type,
                runner.describe_tool if isinstance(runner, ToolDescriber) else None,
            ),
            flow_type=flow_type,
            compacts=is_compaction_runner(runner),
        )

    def event_writer(self, context: AsyncContext, turn_id: str | None) -> AgentEventWriter:
        """Return a writer stamped with ``turn_id`` and the current Step execution and attempt."""
        stream = self.agent_events

        def write(event: AgentEvent) -> None:
            stream.write(context, event)

        return AgentEventWriter(
            write, turn_id, context.attempt, context.step_execution_id, coalescing=DEFAULT_DELTA_COALESCING
        )

    def summarized_through(self, context: Context) -> int:
        """The last message the runner no longer receives: the summary's, for a runner that compacts."""
        if not self.compacts:
            return 0
        summary = read_context_summary(context)
        return 0 if summary is None else summary.last_sequence
