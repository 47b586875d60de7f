"""Offsets of the skiff source: canonical JSON, options, admission control and partition planning."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.message import MessageQueue
from skiff.spark.errors import SparkOptionError
from skiff.spark.offsets import (
    OffsetRange,
    QueueBounds,
    from_spark,
    parse_json_option,
    plan_ranges,
    rate_limit,
    resolve,
    to_spark,
)

pytestmark = pytest.mark.spark

queues = st.builds(MessageQueue, st.sampled_from(["Orders", "Pay", "a-b"]), st.sampled_from(["broker-a", "broker-b"]),
                   st.integers(0, 20))
offset_maps = st.dictionaries(queues, st.integers(0, 10**12), max_size=12)


@given(offset_maps, st.randoms())
def test_spark_json_is_canonical_and_round_trips(offsets, rnd):
    shuffled = list(offsets.items())
    rnd.shuffle(shuffled)
    assert json.dumps(to_spark(dict(shuffled))) == json.dumps(to_spark(offsets))
    assert json.dumps(to_spark(offsets)) == json.dumps(to_spark(offsets), sort_keys=True)
    assert from_spark(json.loads(json.dumps(to_spark(offsets)))) == offsets


def test_spark_json_shape():
    offsets = {MessageQueue("T", "broker-b", 10): 5, MessageQueue("T", "broker-a", 2): 7,
               MessageQueue("T", "broker-a", 1): 3}
    assert json.dumps(to_spark(offsets)) == '{"T": {"broker-a": {"1": 3, "2": 7}, "broker-b": {"10": 5}}}'


@pytest.mark.parametrize("text, words", [
    ("{not json", "neither earliest, latest nor JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"T": 3}', "must map broker names"),
    ('{"T": {"broker-a": 3}}', "must map queue ids"),
    ('{"T": {"broker-a": {"x": 3}}}', "queue id 'x' is not a whole number"),
    ('{"T": {"broker-a": {"0": -3}}}', "-2 (earliest) or -1 (latest)"),
    ('{"T": {"broker-a": {"0": "7"}}}', "must be a whole number"),
    ('{"T": {"broker-a": {"0": true}}}', "must be a whole number"),
])
def test_bad_offsets_json_says_what_is_wrong(text, words):
    with pytest.raises(SparkOptionError, match="startingOffsets") as err:
        parse_json_option(text, "startingOffsets")
    assert words in str(err.value)


def test_resolve_replaces_marks_and_defaults_unnamed_queues():
    a0, a1, a2 = (MessageQueue("T", "broker-a", i) for i in range(3))
    table = {a0: QueueBounds(5, 50), a1: QueueBounds(0, 9), a2: QueueBounds(3, 3)}
    spec = parse_json_option('{"T": {"broker-a": {"0": -1, "1": 4}}}', "startingOffsets")
    assert resolve(spec, table, "startingOffsets", -2) == {a0: 50, a1: 4, a2: 3}


def test_resolve_refuses_queues_that_do_not_exist():
    table = {MessageQueue("T", "broker-a", 0): QueueBounds(0, 1)}
    spec = parse_json_option('{"T": {"broker-z": {"0": 1}}}', "endingOffsets")
    with pytest.raises(SparkOptionError, match=r"endingOffsets names queues .* T@broker-z:0"):
        resolve(spec, table, "endingOffsets", -1)


backlogs = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=10)


@given(backlogs, st.integers(1, 3000))
def test_rate_limit_admits_exactly_the_limit_in_proportion(rows, max_rows):
    start = {MessageQueue("T", "b", i): s for i, (s, _) in enumerate(rows)}
    target = {MessageQueue("T", "b", i): s + n for i, (s, n) in enumerate(rows)}
    end = rate_limit(start, target, max_rows)
    total = sum(target[q] - start[q] for q in target)
    assert sum(end[q] - start[q] for q in end) == min(total, max_rows)
    for q in target:
        assert start[q] <= end[q] <= target[q]
        if total > max_rows:
            exact = (target[q] - start[q]) * max_rows / total
            assert abs((end[q] - start[q]) - exact) < 1


def test_rate_limit_never_moves_a_queue_back():
    q = MessageQueue("T", "b", 0)
    assert rate_limit({q: 10}, {q: 4}, 100) == {q: 10}
    assert rate_limit({q: 10}, {q: 4}, 1) == {q: 10}


@given(backlogs, st.integers(1, 40))
def test_plan_ranges_cover_each_range_once_in_about_min_partitions(rows, min_partitions):
    start = {MessageQueue("T", "b", i): s for i, (s, _) in enumerate(rows)}
    end = {MessageQueue("T", "b", i): s + n for i, (s, n) in enumerate(rows)}
    parts = plan_ranges(start, end, min_partitions)
    for q in end:
        mine = [r for r in parts if r.mq == q]
        assert sum(r.size for r in mine) == end[q] - start[q]
        assert all(r.size > 0 for r in mine)
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
    nonempty = sum(1 for q in end if end[q] > start[q])
    if nonempty >= min_partitions:
        assert len(parts) == nonempty
    else:
        assert nonempty <= len(parts) <= min_partitions + nonempty


@settings(deadline=None)
@given(backlogs, st.one_of(st.none(), st.integers(1, 40)), st.integers(1, 500))
def test_plan_ranges_cut_every_range_into_even_parts_of_at_most_max_records(rows, min_partitions, max_records):
    start = {MessageQueue("T", "b", i): s for i, (s, _) in enumerate(rows)}
    end = {MessageQueue("T", "b", i): s + n for i, (s, n) in enumerate(rows)}
    parts = plan_ranges(start, end, min_partitions, max_records)
    assert all(0 < r.size <= max_records for r in parts)
    for q in end:
        mine = [r for r in parts if r.mq == q]
        assert sum(r.size for r in mine) == end[q] - start[q]
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
        if mine:
            assert max(r.size for r in mine) - min(r.size for r in mine) <= 1
        if min_partitions is None:
            assert len(mine) == -(-(end[q] - start[q]) // max_records)


def test_plan_ranges_skips_empty_and_unknown_queues():
    a, b, c = (MessageQueue("T", "broker-a", i) for i in range(3))
    assert plan_ranges({a: 3, b: 5}, {a: 7, b: 5, c: 9}) == [OffsetRange(a, 3, 7)]
