"""The Step lifecycle: wait_for, waiting on its condition, execute, and applying each result to the run."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _attempts as attempts
from . import _effects as effects
from . import _requests as requests
from ._dispatch import MethodResult, WorkerFailure
from ._model import Execution, FlowRun, Phase, detached

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["run_execution"]

_LOG = logging.getLogger("dex_devserver")


def _record_effects(
    out: pb.StepWaitForCompletedOutput | pb.StepExecuteCompletedOutput,
    outcome: pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse,
) -> None:
    """Copies a method's effects into its completion event's output."""
    out.upsert_attributes.extend(outcome.upsert_attributes)
    out.publish_to_channel.extend(outcome.publish_to_channel)
    out.record_events.extend(outcome.record_events)
    out.upsert_step_execution_locals.extend(outcome.upsert_step_exe_locals)
    out.delete_from_channel.extend(outcome.delete_from_channel)


def _record_failure(
    engine: Engine,
    run: FlowRun,
    exe: Execution,
    outcome: WorkerFailure,
    inputs: pb.StepMethodEventInput,
    context: pb.StepMethodEventContext,
) -> None:
    """Records `StepWaitForFailed` or `StepExecuteFailed` (by the execution's phase) for a failed method."""
    failure = exe.last_failure or pb.StepMethodFailure(backend_error=outcome.detail)
    wait_for = exe.phase == Phase.WAIT_FOR

    def failed(event: pb.FlowHistoryEvent) -> None:
        payload = event.step_wait_for_failed if wait_for else event.step_execute_failed
        payload.input.CopyFrom(inputs)
        payload.output.failure.CopyFrom(failure)
        payload.context.CopyFrom(context)

    engine.journal.record(run, failed)


def _is_current(run: FlowRun, exe: Execution) -> bool:
    """Tells whether an execution is still active, so its result may be applied (also while stopping)."""
    return run.is_running and run.executions.get(exe.exe_id) is exe


def _method_event_context(
    engine: Engine, run: FlowRun, exe: Execution, method: requests.Method
) -> pb.StepMethodEventContext:
    """Builds the context of a method's history event, with its method options' defaults filled in."""
    options = exe.movement.step_options
    context = pb.StepMethodEventContext(
        step_execution_id=exe.exe_id,
        from_step_execution_id=exe.from_id,
        step_type=exe.step_type,
        durability=requests.durability(run, options, method),
        final_attempt=exe.attempt,
        method_options=requests.method_options(options, method),
    )
    started = exe.method_started or time.time()
    context.started_time.FromNanoseconds(int(started * 1e9))
    context.duration.FromNanoseconds(int((time.time() - started) * 1e9))
    if exe.last_failure is not None:
        context.last_failure_info.CopyFrom(exe.last_failure)
    return context


async def run_execution(engine: Engine, run: FlowRun, exe: Execution) -> None:
    """Drives one Step execution from its phase to the end (a restored one resumes where it stopped)."""
    rt = run.rt
    try:
        if exe.phase == Phase.WAIT_FOR:
            outcome, attributes = await attempts.invoke_method(engine, run, exe, "wait_for")
            if not _is_current(run, exe):
                return
            _after_wait_for(engine, run, exe, outcome, attributes)
        if exe.phase == Phase.WAITING:
            event = rt.wake.get(exe.exe_id)
            if event is not None:
                await event.wait()
            if not _is_current(run, exe):
                return
        if exe.phase == Phase.EXECUTE:
            outcome, attributes = await attempts.invoke_method(engine, run, exe, "execute")
            if not _is_current(run, exe):
                return
            _after_execute(engine, run, exe, outcome, attributes)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # a bug must fail the Flow visibly, never hang it
        _LOG.exception("internal error in %s of Flow %s", exe.exe_id, run.flow_id)
        if run.is_running:
            engine.close_run(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_INTERNAL,
                f"devserver internal error: {error}",
            )
            engine.transition(run, durable=True)
    finally:
        if rt.tasks.get(exe.exe_id) is asyncio.current_task():
            del rt.tasks[exe.exe_id]


def _after_wait_for(
    engine: Engine,
    run: FlowRun,
    exe: Execution,
    outcome: MethodResult | WorkerFailure,
    attributes: list[pb.KV],
) -> None:
    """Applies a wait_for result: its effects, then execute at once, or waiting on its condition."""
    options = exe.movement.step_options
    inputs = pb.StepMethodEventInput(step_input=exe.movement.step_input, attributes=attributes)
    if isinstance(outcome, WorkerFailure):
        context = _method_event_context(engine, run, exe, "wait_for")
        _record_failure(engine, run, exe, outcome, inputs, context)
        if options.wait_for_failure_policy == pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE:
            exe.execute_recovery = exe.last_error
            exe.condition_results = pb.ConditionResults(wait_for_failed=True)
            exe.locals = []
            run.set_phase(exe, Phase.EXECUTE)
            exe.reset_method()
            engine.transition(run, durable=True)
            return
        engine.close_run(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_WORKER_API_FAIL, outcome.detail)
        engine.transition(run, durable=True)
        return
    assert isinstance(outcome, pb.InvokeWaitForMethodResponse)
    effects.apply_effects(run, outcome)
    exe.locals = [detached(local) for local in outcome.upsert_step_exe_locals]
    context = _method_event_context(engine, run, exe, "wait_for")
    durable = context.durability == pb.STEP_DURABILITY_SYNC

    def completed(event: pb.FlowHistoryEvent) -> None:
        payload = event.step_wait_for_completed
        payload.input.CopyFrom(inputs)
        out = payload.output
        if outcome.HasField("waiting_condition"):
            out.wait_for_condition.CopyFrom(outcome.waiting_condition)
        _record_effects(out, outcome)
        payload.context.CopyFrom(context)

    engine.journal.record(run, completed)
    condition = outcome.waiting_condition if outcome.HasField("waiting_condition") else None
    if condition is None or not (condition.timer_conditions or condition.channel_conditions):
        exe.condition_results = pb.ConditionResults()
        run.set_phase(exe, Phase.EXECUTE)
        exe.reset_method()
    else:
        now = math.floor(time.time())
        exe.condition = condition
        exe.timer_fire_at = [now + int(timer.duration_seconds) for timer in condition.timer_conditions]
        exe.timer_status = [pb.INTERNAL_TIMER_STATUS_PENDING for _ in condition.timer_conditions]
        run.set_phase(exe, Phase.WAITING)
        exe.reset_method()
        loop = asyncio.get_running_loop()
        rt = run.rt
        # Fired timers' handles are dropped here so a long-lived Flow does not accumulate them.
        rt.handles = [h for h in rt.handles if not h.cancelled() and h.when() > loop.time()]
        for fire_at in exe.timer_fire_at:
            rt.handles.append(loop.call_later(max(0.0, fire_at - time.time()), engine.on_timer, run))
    engine.transition(run, durable=durable)


def _after_execute(
    engine: Engine,
    run: FlowRun,
    exe: Execution,
    outcome: MethodResult | WorkerFailure,
    attributes: list[pb.KV],
) -> None:
    """Applies an execute result: its effects and decision, or the Step's failure policy."""
    options = exe.movement.step_options
    inputs = pb.StepMethodEventInput(
        step_input=exe.movement.step_input, attributes=attributes, step_execution_locals=exe.locals
    )
    if exe.condition_results is not None:
        inputs.condition_results.CopyFrom(exe.condition_results)
    context = _method_event_context(engine, run, exe, "execute")
    if isinstance(outcome, WorkerFailure):
        _record_failure(engine, run, exe, outcome, inputs, context)
        run.remove_execution(exe.exe_id)
        proceed = options.execute_failure_proceed_step_type
        if (
            options.execute_failure_policy == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
            and proceed
        ):
            movement = pb.StepMovement(step_type=proceed, step_input=exe.movement.step_input)
            movement.step_options.CopyFrom(options.execute_failure_proceed_step_options)
            recovery = exe.last_error or pb.RecoveryErrorInfo(
                detail=outcome.detail, error_type=outcome.error_type or "FLOW_ERROR_TYPE_WORKER_API_FAIL"
            )
            engine.queue(run, movement, exe.exe_id, recovery)
        else:
            engine.close_run(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_WORKER_API_FAIL, outcome.detail)
        engine.transition(run, durable=True)
        return
    assert isinstance(outcome, pb.InvokeExecuteMethodResponse)
    decision = outcome.step_decision
    for movement in decision.next_steps:
        movement.from_step_execution_id_internal_only = exe.exe_id
        movement.ClearField("recovery_error_internal_only")
    effects.apply_effects(run, outcome)
    run.remove_execution(exe.exe_id)
    engine.cancel_by_type(run, decision.cancel_step_types, decision.cancel_sibling_step_types, exe)

    def completed(event: pb.FlowHistoryEvent) -> None:
        payload = event.step_execute_completed
        payload.input.CopyFrom(inputs)
        out = payload.output
        out.step_decision.CopyFrom(decision)
        _record_effects(out, outcome)
        payload.context.CopyFrom(context)

    engine.journal.record(run, completed)
    close = decision.close_decision if decision.HasField("close_decision") else None
    close_type = close.close_decision_type if close is not None else pb.CLOSE_DECISION_TYPE_UNSPECIFIED

    def collect() -> None:
        if close is not None and close.HasField("close_input") and not requests.is_null(close.close_input):
            run.add_result(
                pb.StepCompletionOutput(
                    completed_step_type=exe.step_type,
                    completed_step_execution_id=exe.exe_id,
                    completed_step_output=close.close_input,
                )
            )

    if close is None:
        for movement in decision.next_steps:
            engine.queue(run, movement, exe.exe_id, None)
    elif close_type == pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE:
        collect()
        run.graceful = True
    elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE:
        collect()
        engine.close_run(run, pb.FLOW_STATUS_COMPLETED)
    elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_FAIL:
        reason = engine.blobs.hydrate(run.flow_id, close.close_input).string_value
        engine.close_run(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW, reason)
    elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY:
        if all(not run.channels.get(name) for name in close.conditional_channel_names):
            collect()
            engine.close_run(run, pb.FLOW_STATUS_COMPLETED)
        else:
            for movement in decision.next_steps:
                engine.queue(run, movement, exe.exe_id, None)
    durable = context.durability == pb.STEP_DURABILITY_SYNC
    engine.transition(run, durable=durable)
