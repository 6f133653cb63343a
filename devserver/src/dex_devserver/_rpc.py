"""RPCs: running a handler on a Worker and applying its effects atomically, or serving it as a query."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _effects as effects
from . import _errors as errors
from . import _requests as requests
from ._blobs import ValueRefusedError, value_size
from ._dispatch import WorkerFailure
from ._fit import ResponseTooLargeError, fit
from ._sizes import RPC_OUTPUT, WORKER_REQUEST

if TYPE_CHECKING:
    from ._engine import Engine


__all__ = ["invoke_rpc"]

# The longest an RPC handler may run; a caller asking for longer (or for no limit) gets this.
_RPC_TIMEOUT_CAP = 60.0


async def invoke_rpc(engine: Engine, request: pb.InvokeRPCRequest) -> pb.Value:
    """Runs an RPC handler on a Worker and applies its effects atomically.

    Returns:
        The RPC output.

    Raises:
        ServiceError: For closed Flows with effects, lock conflicts, Worker failures, missing messages
            of a transactional delete, or oversized values.
    """
    if not request.rpc_name:
        raise errors.invalid_argument("rpc_name is required")
    if request.timeout_seconds < 0:
        raise errors.invalid_argument("timeout_seconds must be >= 0")
    if any(not key for key in request.lock_attribute_keys):
        raise errors.invalid_argument("lock_attribute_keys must not contain an empty key")
    run = engine.run_of(request.flow_id, request.run_id)
    keys = sorted(set(request.lock_attribute_keys))
    transactional = request.is_transactional or bool(keys)
    if not run.is_running and transactional:
        raise errors.flow_not_found(request.flow_id, request.run_id)
    rt = run.rt
    owner = (run.flow_id, run.run_id)
    held = [key for key in keys if key in rt.locks]
    if held:
        raise errors.lock_conflict(held)
    rpc_input = pb.Value()
    rpc_input.CopyFrom(request.input)
    try:
        effects.ingest(engine.blobs, rpc_input, f"the input of RPC {request.rpc_name!r}", owner)
    except ValueRefusedError as error:
        raise errors.invalid_argument(str(error)) from None
    attributes, infos, loaded = requests.state_inputs(
        run,
        request.load_attribute_map_instances,
        request.load_channel_names,
        request.load_channel_map_instances,
    )
    worker_request = pb.InvokeWorkerRPCRequest(
        context=requests.context_for(run, None),
        flow_type=run.flow_type,
        rpc_name=request.rpc_name,
        input=rpc_input,
        attributes=attributes,
        channel_infos=infos,
        loaded_channel_messages=loaded,
        loaded_attribute_map_instances=request.load_attribute_map_instances,
        loaded_channel_names=request.load_channel_names,
        loaded_channel_map_instances=request.load_channel_map_instances,
    )
    try:
        fit(
            worker_request,
            lambda value: engine.blobs.offload(value, owner),
            f"the Worker request of RPC {request.rpc_name!r}",
        )
    except ResponseTooLargeError as error:
        raise errors.response_too_large(str(error)) from None
    engine.blobs.sizes.saw(WORKER_REQUEST, worker_request.ByteSize())
    timeout = min(float(request.timeout_seconds) or _RPC_TIMEOUT_CAP, _RPC_TIMEOUT_CAP)
    rt.locks.update(keys)
    try:
        outcome = await engine.dispatcher.invoke(
            run.worker_target,
            run.flow_type,
            "rpc",
            worker_request,
            attempt_timeout=timeout,
            heartbeat_timeout=None,
            on_sent=lambda: None,
            on_progress=lambda _frame: None,
        )
    finally:
        rt.unlock(keys)
    if isinstance(outcome, WorkerFailure):
        raise errors.worker_api_error(
            f"RPC {request.rpc_name!r} failed: {outcome.detail}",
            outcome.worker_error
            or pb.WorkerErrorResponse(detail=outcome.detail, error_type=outcome.error_type),
        )
    assert isinstance(outcome, pb.InvokeWorkerRPCResponse)
    decision = outcome.step_decision if outcome.HasField("step_decision") else None
    has_effects = bool(
        outcome.upsert_attributes
        or outcome.record_events
        or outcome.publish_to_channel
        or outcome.delete_from_channel
        or (decision is not None and (decision.next_steps or decision.cancel_step_types))
    )
    output = pb.Value()
    output.CopyFrom(outcome.output)
    engine.blobs.sizes.saw(RPC_OUTPUT, value_size(output))
    try:
        effects.ingest(engine.blobs, output, f"the output of RPC {request.rpc_name!r}", owner)
        effects.ingest_effects(
            engine.blobs,
            owner,
            outcome.upsert_attributes,
            outcome.publish_to_channel,
            outcome.record_events,
            (),
            decision,
        )
    except ValueRefusedError as error:
        raise errors.invalid_argument(f"RPC {request.rpc_name!r}: {error}") from None
    if not has_effects and not transactional:
        # A query's output reflects the state it read, which must be committed before it is reported.
        await engine.journal.settle(run)
        return output
    run = engine.run_of(request.flow_id, request.run_id or run.run_id)
    if not run.is_running:
        raise errors.flow_not_found(request.flow_id, request.run_id)
    if decision is not None:
        if decision.HasField("close_decision"):
            raise errors.worker_api_error(
                f"RPC {request.rpc_name!r} returned a close decision;"
                " closing a Flow from an RPC is not supported",
                None,
            )
        if decision.cancel_sibling_step_types:
            raise errors.worker_api_error(
                f"RPC {request.rpc_name!r} cancels sibling Steps; RPCs have no siblings", None
            )
    if transactional:
        missing = effects.missing_deletion(run, outcome.delete_from_channel)
        if missing is not None:
            raise errors.channel_message_not_found(missing.channel_name, missing.message_id)
    effects.apply_effects(run, outcome)
    from_id = f"__rpc/{request.rpc_name}"
    if decision is not None:
        for movement in decision.next_steps:
            movement.from_step_execution_id_internal_only = from_id
        engine.cancel_by_type(run, decision.cancel_step_types, (), None)
        for movement in decision.next_steps:
            engine.queue(run, movement, from_id, None)

    def completed(event: pb.FlowHistoryEvent) -> None:
        payload = event.rpc_execution_completed
        payload.rpc_name = request.rpc_name
        payload.input.CopyFrom(rpc_input)
        payload.output.CopyFrom(output)
        if decision is not None:
            payload.step_decision.CopyFrom(decision)
        payload.upsert_attributes.extend(outcome.upsert_attributes)
        payload.record_events.extend(outcome.record_events)
        payload.publish_to_channel.extend(outcome.publish_to_channel)
        payload.delete_from_channel.extend(outcome.delete_from_channel)

    engine.journal.record(run, completed)
    engine.transition(run, durable=True)
    await engine.journal.durable()
    return output
