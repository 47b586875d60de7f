import inspect

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.message import MessageQueue
from skiff.common.errors import DecodeError
from skiff.protocol import fastjson
from skiff.protocol.bodies import admin, client_calls, consumer, heartbeat, lock
from skiff.protocol.bodies.base import BodyError, JsonBody
from skiff.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from skiff.protocol.codes import LanguageCode
from tests.unit.protocol.strategies import body_strategy

BODY_CLASSES = sorted(
    {c for m in (admin, client_calls, consumer, heartbeat, lock) for c in vars(m).values()
     if inspect.isclass(c) and issubclass(c, JsonBody) and c is not JsonBody},
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_body_round_trips(cls, data):
    body = data.draw(body_strategy(cls))
    assert cls.from_json(body.to_json()) == body


def test_cpp_heartbeat_with_string_numbers_and_absent_sets():
    raw = (
        b'{"clientID":"4242-10.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
        b'"groupName":"G","messageModel":1,"subscriptionDataSet":[{"codeSet":[0,0],"subString":"TagA || TagB",'
        b'"subVersion":"1574400000000","tagsSet":["TagA","TagB"],"topic":"T"},'
        b'{"subString":"*","subVersion":"1574400000001","topic":"%RETRY%G"}]}]}\n'
    )
    hb = HeartbeatData.from_json(raw)
    assert hb == HeartbeatData(
        "4242-10.0.0.1@DEFAULT",
        consumer_data_set=(ConsumerData(
            "G", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            (SubscriptionData("T", "TagA || TagB", ("TagA", "TagB"), (0, 0), 1574400000000),
             SubscriptionData("%RETRY%G", "*", sub_version=1574400000001)),
        ),),
    )
    producer_only = HeartbeatData.from_json(b'{"clientID":"c","producerDataSet":[{"groupName":"PG"}]}')
    assert producer_only.producer_data_set == (ProducerData("PG"),) and producer_only.consumer_data_set == ()


def test_java_heartbeat_with_enum_names():
    raw = orjson.dumps({
        "clientID": "10.0.0.1@12345",
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_ACTIVELY", "groupName": "G",
            "messageModel": "BROADCASTING", "unitMode": False,
            "subscriptionDataSet": [{"classFilterMode": False, "codeSet": [2598919], "expressionType": "SQL92",
                                     "subString": "a > 1", "subVersion": 1574400000000, "tagsSet": [], "topic": "T"}],
        }],
        "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
    })
    (cd,) = HeartbeatData.from_json(raw).consumer_data_set
    assert (cd.consume_type, cd.message_model, cd.consume_from_where) == (
        ConsumeType.CONSUME_ACTIVELY, MessageModel.BROADCASTING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    assert cd.subscription_data_set[0].expression_type is ExpressionType.SQL92


def test_heartbeat_is_written_with_java_ordinals():
    hb = HeartbeatData("c", consumer_data_set=(ConsumerData(
        "G", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP),))
    obj = orjson.loads(hb.to_json())
    assert obj["clientID"] == "c"
    assert {k: obj["consumerDataSet"][0][k] for k in ("consumeType", "messageModel", "consumeFromWhere")} == {
        "consumeType": 1, "messageModel": 1, "consumeFromWhere": 5}


def test_java_consume_stats_with_object_keys():
    raw = (b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
           b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1574400000000},'
           b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":4,"consumerOffset":4,"lastTimestamp":0}}}')
    stats = consumer.ConsumeStats.from_json(raw)
    assert stats.consume_tps == 1.5 and stats.total_diff() == 3
    assert stats.offset_table[MessageQueue("T", "broker-a", 0)] == consumer.OffsetWrapper(10, 7, 1574400000000)
    # Encoded back with RocketMQ 5's pullOffset and Skiff's inFlight beside Java 4.x's fields
    # (keys sorted, as fastjson writes them): a 4.x tool ignores the two it does not know.
    assert stats.to_json() == raw.replace(b'"consumerOffset":7,', b'"consumerOffset":7,"inFlight":0,').replace(
        b'"consumerOffset":4,', b'"consumerOffset":4,"inFlight":0,').replace(
        b'"lastTimestamp":1574400000000}', b'"lastTimestamp":1574400000000,"pullOffset":0}').replace(
        b'"lastTimestamp":0}', b'"lastTimestamp":0,"pullOffset":0}')


def test_topic_stats_written_in_fastjson_form():
    table = admin.TopicStatsTable({MessageQueue("T", "b", 2): admin.TopicOffset(1, 9, 5)})
    assert table.to_json() == (b'{"offsetTable":{{"brokerName":"b","queueId":2,"topic":"T"}:'
                               b'{"lastUpdateTimestamp":5,"maxOffset":9,"minOffset":1}}}')


def test_lock_bodies():
    req = lock.LockBatchRequestBody.from_json(
        b'{"clientId":"c1","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}')
    assert req == lock.LockBatchRequestBody("G", "c1", (MessageQueue("T", "broker-a", 0),))
    resp = lock.LockBatchResponseBody(req.mq_set)
    assert orjson.loads(resp.to_json()) == {"lockOKMQSet": [{"brokerName": "broker-a", "queueId": 0, "topic": "T"}]}


def test_consumer_connection_reads_java_language_names():
    cc = consumer.ConsumerConnection.from_json(
        b'{"connectionSet":[{"clientAddr":"10.0.0.1:5000","clientId":"c1","language":"JAVA","version":406}],'
        b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
        b'"subscriptionTable":{"T":{"subString":"*","topic":"T","subVersion":1}}}')
    assert cc.connection_set == (consumer.Connection("c1", "10.0.0.1:5000", LanguageCode.JAVA, 406),)
    assert cc.subscription_table["T"].sub_version == 1


def _cpp_styled(obj: dict) -> str:
    """jsoncpp's StyledWriter output with its trailing newline removed, as the C++ client splices it."""
    return "{\n" + ",\n".join(f'   "{k}" : {orjson.dumps(v).decode()}' for k, v in obj.items()) + "\n}"


def test_cpp_consumer_running_info_with_spliced_styled_keys():
    mq = _cpp_styled({"brokerName": "broker-a", "queueId": 1, "topic": "T"})
    pq = _cpp_styled({"cachedMsgCount": 3, "commitOffset": "120", "droped": False, "lastLockTimestamp": "0",
                      "locked": True, "tryUnlockTimes": 0})
    tail = ('"jstack":"","properties":{"PROP_CLIENT_VERSION":"V3_1_8","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},'
            '"subscriptionSet":[{"subString":"*","subVersion":"1574400000000","topic":"T"}]}\n')
    info = client_calls.ConsumerRunningInfo.from_json(f'{{"mqTable":{{{mq}:{pq}}},{tail}'.encode())
    assert info.mq_table == {MessageQueue("T", "broker-a", 1): client_calls.ProcessQueueInfo(
        commit_offset=120, cached_msg_count=3, locked=True)}
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info.subscription_set == (SubscriptionData("T", sub_version=1574400000000),)
    empty = client_calls.ConsumerRunningInfo.from_json(f'{{"mqTable":}},{tail}'.encode())
    assert empty.mq_table == {} and empty.jstack == ""


def test_reset_offset_body_in_java_and_cpp_forms():
    body = client_calls.ResetOffsetBody({MessageQueue("T", "b", 0): 5})
    assert orjson.loads(body.to_json_for_cpp()) == {
        "offsetTable": [{"topic": "T", "brokerName": "b", "queueId": 0, "offset": 5}]}
    assert client_calls.ResetOffsetBody.from_json(body.to_json_for_cpp()) == body
    with pytest.raises(BodyError, match=r"offsetTable\[0\]: offset is missing"):
        client_calls.ResetOffsetBody.from_json(b'{"offsetTable":[{"topic":"T","brokerName":"b","queueId":0}]}')


@pytest.mark.parametrize(
    "raw, match",
    [
        (b"", "not JSON"),
        (b"[]", "expected an object"),
        (b'{"producerDataSet":[]}', "clientID is missing"),
        (b'{"clientID":"c","consumerDataSet":{}}', r"consumerDataSet: expected an array"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":7,"messageModel":1,'
         b'"consumeFromWhere":0}]}', r"consumerDataSet\[0\].consumeType: expected one of"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":1,"messageModel":1,'
         b'"consumeFromWhere":0,"subscriptionDataSet":[{"topic":"T","subVersion":"soon"}]}]}',
         r"subscriptionDataSet\[0\].subVersion: expected a whole number"),
        (b'{"clientID":["c"]}', "clientID: expected a string"),
    ],
)
def test_malformed_heartbeats_name_the_bad_field(raw, match):
    with pytest.raises(BodyError, match=match):
        HeartbeatData.from_json(raw)


def test_message_queue_keys_must_be_queues():
    with pytest.raises(BodyError, match="the message queue has no queueId"):
        consumer.ConsumeStats.from_json(b'{"offsetTable":{{"brokerName":"b","topic":"T"}:{}}}')
    with pytest.raises(BodyError, match="expected a message queue"):
        consumer.ConsumeStats.from_json(b'{"offsetTable":{"T":{}}}')


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["clientID", "groupName", "topic", "consumerDataSet", "subscriptionDataSet", "offsetTable",
                         "queueId", "brokerName", "mqSet", "tagsSet", "subVersion", "consumeType", "x"]),
        inner, max_size=5),
    max_leaves=20,
)


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(value=json_values)
def test_fuzz_bodies_raise_only_decode_errors(cls, value):
    try:
        cls.from_json(fastjson.dumps(value))
    except DecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_fuzz_random_bytes_raise_only_body_errors(data):
    for cls in (HeartbeatData, consumer.ConsumeStats, client_calls.ConsumerRunningInfo):
        try:
            cls.from_json(data)
        except BodyError:
            pass


def test_data_version_counts_changes():
    assert admin.DataVersion(5, 2).next(9) == admin.DataVersion(9, 3)
