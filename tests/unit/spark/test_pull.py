"""What a read task does with each pull answer: go on, or meet data loss (fail or skip)."""

import pickle

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from skiff.client import PullStatus, RawPullResult
from skiff.spark.errors import DataLossError
from skiff.spark.options import SourceOptions
from skiff.spark.pull import QueueRange, _SegmentReader

pytestmark = pytest.mark.spark

PART = QueueRange("Orders", "broker-a", 2, 100, 200)


def segment_reader(**options):
    opts = SourceOptions.parse(CaseInsensitiveDict({"namesrvAddr": "h:1", "topic": "Orders", **options}))
    return _SegmentReader(opts, None, PART)


def found(first, count, low=0, high=500):
    """A FOUND answer of ``count`` records from ``first`` (the reader sees only their first offset)."""
    return RawPullResult(PullStatus.FOUND, first + count, low, high, b"records"), first


def test_partitions_and_options_pickle():
    assert pickle.loads(pickle.dumps(PART)) == PART and PART.mq == ("Orders", "broker-a", 2)
    opts = segment_reader(maxMessagesPerTrigger="5").options
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_an_answer_from_the_offset_asked_goes_on():
    assert segment_reader()._after_loss(100, 132, *found(100, 32)) == 100
    filtered = segment_reader(subExpression="paid")
    assert filtered._after_loss(100, 132, *found(117, 3)) == 100
    assert filtered._after_loss(100, 132, RawPullResult(PullStatus.NO_MATCHED_MSG, 400, 0, 500), None) == 100


@pytest.mark.parametrize("result, resume", [
    ((RawPullResult(PullStatus.OFFSET_ILLEGAL, 150, 150, 500), None), 150),  # below the minimum
    (found(150, 32, low=150), 150),                                         # the broker moved on by itself
    (found(120, 12, low=0), 120),                                           # unfiltered: a run starts past it
    ((RawPullResult(PullStatus.NO_MATCHED_MSG, 130, 0, 500), None), 130),   # unfiltered: removed entries skipped
])
def test_data_loss_fails_by_default_and_is_skipped_when_allowed(result, resume):
    with pytest.raises(DataLossError, match=f"topic Orders, broker broker-a, queue 2: the query needs offset 100 "
                                            f"but the earliest offset left is {resume}"):
        segment_reader()._after_loss(100, 132, *result)
    assert segment_reader(failOnDataLoss="false")._after_loss(100, 132, *result) == resume


def test_a_queue_that_ends_before_the_planned_end_is_data_loss():
    ended = RawPullResult(PullStatus.NO_NEW_MSG, 180, 0, 180)
    with pytest.raises(DataLossError, match="queue 2 ends at offset 180, before the end 200"):
        segment_reader()._after_loss(180, 200, ended, None)
    assert segment_reader(failOnDataLoss="false")._after_loss(180, 200, ended, None) == 200
