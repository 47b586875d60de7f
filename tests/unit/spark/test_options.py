"""Options of format("skiff"), as Spark hands them over (a CaseInsensitiveDict of strings)."""

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from skiff.spark.errors import SparkOptionError
from skiff.spark.options import SinkOptions, SourceOptions

pytestmark = pytest.mark.spark


def source(**options):
    return SourceOptions.parse(CaseInsensitiveDict({"namesrvAddr": "127.0.0.1:9876", **options}))


def test_defaults_and_case_insensitive_names():
    opts = SourceOptions.parse(CaseInsensitiveDict({"NAMESRVADDR": "h:1", "Topic": "A, B,A", "PullBatchSize": "64"}))
    assert opts.namesrv_addr == "h:1"
    assert opts.topics == ("A", "B")
    assert opts.pull_batch_size == 64
    assert (opts.sub_expression, opts.expression_type, opts.fail_on_data_loss, opts.include_properties) == \
        ("*", "TAG", True, True)
    assert opts.max_messages_per_trigger is None and opts.consumer_group is None


@pytest.mark.parametrize("options, words", [
    ({"topic": "T"}, "option namesrvAddr is required"),
    ({"namesrvAddr": "h:1"}, "exactly one of the options topic"),
    ({"namesrvAddr": "h:1", "topic": "T", "topicPattern": "T.*"}, "exactly one of the options topic"),
    ({"namesrvAddr": "h:1", "topicPattern": "(("}, "is not a regular expression"),
    ({"namesrvAddr": "h:1", "topic": "bad topic"}, "option topic: the topic 'bad topic' has characters"),
    ({"namesrvAddr": "h:1", "topic": "T", "startingOffset": "earliest"}, "unknown option(s) startingoffset"),
    ({"namesrvAddr": "h:1", "topic": "T", "maxMessagesPerTrigger": "0"}, "must be at least 1"),
    ({"namesrvAddr": "h:1", "topic": "T", "pullBatchSize": "5000"}, "must be between 1 and 1024"),
    ({"namesrvAddr": "h:1", "topic": "T", "minPartitions": "two"}, "minPartitions='two' is not a whole number"),
    ({"namesrvAddr": "h:1", "topic": "T", "failOnDataLoss": "yes"}, "must be true or false"),
    ({"namesrvAddr": "h:1", "topic": "T", "expressionType": "regex"}, "must be one of TAG, SQL92"),
    ({"namesrvAddr": "h:1", "topic": "T", "consumerGroup": "a b"}, "option consumerGroup"),
    ({"namesrvAddr": "h:1", "topic": "T", "startingOffsets": "earliest", "startingTimestamp": "5"},
     "startingOffsets or startingTimestamp, not both"),
    ({"namesrvAddr": "h:1", "topic": "T", "endingOffsets": "earliest"}, "would read nothing"),
])
def test_bad_source_options_are_named(options, words):
    with pytest.raises(SparkOptionError) as err:
        SourceOptions.parse(CaseInsensitiveDict(options))
    assert words in str(err.value)


def test_streams_refuse_batch_only_options():
    with pytest.raises(SparkOptionError, match="endingTimestamp is for batch reads"):
        source(topic="T", endingTimestamp="5").check_streaming()
    source(topic="T", maxMessagesPerTrigger="10").check_streaming()


def test_spark_own_options_pass():
    assert source(topic="T", path="x", checkpointLocation="y").topics == ("T",)


def test_sink_options():
    opts = SinkOptions.parse(CaseInsensitiveDict({"namesrvaddr": "h:1", "IDEMPOTENT": "true", "writeId": "run-7"}))
    assert (opts.topic, opts.producer_group, opts.idempotent, opts.write_id) == \
        (None, "SKIFF_SPARK_PRODUCER", True, "run-7")
    with pytest.raises(SparkOptionError, match="namesrvAddr is required"):
        SinkOptions.parse(CaseInsensitiveDict({"topic": "T"}))
    with pytest.raises(SparkOptionError, match="unknown option"):
        SinkOptions.parse(CaseInsensitiveDict({"namesrvAddr": "h:1", "tags": "x"}))
