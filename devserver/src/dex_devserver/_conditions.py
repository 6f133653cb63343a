"""Waiting-condition validation and the candidate / two-pass channel allocation of the Dex interpreter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dex.dexpb import dex_pb2 as pb

__all__ = ["SUB_FLOWS_UNSUPPORTED", "Plan", "bounds", "build_results", "plan", "validate"]

# One chosen candidate: channel-condition index -> number of messages it consumes.
Plan = dict[int, int]

_UNBOUNDED = -1
SUB_FLOWS_UNSUPPORTED = (
    "SubFlow conditions (SubFlow.run) are not implemented by dex-devserver; the WaitFor fails at once"
    " rather than being retried"
)


def bounds(condition: pb.ChannelCondition) -> tuple[int, int]:
    """Returns a channel condition's ``(min, max)``; ``max`` is -1 when unbounded."""
    has_least = condition.HasField("at_least")
    has_most = condition.HasField("at_most")
    if not has_least and not has_most:
        return 1, 1
    if has_least and has_most:
        return condition.at_least, condition.at_most
    if has_least:
        return condition.at_least, _UNBOUNDED
    return 0, condition.at_most


def validate(condition: pb.WaitingCondition) -> str | None:
    """Checks a Worker's waiting condition the way the server does.

    Returns:
        None when it is valid, otherwise the reason it is not.
    """
    kind = condition.waiting_condition_type
    if condition.sub_flow_conditions:
        return SUB_FLOWS_UNSUPPORTED
    known = {
        pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
        pb.WAITING_CONDITION_TYPE_ANY_COMPLETED,
        pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED,
    }
    has_conditions = bool(condition.timer_conditions or condition.channel_conditions)
    if kind not in known and (has_conditions or kind != pb.WAITING_CONDITION_TYPE_UNSPECIFIED):
        return f"unknown waiting condition type {kind}"
    ids: list[str] = [timer.condition_id for timer in condition.timer_conditions]
    ids += [channel.condition_id for channel in condition.channel_conditions]
    named = [condition_id for condition_id in ids if condition_id]
    if len(named) != len(set(named)):
        return "waiting condition IDs must be unique"
    for timer in condition.timer_conditions:
        if timer.duration_seconds < 0:
            return f"timer {timer.condition_id!r} has a negative duration"
        if timer.firing_unix_timestamp_seconds != 0:
            return "a Worker must leave firing_unix_timestamp_seconds unset"
    for channel in condition.channel_conditions:
        if not channel.channel_name:
            return "a channel condition needs a channel name"
        low, high = bounds(channel)
        if low < 0 or (high != _UNBOUNDED and high < 0):
            return f"channel condition on {channel.channel_name!r} has a negative bound"
        if high != _UNBOUNDED and high < low:
            return f"channel condition on {channel.channel_name!r} has at_most below at_least"
    if kind == pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED:
        if len(named) != len(ids):
            return "every condition of any_combination_of needs a condition ID"
        if not condition.condition_combinations:
            return "any_combination_of needs at least one combination"
        for combination in condition.condition_combinations:
            members = list(combination.condition_ids)
            if not members:
                return "a condition combination must not be empty"
            if len(members) != len(set(members)):
                return "a condition combination must not repeat a condition ID"
            unknown = [member for member in members if member not in named]
            if unknown:
                return f"a condition combination references unknown condition IDs {unknown}"
    elif condition.condition_combinations:
        return "condition combinations are allowed only with any_combination_of"
    return None


def _candidates(condition: pb.WaitingCondition) -> list[tuple[list[int], list[int]]]:
    timers = list(range(len(condition.timer_conditions)))
    channels = list(range(len(condition.channel_conditions)))
    kind = condition.waiting_condition_type
    if kind == pb.WAITING_CONDITION_TYPE_ANY_COMPLETED:
        # Canonical order: every Timer first, then every Channel, each in declaration order.
        by_timer: list[tuple[list[int], list[int]]] = [([index], []) for index in timers]
        return by_timer + [([], [index]) for index in channels]
    if kind == pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED:
        timer_ids = {timer.condition_id: index for index, timer in enumerate(condition.timer_conditions)}
        channel_ids = {
            channel.condition_id: index for index, channel in enumerate(condition.channel_conditions)
        }
        result: list[tuple[list[int], list[int]]] = []
        for combination in condition.condition_combinations:
            members = list(combination.condition_ids)
            result.append(
                (
                    sorted(timer_ids[member] for member in members if member in timer_ids),
                    sorted(channel_ids[member] for member in members if member in channel_ids),
                )
            )
        return result
    return [(timers, channels)]


def _allocate(
    condition: pb.WaitingCondition, channels: Sequence[int], queue_sizes: Mapping[str, int]
) -> Plan | None:
    remaining: dict[str, int] = {}
    counts: Plan = {}
    for index in channels:
        channel = condition.channel_conditions[index]
        name = channel.channel_name
        available = remaining.get(name, queue_sizes.get(name, 0))
        low, _ = bounds(channel)
        if available < low:
            return None
        remaining[name] = available - low
        counts[index] = low
    for index in channels:
        channel = condition.channel_conditions[index]
        low, high = bounds(channel)
        extra = (
            remaining[channel.channel_name]
            if high == _UNBOUNDED
            else min(high - low, remaining[channel.channel_name])
        )
        remaining[channel.channel_name] -= extra
        counts[index] += extra
    return counts


def plan(
    condition: pb.WaitingCondition, timer_done: Sequence[bool], queue_sizes: Mapping[str, int]
) -> Plan | None:
    """Finds the first satisfiable candidate of a waiting condition.

    Args:
        condition: The validated waiting condition.
        timer_done: Per Timer condition, whether it fired or was skipped.
        queue_sizes: Queued message count per physical channel name.

    Returns:
        The messages each winning channel condition consumes, or None when nothing is satisfiable yet.
    """
    if not condition.timer_conditions and not condition.channel_conditions:
        return {}
    for timers, channels in _candidates(condition):
        if all(timer_done[index] for index in timers):
            counts = _allocate(condition, channels, queue_sizes)
            if counts is not None:
                return counts
    return None


def build_results(
    condition: pb.WaitingCondition,
    timer_done: Sequence[bool],
    consumed: Mapping[int, Sequence[pb.ChannelMessage]],
) -> pb.ConditionResults:
    """Builds the `ConditionResults` handed to execute.

    Args:
        condition: The satisfied waiting condition.
        timer_done: Per Timer condition, whether it fired or was skipped.
        consumed: Per winning channel condition, the messages it consumed.

    Returns:
        Timer and channel results in condition order.
    """
    results = pb.ConditionResults()
    for index, timer in enumerate(condition.timer_conditions):
        results.timer_results.add(
            condition_id=timer.condition_id,
            condition_status=pb.CONDITION_STATUS_COMPLETED
            if timer_done[index]
            else pb.CONDITION_STATUS_WAITING,
        )
    for index, channel in enumerate(condition.channel_conditions):
        messages = consumed.get(index)
        result = results.channel_results.add(
            condition_id=channel.condition_id,
            channel_name=channel.channel_name,
            condition_status=pb.CONDITION_STATUS_WAITING
            if messages is None
            else pb.CONDITION_STATUS_COMPLETED,
        )
        for message in messages or ():
            result.values.append(message.value)
    return results
