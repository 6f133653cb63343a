"""What an adapter supplies to run the matrix, and the Worker main that serves it (no pytest needed)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from dex_agents import (
    BUILT_IN_TOOL_NAMES,
    WRITE_TODOS,
    AgentFrameworkRunner,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionStatus,
    AgentSnapshot,
    CompactionPolicy,
    ToolEffect,
    ToolNamesRunner,
    ToolPolicy,
)
from dex_agents.compaction import is_compaction_runner
from dex_agents.testing._matrix_tools import MatrixToolNames, matrix_session_options
from dex_agents.testing._scoped_runner import with_model_call_scope
from dex_agents.testing._waiting import wait_for_agent_snapshot
from dex_agents.testing._worker import run_agent_worker

if TYPE_CHECKING:
    from dex_agents.otel import AgentTracing

__all__ = [
    "MATRIX_COMPACTION",
    "MatrixFlows",
    "MatrixSpec",
    "misspelled_policy_options",
    "misspelled_read_tool",
    "run_matrix_worker",
    "wait_for_turn_end",
]

# `dex_agents.testing.otel_spans.SPAN_FILE_ENV`, spelled out so serving the matrix imports no OpenTelemetry
# SDK until a test names a span file (item 18 does; a Worker main of its own honours the same variable).
_SPAN_FILE_ENV = "DEX_AGENTS_TEST_SPAN_FILE"

MATRIX_COMPACTION = CompactionPolicy(context_window_tokens=1_000_000, context_window_bytes=8 * 1024)
"""The compacting Flow's policy (item 23): stored bytes, which the session counts alike for every runner,
trigger it, never a runner's own token count; a turn's short messages stay under it and a 6 KB answer
passes it."""


@dataclass(frozen=True)
class MatrixFlows:
    """The Flows the matrix registers.

    Attributes:
        main: The agent with explicit policies for the four matrix tools.
        with_deadline: The same agent with an approval deadline.
        with_built_ins: The same agent with every built-in tool enabled, when the spec supports them.
        traced: The same agent with OpenTelemetry GenAI spans, message content recorded (item 18).
        misspelled_policy: The same agent with a policy for a misspelling of the read tool
            (`misspelled_policy_options`), when its runner lists no tool names at construction, so the
            session finds the misspelling only once a turn runs (item 25).
        planning: The same agent with plan mode on and ``write_todos`` enabled (item 22), when the runner
            supports plan mode.
        compacting: The same agent with `MATRIX_COMPACTION` (item 23), when the runner compacts.
    """

    main: AgentSessionFlow
    with_deadline: AgentSessionFlow
    with_built_ins: AgentSessionFlow | None = None
    traced: AgentSessionFlow | None = None
    misspelled_policy: AgentSessionFlow | None = None
    planning: AgentSessionFlow | None = None
    compacting: AgentSessionFlow | None = None

    @property
    def all(self) -> tuple[AgentSessionFlow, ...]:
        """Every Flow, for the Worker's and the Client's Registry."""
        optional = (self.with_built_ins, self.traced, self.misspelled_policy, self.planning, self.compacting)
        extra = tuple(flow for flow in optional if flow is not None)
        return (self.main, self.with_deadline, *extra)


def misspelled_read_tool(names: MatrixToolNames) -> str:
    """Return the name item 25 misspells: the read tool's name without its last letter."""
    return names.read[:-1]


def misspelled_policy_options(names: MatrixToolNames) -> AgentSessionOptions:
    """Return the matrix options plus a ``read`` policy keyed by `misspelled_read_tool`."""
    options = matrix_session_options(names)
    policies = {**options.tool_policies, misspelled_read_tool(names): ToolPolicy(ToolEffect.READ)}
    return replace(options, tool_policies=policies)


@dataclass(frozen=True)
class MatrixSpec:
    """What an adapter supplies to run the matrix.

    Attributes:
        build_runner: Builds the adapter's runner around its scripted model and the matrix tools. The
            test process and the Worker child both call it.
        worker_module: The module whose ``__main__`` calls :func:`run_matrix_worker` with this spec.
        flow_type_prefix: Makes the Flow types unique on a shared server (``<prefix>Matrix`` and
            ``<prefix>MatrixDeadline``).
        worker_cwd: The Worker's working directory, usually the package directory.
        worker_env: Extra environment variables for the Worker.
        tool_names: The names the agent gives the four matrix tools.
        approval_deadline: The deadline of the deadline Flow's approvals (default 4 s). It must outlast
            raising the approval and the test's first look at it, on a slow, shared machine too; an
            adapter whose model call is slow (such as one that starts a CLI) sets a longer one.
        unknown_tool_message: A fragment of what the framework tells the model about a call to a tool name
            the agent does not have (such as ``"Unknown tool name: 'launch_rocket'"``; the matrix calls
            ``launch_rocket``). Item 12, an addition beyond the design's 11, checks that such a call is
            recorded ``failed`` with it and that the model sees it at its next call, never in a hidden
            second model call. ``None`` (the default) skips item 12.
        runs_reads_inline: The runner lets its framework run read tools inside ``RunModel`` (a whole-turn
            harness, such as the Claude Code CLI's), so one ``RunModel`` attempt makes one model call per
            response. Item 13 then requires each model call of an attempt to see more input than the one
            before it, instead of exactly one model call per attempt.
        supports_turn_control: Run items 14 and 15, steering and cancellation: a turn steered while an
            approval waits, and a turn cancelled during a model call. Set it once the adapter keeps a
            result for every tool call of a steered or cancelled turn (``build_unfinished_turn_messages``,
            or no stored calls at all) and its model call stops when its coroutine is cancelled. ``False``
            (the default) skips both items.
        supports_built_in_tools: Run item 16: the session's enabled built-in tools are offered to the model
            like any other tool (the scripted model passes ``offered_tools`` to
            ``scripted_model_response``), and an ``ask_user`` call round-trips through ``answer_question``
            with the answer reaching the model. It registers a third Flow, ``<prefix>MatrixBuiltIns``, with
            every built-in enabled. ``False`` (the default) skips item 16.
        provider_backed: The runner's model is the framework's own provider client talking HTTP to
            `dex_agents.testing.scripted_provider_server`, so items 19 to 21 (provider faults) run.
            ``False`` (the default) skips them.
    """

    build_runner: Callable[[], AgentFrameworkRunner]
    worker_module: str
    flow_type_prefix: str
    worker_cwd: Path | None = None
    worker_env: Mapping[str, str] = field(default_factory=dict[str, str])
    tool_names: MatrixToolNames = field(default_factory=MatrixToolNames)
    approval_deadline: timedelta = timedelta(seconds=4)
    unknown_tool_message: str | None = None
    runs_reads_inline: bool = False
    supports_turn_control: bool = False
    supports_built_in_tools: bool = False
    provider_backed: bool = False

    def build_flows(self) -> MatrixFlows:
        """Build the matrix Flows (each with its own runner, wrapped for the scripted model).

        The planning Flow is built when the runner's ``supports_plan_mode`` is `True`, and the compacting
        Flow when the runner implements `dex_agents.ContextCompactionRunner`.
        """
        planning = None
        planner = self.build_runner()
        if getattr(planner, "supports_plan_mode", False) is True:
            planning = AgentSessionFlow(
                with_model_call_scope(planner),
                flow_type=f"{self.flow_type_prefix}MatrixPlanning",
                options=replace(
                    matrix_session_options(self.tool_names, built_in_tools=(WRITE_TODOS,)),
                    plan_mode_enabled=True,
                ),
            )
        compacting = None
        compactor = self.build_runner()
        if is_compaction_runner(compactor):
            compacting = AgentSessionFlow(
                with_model_call_scope(compactor),
                flow_type=f"{self.flow_type_prefix}MatrixCompacting",
                options=replace(matrix_session_options(self.tool_names), compaction=MATRIX_COMPACTION),
            )
        with_built_ins = misspelled_policy = None
        runner = self.build_runner()
        if isinstance(runner, ToolNamesRunner) and runner.agent_tool_names() is None:
            misspelled_policy = AgentSessionFlow(
                with_model_call_scope(self.build_runner()),
                flow_type=f"{self.flow_type_prefix}MatrixMisspelledPolicy",
                options=misspelled_policy_options(self.tool_names),
            )
        if self.supports_built_in_tools:
            with_built_ins = AgentSessionFlow(
                with_model_call_scope(self.build_runner()),
                flow_type=f"{self.flow_type_prefix}MatrixBuiltIns",
                options=matrix_session_options(self.tool_names, built_in_tools=BUILT_IN_TOOL_NAMES),
            )
        return MatrixFlows(
            main=AgentSessionFlow(
                with_model_call_scope(runner),
                flow_type=f"{self.flow_type_prefix}Matrix",
                options=matrix_session_options(self.tool_names),
            ),
            with_deadline=AgentSessionFlow(
                with_model_call_scope(self.build_runner()),
                flow_type=f"{self.flow_type_prefix}MatrixDeadline",
                options=matrix_session_options(self.tool_names, interrupt_deadline=self.approval_deadline),
            ),
            with_built_ins=with_built_ins,
            traced=AgentSessionFlow(
                with_model_call_scope(self.build_runner()),
                flow_type=f"{self.flow_type_prefix}MatrixTraced",
                options=replace(matrix_session_options(self.tool_names), tracing=_matrix_tracing()),
            ),
            misspelled_policy=misspelled_policy,
            planning=planning,
            compacting=compacting,
        )


def _matrix_tracing() -> AgentTracing:
    # Imported here: the OpenTelemetry API comes with the testing extra, but only item 18 needs it.
    from dex_agents.otel import AgentTracing  # noqa: PLC0415

    return AgentTracing(agent_name="matrix-agent", provider_name="dex.scripted", record_message_content=True)


def run_matrix_worker(spec: MatrixSpec) -> None:
    """Serve the matrix Flows of ``spec``; the main of the adapter's matrix Worker module.

    Args:
        spec: The adapter's matrix spec.
    """
    span_file = os.environ.get(_SPAN_FILE_ENV)
    if span_file:
        # The traced Flow's spans go to the file as each ends, so a SIGKILL loses none that ended.
        from dex_agents.testing.otel_spans import export_spans_to_file  # noqa: PLC0415

        export_spans_to_file(span_file)
    run_agent_worker(spec.build_flows().all)


async def wait_for_turn_end(
    sessions: AgentSessionClient,
    session_id: str,
    turn_count: int,
    timeout: float = 60.0,  # noqa: ASYNC109 - a poll deadline, not an I/O timeout
) -> AgentSnapshot:
    """Wait until a session has ended ``turn_count`` turns and waits for the next user message.

    Args:
        sessions: The session client.
        session_id: The session.
        turn_count: Completed or failed turns to wait for.
        timeout: Seconds before giving up.

    Returns:
        The snapshot that matched.
    """

    def ended(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        if (
            state is not None
            and state.turn_count >= turn_count
            and state.status == AgentSessionStatus.WAITING_FOR_USER_MESSAGE
        ):
            return snapshot
        return None

    return await wait_for_agent_snapshot(
        sessions, session_id, ended, description=f"turn {turn_count} to end", timeout=timeout
    )
