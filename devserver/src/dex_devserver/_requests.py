"""What the server sends Workers and how it checks what they return.

Pure functions over a run's state: Worker request building with per-method load selections, durability and
method-option resolution with the SDK defaults, retry backoff, and step-decision validation.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from dex.dexpb import dex_pb2 as pb

from . import _errors as errors
from ._history import retry_policy_with_defaults
from ._model import Execution, FlowRun, is_reserved_name

__all__ = [
    "TIMEOUT_HANDLER",
    "Method",
    "Retry",
    "attributes_of",
    "check_decision",
    "context_for",
    "durability",
    "is_null",
    "long_poll",
    "method_options",
    "method_request",
    "new_message_id",
    "parse_token",
    "state_inputs",
    "timeout_handler_movement",
]

Method = Literal["wait_for", "execute"]
TIMEOUT_HANDLER = "sys:timeout_handler"
_DEFAULT_METHOD_TIMEOUT = 2 * 3600
_DEFAULT_HEARTBEAT_TIMEOUT = 60
_DEFAULT_TOTAL_DURATION = 4 * 3600
_MAX_LONG_POLL = 60.0
# Tokens are decimal sequence numbers; 18 digits keep them inside SQLite's 64-bit integers.
_TOKEN = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class Retry:
    """A retry policy with the server defaults filled in."""

    initial: float
    coefficient: float
    maximum_interval: float
    maximum_attempts: int
    total_duration: float

    @staticmethod
    def of(policy: pb.RetryPolicy) -> Retry:
        """Resolves a wire retry policy."""
        return Retry(
            policy.initial_interval_seconds or 1,
            policy.backoff_coefficient or 2.0,
            policy.maximum_interval_seconds or 100,
            policy.maximum_attempts,
            policy.total_duration_seconds or _DEFAULT_TOTAL_DURATION,
        )

    def delay(self, attempt: int) -> float:
        """Returns the backoff before the attempt after `attempt`."""
        return min(self.initial * self.coefficient ** (attempt - 1), self.maximum_interval)


def is_null(value: pb.Value) -> bool:
    """Tells whether a value is absent or null (a null Attribute write deletes)."""
    return value.WhichOneof("kind") in (None, "null_value")


def context_for(run: FlowRun, exe: Execution | None) -> pb.Context:
    """Returns the Worker `Context` of a run, or of one of its Step executions."""
    context = pb.Context(flow_id=run.flow_id, run_id=run.run_id, flow_started_timestamp=int(run.start_time))
    if exe is not None:
        context.step_execution_id = exe.exe_id
        context.from_step_execution_id = exe.from_id
    return context


def state_inputs(
    run: FlowRun,
    attribute_maps: Iterable[str],
    channel_names: Iterable[str],
    channel_maps: Iterable[str],
) -> tuple[list[pb.KV], dict[str, pb.ChannelInfo], dict[str, pb.ChannelValues]]:
    """Returns the Attributes, channel sizes and loaded channel messages a method may see."""
    map_loads = list(attribute_maps)
    attributes: list[pb.KV] = []
    for key in sorted(run.attributes):
        if "/" in key and not any(
            key == load or (load.endswith("/") and key.startswith(load)) for load in map_loads
        ):
            continue
        attributes.append(pb.KV(key=key, value=run.attributes[key]))
    infos = {name: pb.ChannelInfo(size=len(queue)) for name, queue in run.channels.items() if queue}
    loaded: dict[str, pb.ChannelValues] = {}
    for name in channel_names:
        loaded[name] = pb.ChannelValues(messages=run.channels.get(name, ()))
    for load in channel_maps:
        if load.endswith("/"):
            for name, queue in run.channels.items():
                if name.startswith(load):
                    loaded[name] = pb.ChannelValues(messages=queue)
        else:
            loaded[load] = pb.ChannelValues(messages=run.channels.get(load, ()))
    return attributes, infos, loaded


def method_request(
    run: FlowRun, exe: Execution, method: Method
) -> pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest:
    """Builds a WaitFor or Execute request for a Step execution."""
    options = exe.movement.step_options
    if method == "wait_for":
        maps, names, cmaps = (
            options.wait_for_load_attribute_map_instances,
            options.wait_for_load_channel_names,
            options.wait_for_load_channel_map_instances,
        )
    else:
        maps, names, cmaps = (
            options.execute_load_attribute_map_instances,
            options.execute_load_channel_names,
            options.execute_load_channel_map_instances,
        )
    attributes, infos, loaded = state_inputs(run, maps, names, cmaps)
    context = context_for(run, exe)
    recovery = exe.execute_recovery if method == "execute" and exe.execute_recovery is not None else None
    if recovery is None and exe.movement.HasField("recovery_error_internal_only"):
        recovery = exe.movement.recovery_error_internal_only
    if recovery is not None:
        context.recovery_error.CopyFrom(recovery)
    if method == "wait_for":
        return pb.InvokeWaitForMethodRequest(
            context=context,
            flow_type=run.flow_type,
            step_type=exe.step_type,
            step_input=exe.movement.step_input if exe.movement.HasField("step_input") else None,
            attributes=attributes,
            channel_infos=infos,
            loaded_channel_messages=loaded,
            loaded_attribute_map_instances=list(maps),
            loaded_channel_names=list(names),
            loaded_channel_map_instances=list(cmaps),
        )
    request = pb.InvokeExecuteMethodRequest(
        context=context,
        flow_type=run.flow_type,
        step_type=exe.step_type,
        step_input=exe.movement.step_input if exe.movement.HasField("step_input") else None,
        attributes=attributes,
        step_exe_locals=exe.locals,
        channel_infos=infos,
        loaded_channel_messages=loaded,
        loaded_attribute_map_instances=list(maps),
        loaded_channel_names=list(names),
        loaded_channel_map_instances=list(cmaps),
    )
    if exe.condition_results is not None:
        request.condition_results.CopyFrom(exe.condition_results)
    return request


def durability(run: FlowRun, options: pb.StepOptions, method: Method) -> pb.StepDurability:
    """Resolves a method's durability: override, then failure route (SYNC), then the Flow's default."""
    override = (
        options.wait_for_durability_override if method == "wait_for" else options.execute_durability_override
    )
    if override != pb.STEP_DURABILITY_UNSPECIFIED:
        return override
    if (
        method == "wait_for"
        and options.wait_for_failure_policy == pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE
    ):
        return pb.STEP_DURABILITY_SYNC
    if (
        method == "execute"
        and options.execute_failure_policy == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
        and options.execute_failure_proceed_step_type
    ):
        return pb.STEP_DURABILITY_SYNC
    if (
        run.config.HasField("step_durability")
        and run.config.step_durability != pb.STEP_DURABILITY_UNSPECIFIED
    ):
        return run.config.step_durability
    return pb.STEP_DURABILITY_SYNC


def method_options(options: pb.StepOptions, method: Method) -> pb.StepMethodOptions:
    """Returns a method's timeout, retry policy and heartbeat timeout with the defaults filled in."""
    policy = options.wait_for_retry_policy if method == "wait_for" else options.execute_retry_policy
    timeout = options.wait_for_timeout_seconds if method == "wait_for" else options.execute_timeout_seconds
    return pb.StepMethodOptions(
        timeout_seconds=timeout or _DEFAULT_METHOD_TIMEOUT,
        retry_policy=retry_policy_with_defaults(policy),
        heartbeat_timeout_seconds=options.heartbeat_timeout_seconds or _DEFAULT_HEARTBEAT_TIMEOUT,
    )


def attributes_of(
    request: pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | None,
) -> list[pb.KV]:
    """Returns the Attributes a request carried (for history events)."""
    return [] if request is None else list(request.attributes)


def timeout_handler_movement(options: pb.FlowTimeoutHandlerOptions | None) -> pb.StepMovement:
    """The movement that runs the Flow's timeout handler: an execute with no input."""
    handler = options or pb.FlowTimeoutHandlerOptions()
    step_options = pb.StepOptions(
        skip_wait_for=True,
        execute_timeout_seconds=handler.method_timeout_seconds,
        heartbeat_timeout_seconds=handler.heartbeat_timeout_seconds,
        execute_failure_policy=handler.failure_policy,
        execute_failure_proceed_step_type=handler.failure_proceed_step_type,
        execute_durability_override=handler.durability_override,
        execute_lock_attribute_keys=handler.lock_attribute_keys,
        execute_load_attribute_map_instances=handler.load_attribute_map_instances,
        execute_load_channel_names=handler.load_channel_names,
        execute_load_channel_map_instances=handler.load_channel_map_instances,
    )
    if handler.HasField("retry_policy"):
        step_options.execute_retry_policy.CopyFrom(handler.retry_policy)
    if handler.HasField("failure_proceed_step_options"):
        step_options.execute_failure_proceed_step_options.CopyFrom(handler.failure_proceed_step_options)
    return pb.StepMovement(step_type=TIMEOUT_HANDLER, step_options=step_options)


def long_poll(seconds: int) -> float:
    """Returns a long poll's wait in seconds: 0 or less means the server maximum of 60 s."""
    return _MAX_LONG_POLL if seconds <= 0 else min(float(seconds), _MAX_LONG_POLL)


def check_decision(result: pb.InvokeExecuteMethodResponse) -> str | None:
    """Validates a Step decision the way the server does; returns the problem or None."""
    if not result.HasField("step_decision"):
        return "empty step decision is not supported"
    decision = result.step_decision
    has_close = decision.HasField("close_decision")
    if not decision.next_steps and not has_close:
        return "empty step decision is not supported"
    for movement in decision.next_steps:
        if not movement.step_type:
            return "a next Step needs a step_type"
        if is_reserved_name(movement.step_type):
            return f"next Step type {movement.step_type!r} must not contain '/', '$' or ':'"
        proceed = movement.step_options.execute_failure_proceed_step_type
        if proceed and is_reserved_name(proceed):
            return f"recovery Step type {proceed!r} must not contain '/', '$' or ':'"
    if any(not name for name in [*decision.cancel_step_types, *decision.cancel_sibling_step_types]):
        return "cancel Step types must not be empty"
    if not has_close:
        return None
    close = decision.close_decision
    kind = close.close_decision_type
    if kind == pb.CLOSE_DECISION_TYPE_UNSPECIFIED:
        return "close decision type is unspecified"
    if kind == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY:
        names = list(close.conditional_channel_names)
        if not decision.next_steps or not names:
            return "force_complete_if_channels_empty needs a fallback Step and at least one channel"
        if any(not name for name in names) or len(names) != len(set(names)):
            return "force_complete_if_channels_empty channel names must be non-empty and unique"
        return None
    if decision.next_steps:
        return "a close decision cannot be combined with next Steps"
    if close.conditional_channel_names:
        return "only force_complete_if_channels_empty takes channel names"
    string_kinds = ("string_value", "internal_blob_id_for_string_value")
    if (
        kind == pb.CLOSE_DECISION_TYPE_FORCE_FAIL
        and close.HasField("close_input")
        and close.close_input.WhichOneof("kind") not in string_kinds
    ):
        return "force_fail needs a string reason"
    if kind == pb.CLOSE_DECISION_TYPE_DEAD_END and close.HasField("close_input"):
        return "dead_end takes no output"
    return None


def new_message_id() -> str:
    """Returns a new channel message ID, a UUIDv7 (time-ordered)."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def parse_token(token: str, what: str) -> int:
    """Reads a page or resume token the devserver issued (a decimal sequence number).

    Raises:
        ServiceError: ``INVALID_ARGUMENT`` naming the token when it is not one.
    """
    if not _TOKEN.fullmatch(token):
        raise errors.invalid_argument(f"{what} {token!r} is not a devserver token")
    return int(token)
