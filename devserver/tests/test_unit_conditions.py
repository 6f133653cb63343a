from dex.dexpb import dex_pb2 as pb

from dex_devserver._conditions import build_results, plan, validate


def _channel(
    name: str, at_least: int | None = None, at_most: int | None = None, cid: str = ""
) -> pb.ChannelCondition:
    condition = pb.ChannelCondition(channel_name=name, condition_id=cid)
    if at_least is not None:
        condition.at_least = at_least
    if at_most is not None:
        condition.at_most = at_most
    return condition


def test_all_of_reserves_minimums_before_sharing_the_rest() -> None:
    condition = pb.WaitingCondition(
        waiting_condition_type=pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
        channel_conditions=[_channel("a", at_least=1), _channel("a", at_least=2, at_most=2)],
    )
    assert plan(condition, [], {"a": 2}) is None
    assert plan(condition, [], {"a": 5}) == {0: 3, 1: 2}


def test_any_of_prefers_a_fired_timer_and_consumes_nothing() -> None:
    condition = pb.WaitingCondition(
        waiting_condition_type=pb.WAITING_CONDITION_TYPE_ANY_COMPLETED,
        channel_conditions=[_channel("inbox")],
        timer_conditions=[pb.TimerCondition(duration_seconds=5)],
    )
    assert plan(condition, [True], {"inbox": 3}) == {}
    assert plan(condition, [False], {"inbox": 3}) == {0: 1}
    assert plan(condition, [False], {}) is None


def test_at_most_is_satisfied_at_once_and_for_range_takes_what_is_queued() -> None:
    at_most = pb.WaitingCondition(channel_conditions=[_channel("c", at_most=3)])
    assert plan(at_most, [], {}) == {0: 0}
    ranged = pb.WaitingCondition(channel_conditions=[_channel("c", at_least=2, at_most=4)])
    assert plan(ranged, [], {"c": 1}) is None
    assert plan(ranged, [], {"c": 9}) == {0: 4}


def test_any_combination_takes_the_first_complete_combination() -> None:
    condition = pb.WaitingCondition(
        waiting_condition_type=pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED,
        channel_conditions=[_channel("a", cid="a"), _channel("b", cid="b")],
        condition_combinations=[
            pb.ConditionCombination(condition_ids=["a", "b"]),
            pb.ConditionCombination(condition_ids=["b"]),
        ],
    )
    assert plan(condition, [], {"b": 1}) == {1: 1}
    assert plan(condition, [], {"a": 1, "b": 1}) == {0: 1, 1: 1}


def test_validation_names_the_problem() -> None:
    bad_range = pb.WaitingCondition(
        waiting_condition_type=pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
        channel_conditions=[_channel("c", at_least=3, at_most=1)],
    )
    assert validate(bad_range) == "channel condition on 'c' has at_most below at_least"
    duplicate = pb.WaitingCondition(
        waiting_condition_type=pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
        channel_conditions=[_channel("a", cid="x"), _channel("b", cid="x")],
    )
    assert validate(duplicate) == "waiting condition IDs must be unique"
    combination_without_ids = pb.WaitingCondition(
        waiting_condition_type=pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED,
        channel_conditions=[_channel("a")],
    )
    assert validate(combination_without_ids) == "every condition of any_combination_of needs a condition ID"


def test_results_mark_only_the_winner_completed() -> None:
    condition = pb.WaitingCondition(
        waiting_condition_type=pb.WAITING_CONDITION_TYPE_ANY_COMPLETED,
        channel_conditions=[_channel("a"), _channel("b")],
        timer_conditions=[pb.TimerCondition(duration_seconds=9)],
    )
    message = pb.ChannelMessage(channel_name="b", value=pb.Value(string_value="hi"), message_id="m")
    results = build_results(condition, [False], {1: [message]})
    assert [r.condition_status for r in results.channel_results] == [
        pb.CONDITION_STATUS_WAITING,
        pb.CONDITION_STATUS_COMPLETED,
    ]
    assert results.channel_results[1].values[0].string_value == "hi"
    assert results.timer_results[0].condition_status == pb.CONDITION_STATUS_WAITING
