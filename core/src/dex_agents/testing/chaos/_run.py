"""One package's chaos run: sessions under Worker and engine kills, then every invariant checked."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dex_agents import AgentMessage, AgentSessionClient, AgentSnapshot, MessageRole
from dex_agents.testing._invocations import Invocation
from dex_agents.testing._provider_server import read_provider_requests
from dex_agents.testing._stack import AgentTestStack
from dex_agents.testing._worker import WORKER_DRAIN_TIMEOUT_ENV, WORKER_DRAIN_TIMEOUT_SECONDS
from dex_agents.testing.chaos._faults import FaultInjector, GateWatcher
from dex_agents.testing.chaos._invariants import (
    Violation,
    idempotency_key_violations,
    single_attempt_violations,
    transcript_violations,
    user_message_violations,
)
from dex_agents.testing.chaos._plan import CHECK_TURN_ANSWER, plan_session
from dex_agents.testing.chaos._report import ChaosReport
from dex_agents.testing.chaos._sessions import (
    SessionDriver,
    SessionStalledError,
    TurnEnds,
    read_stored_messages,
    read_turn_ends,
)
from dex_agents.testing.chaos._spec import ChaosSpec

__all__ = ["ChaosSettings", "run_chaos"]

_CHECK_CONCURRENCY = 8
# serve_agent_worker's default drain timeout, and a dispatch wait long enough for a replacement to start.
_DEPLOY_DRAIN_TIMEOUT_SECONDS = 30.0
_DEPLOY_DISPATCH_WAIT_SECONDS = 120.0


@dataclass(frozen=True)
class ChaosSettings:
    """How big a chaos run is.

    Attributes:
        name: The package's label, for the report.
        spec_reference: The spec's ``module:attribute``, for the report.
        seed: Plans the sessions and the faults.
        worker_kills: Worker process groups to SIGKILL.
        engine_crashes: Times to SIGKILL the engine and restart it on the same database.
        rolling_deploys: Rolling deploys: every Worker in turn gets SIGTERM, drains and is replaced. A run
            with deploys and no kills or crashes must end no turn failed.
        max_seconds: When the faults stop even if some remain (the sessions then still finish).
        concurrent_sessions: Sessions running at once while the faults go on.
        workers: Workers kept running.
        stall_seconds: How long a session may make no progress before it counts as stuck.
        replay: The command that replays the run, for the report.
    """

    name: str
    spec_reference: str
    seed: int
    worker_kills: int
    engine_crashes: int = 0
    rolling_deploys: int = 0
    max_seconds: float = 600.0
    concurrent_sessions: int = 4
    workers: int = 2
    stall_seconds: float = 180.0
    replay: str = ""


@dataclass
class _Session:
    driver: SessionDriver
    failure: BaseException | None = None
    check: AgentSnapshot | None = None
    stored: list[AgentMessage] = field(default_factory=list[AgentMessage])
    ends: TurnEnds = field(default_factory=TurnEnds)


async def run_chaos(
    spec: ChaosSpec, settings: ChaosSettings, state_dir: Path, log: Callable[[str], None] = print
) -> ChaosReport:
    """Run sessions of ``spec`` under faults, then check every invariant.

    Args:
        spec: The package's chaos spec.
        settings: The run's size and seed.
        state_dir: An empty directory for the devserver's database, logs, scripts and the tools' ledger.
        log: Receives progress lines.

    Returns:
        The report (its ``violations`` say whether the run passed).

    Raises:
        RuntimeError: If engine crashes are asked for while ``DEX_SERVER_ADDRESS`` names the server.
    """
    started = time.monotonic()
    plan_rng = random.Random(f"plan:{settings.seed}:{settings.name}")
    flows = spec.matrix.build_flows()
    worker_env = dict(spec.matrix.worker_env)
    server_args: tuple[str, ...] = ()
    drain_timeout_seconds = WORKER_DRAIN_TIMEOUT_SECONDS
    if settings.rolling_deploys:
        # A deploy is judged as production runs it: Workers drain with the default drain timeout (a Step
        # still running when a short test timeout cancels it counts as an attempt, rightly), and a queue
        # waits for the replacement Worker rather than failing its turn after the devserver's 10 s.
        drain_timeout_seconds = _DEPLOY_DRAIN_TIMEOUT_SECONDS
        worker_env[WORKER_DRAIN_TIMEOUT_ENV] = str(drain_timeout_seconds)
        server_args = ("--dispatch-wait", str(_DEPLOY_DISPATCH_WAIT_SECONDS))
    async with AgentTestStack(
        state_dir,
        flows.all,
        spec.matrix.worker_module,
        worker_cwd=spec.matrix.worker_cwd,
        worker_env=worker_env,
        server_args=server_args,
    ) as stack:
        if settings.engine_crashes and stack.uses_external_server:
            raise RuntimeError("engine crashes need the private devserver; unset DEX_SERVER_ADDRESS")
        sessions = stack.sessions(flows.main)
        gates = GateWatcher(stack.state_dir)
        watching = asyncio.create_task(gates.run())
        injector = FaultInjector(
            stack,
            gates,
            random.Random(f"faults:{settings.seed}:{settings.name}"),
            workers=settings.workers,
            drain_timeout_seconds=drain_timeout_seconds,
            log=lambda line: log(f"{settings.name}: {line}"),
        )
        try:
            await injector.start_workers()
            log(f"{settings.name}: {settings.workers} Workers up after {time.monotonic() - started:.0f} s")
            loop = asyncio.get_running_loop()
            faults = asyncio.create_task(
                injector.run(
                    settings.worker_kills,
                    settings.engine_crashes,
                    loop.time() + settings.max_seconds,
                    deploys=settings.rolling_deploys,
                )
            )
            runs = await _run_sessions_until(faults, sessions, stack, spec, settings, plan_rng, gates)
            await faults
            log(
                f"{settings.name}: faults done ({injector.counts.worker_kills} Worker kills, "
                f"{injector.counts.engine_crashes} engine crashes); checking {len(runs)} sessions"
            )
            await _run_check_turns(runs, sessions)
            log(f"{settings.name}: check turns done after {time.monotonic() - started:.0f} s")
            report = _check(runs, stack.invocations.read(), spec, settings, injector)
            faulted = Counter(
                request.fault
                for request in read_provider_requests(stack.state_dir)
                if request.fault is not None
            )
            report = replace(report, provider_faults=dict(sorted(faulted.items())))
        finally:
            watching.cancel()
    return _with_time(report, time.monotonic() - started)


async def _run_sessions_until(
    faults: asyncio.Task[None],
    sessions: AgentSessionClient,
    stack: AgentTestStack,
    spec: ChaosSpec,
    settings: ChaosSettings,
    plan_rng: random.Random,
    gates: GateWatcher,
) -> list[_Session]:
    """Keep ``concurrent_sessions`` sessions running until the faults end, then let the last ones finish."""
    runs: list[_Session] = []
    running: dict[asyncio.Task[None], _Session] = {}
    while True:
        while not faults.done() and len(running) < settings.concurrent_sessions:
            plan = plan_session(
                plan_rng,
                stack.new_session_id(f"chaos-{settings.name}"),
                spec.matrix.tool_names,
                one_deferred_call_per_response=spec.one_deferred_call_per_response,
                provider_faults=spec.matrix.provider_backed,
            )
            stack.scripts.set_turns(plan.session_id, plan.script())
            run = _Session(
                SessionDriver(sessions, plan, poll_seconds=0.25, stall_seconds=settings.stall_seconds)
            )
            runs.append(run)
            running[asyncio.create_task(run.driver.run_planned_turns())] = run
        if not running:
            return runs
        done, _ = await asyncio.wait({*running, faults}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            run = running.pop(task, None)
            if run is None:
                continue
            if task.exception() is None:
                gates.forget_session(run.driver.session_id)
            else:
                run.failure = task.exception()
        if faults.done() and faults.exception() is not None:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            return runs


def _failures_without_provider_faults(run: _Session) -> list[str]:
    """The errors of a session's failed turns whose model calls met no scripted provider fault.

    Some frameworks end a turn on a fault the provider server injects (Google ADK on malformed tool-call
    arguments); such a turn failed for the fault, not for a deploy. A turn is matched to its plan by its user
    message, read from the stored messages.
    """
    faulted = {
        turn.message
        for turn in run.driver.plan.turns
        if any(response.provider_faults for response in turn.responses)
    }
    # A failed turn also stores the turn-failure note as a user message, so a turn may have two.
    user_texts: dict[str, set[str]] = {}
    for message in run.stored:
        if message.role is MessageRole.USER and message.text is not None:
            user_texts.setdefault(message.turn_id, set()).add(message.text)
    return [
        error
        for error, turn_id in zip(run.ends.failed, run.ends.failed_turn_ids, strict=True)
        if not user_texts.get(turn_id, set()) & faulted
    ]


async def _run_check_turns(runs: list[_Session], sessions: AgentSessionClient) -> None:
    """Take one more normal turn in every session that finished its planned turns, then read it back."""
    limit = asyncio.Semaphore(_CHECK_CONCURRENCY)

    async def check(run: _Session) -> None:
        async with limit:
            try:
                run.check = await run.driver.run_check_turn()
                run.stored = await read_stored_messages(sessions, run.driver.session_id)
                run.ends = await read_turn_ends(sessions, run.driver.session_id)
            except Exception as error:
                run.failure = error

    await asyncio.gather(*(check(run) for run in runs if run.failure is None))


def _check(
    runs: list[_Session],
    invocations: list[Invocation],
    spec: ChaosSpec,
    settings: ChaosSettings,
    injector: FaultInjector,
) -> ChaosReport:
    tools = spec.matrix.tool_names
    violations = [
        *single_attempt_violations(invocations, {tools.approval_write, tools.single_attempt_write}),
        *idempotency_key_violations(invocations, {tools.idempotent_write}),
    ]
    for run in runs:
        violations.extend(_session_violations(run))
    failed_turns = [error for run in runs for error in run.ends.failed]
    counts = injector.counts
    violations.extend(
        Violation("worker_drain_overrun", f"worker {pid}", "it did not exit within its drain timeout")
        for pid in counts.drain_overruns
    )
    statuses: Counter[str] = Counter()
    for run in runs:
        statuses.update(run.ends.tool_statuses)
    if settings.rolling_deploys and not (settings.worker_kills or settings.engine_crashes):
        # Nothing was killed: a deploy that drains Workers one at a time must not fail a single turn, nor
        # lose a write's only attempt with a Worker that stopped.
        deploy_failures = {error for run in runs for error in _failures_without_provider_faults(run)}
        violations.extend(
            Violation("turn_failed_in_rolling_deploy", "-", error) for error in sorted(deploy_failures)
        )
        if statuses["outcome_unknown"]:
            violations.append(
                Violation(
                    "outcome_unknown_in_rolling_deploy",
                    "-",
                    f"{statuses['outcome_unknown']} tool calls ended outcome_unknown with no Worker killed",
                )
            )
    tool_runs = Counter(call.tool_name for call in invocations if call.kind == "tool")
    retrying = {tools.read, tools.idempotent_write}
    calls = Counter(
        (call.session_id, call.turn_id, call.tool_call_id)
        for call in invocations
        if call.kind == "tool" and call.tool_name in retrying and call.tool_call_id
    )
    return ChaosReport(
        name=settings.name,
        spec=settings.spec_reference,
        seed=settings.seed,
        requested_worker_kills=settings.worker_kills,
        requested_engine_crashes=settings.engine_crashes,
        worker_kills=counts.worker_kills,
        worker_kill_moments=dict(counts.worker_kill_moments),
        engine_crashes=counts.engine_crashes,
        engine_crash_moments=dict(counts.engine_crash_moments),
        stopped_by_time_limit=(counts.worker_kills, counts.engine_crashes, counts.deploys)
        != (settings.worker_kills, settings.engine_crashes, settings.rolling_deploys),
        rolling_deploys=counts.deploys,
        worker_drains=len(counts.drain_seconds),
        sessions_on_several_workers=_sessions_on_several_workers(invocations),
        longest_drain_seconds=max(counts.drain_seconds, default=0.0),
        sessions=len(runs),
        turns=sum(len(run.driver.sent) for run in runs),
        failed_turns=len(failed_turns),
        turn_failures=sorted(set(failed_turns)),
        tool_runs=dict(sorted(tool_runs.items())),
        repeated_calls=sum(1 for count in calls.values() if count > 1),
        tool_call_statuses=dict(sorted(statuses.items())),
        model_calls=sum(1 for call in invocations if call.kind == "model"),
        approvals=sum(run.driver.approvals for run in runs),
        retried_client_calls=sum(run.driver.retried_calls for run in runs),
        seconds=0.0,
        violations=violations,
        replay=settings.replay,
    )


def _sessions_on_several_workers(invocations: list[Invocation]) -> int:
    """How many sessions had their model or tool calls made by more than one Worker process."""
    pids: dict[str, set[int]] = {}
    for call in invocations:
        if call.kind in ("model", "tool"):
            pids.setdefault(call.session_id, set()).add(call.pid)
    return sum(1 for served in pids.values() if len(served) > 1)


def _session_violations(run: _Session) -> list[Violation]:
    session_id = run.driver.session_id
    if run.failure is not None:
        invariant = "session_not_idle" if isinstance(run.failure, SessionStalledError) else "driver_error"
        return [Violation(invariant, session_id, f"{type(run.failure).__name__}: {run.failure}")]
    stored = run.stored
    violations = [
        *user_message_violations(session_id, run.driver.sent, stored),
        *transcript_violations(session_id, stored),
    ]
    state = run.check.state if run.check is not None else None
    if (
        state is None
        or state.last_turn_error is not None
        or not stored
        or stored[-1].text != CHECK_TURN_ANSWER
    ):
        violations.append(
            Violation(
                "next_request_refused",
                session_id,
                "the turn after the chaos did not answer normally: last_turn_error "
                f"{None if state is None else state.last_turn_error!r}, last stored message "
                f"{stored[-1].text if stored else None!r}",
            )
        )
    return violations


def _with_time(report: ChaosReport, seconds: float) -> ChaosReport:
    return replace(report, seconds=round(seconds, 1))
