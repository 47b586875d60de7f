"""The exact request frames the RocketMQ C++ client (1.2.3, in PyPI `rocketmq` 0.4.4)
and its 2.x successor write, parsed through the frame decoder into headers.

jsoncpp's FastWriter sorts keys, escapes control characters as \\u00XX, mixes
JSON numbers and strings in extFields, writes booleans as "0"/"1" and ends the
header with a newline that headerLen counts. Oneway requests arrive with flag 0.
"""

import struct

import pytest

from skiff.common.properties import decode_properties
from skiff.common.sysflag import PullSysFlag
from skiff.protocol.codes import RequestCode
from skiff.protocol.frame import FrameDecoder
from skiff.protocol.headers import consumer, pull, transaction
from skiff.protocol.headers.send import SendMessageRequestHeader, decode_send_request

_RPC_HOOK = '"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'


def cpp_frame(code: int, ext_json: str, body: bytes = b"", flag: int = 0) -> bytes:
    header = (
        f'{{"code":{code},"extFields":{{{ext_json}}},"flag":{flag},"language":"CPP",'
        f'"opaque":7,"remark":"","version":63}}\n'
    ).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def decode(code: int, ext_json: str, body: bytes = b""):
    (cmd,) = FrameDecoder().feed(cpp_frame(code, ext_json, body))
    assert cmd.code == code and cmd.language == "CPP" and cmd.flag == 0 and cmd.body == body
    return cmd


SEND_EXT = (
    _RPC_HOOK + '"batch":"0","bornTimestamp":"1574400000123","defaultTopic":"TBW102",'
    '"defaultTopicQueueNums":4,"flag":0,"producerGroup":"PG",'
    '"properties":"KEYS\\u0001k1 k2\\u0002TAGS\\u0001TagA\\u0002UNIQ_KEY\\u00010A0000010E4B2B0A\\u0002WAIT\\u0001true\\u0002",'
    '"queueId":3,"reconsumeTimes":"0","sysFlag":0,"topic":"TopicTest","unitMode":"0"'
)


def test_cpp_send_message():
    cmd = decode(RequestCode.SEND_MESSAGE, SEND_EXT)
    h = decode_send_request(cmd.code, cmd.ext_fields)
    assert h == SendMessageRequestHeader(
        producer_group="PG", topic="TopicTest", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=3, sys_flag=0, born_timestamp=1574400000123, flag=0, properties=h.properties,
        reconsume_times=0, unit_mode=False, batch=False,
    )
    assert decode_properties(h.properties) == {
        "KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": "0A0000010E4B2B0A", "WAIT": "true"}


def test_cpp_batch_send_on_code_10_reads_batch_one_as_true():
    cmd = decode(RequestCode.SEND_MESSAGE, SEND_EXT.replace('"batch":"0"', '"batch":"1"').replace('"sysFlag":0', '"sysFlag":1'))
    h = decode_send_request(cmd.code, cmd.ext_fields)
    assert h.batch is True and h.sys_flag == 1


def test_cpp2_send_message_v2():
    ext = (
        '"a":"PG","b":"TopicTest","c":"TBW102","d":4,"e":1,"f":0,"g":"1574400000123","h":0,'
        '"i":"WAIT\\u0001true\\u0002","j":"0","k":"0","l":0,"m":"1"'
    )
    cmd = decode(RequestCode.SEND_MESSAGE_V2, _RPC_HOOK + ext)
    h = decode_send_request(cmd.code, cmd.ext_fields)
    assert isinstance(h, SendMessageRequestHeader)
    assert (h.producer_group, h.topic, h.queue_id, h.born_timestamp) == ("PG", "TopicTest", 1, 1574400000123)
    assert (h.max_reconsume_times, h.batch, h.unit_mode, h.reconsume_times) == (0, True, False, 0)


@pytest.mark.parametrize(
    "ext, want",
    [
        (   # push consumer: commit offset, suspend, subscription
            '"commitOffset":"118","consumerGroup":"G","maxMsgNums":32,"queueId":3,"queueOffset":"120",'
            '"subVersion":"1574400000000","subscription":"TagA || TagB","suspendTimeoutMillis":"15000",'
            '"sysFlag":7,"topic":"T"',
            pull.PullMessageRequestHeader("G", "T", 3, 120, 32, 7, 118, 15000, 1574400000000, "TagA || TagB"),
        ),
        (   # pull consumer: subscription flag only
            '"commitOffset":"0","consumerGroup":"G","maxMsgNums":32,"queueId":0,"queueOffset":"0",'
            '"subVersion":"0","subscription":"*","suspendTimeoutMillis":"20000","sysFlag":4,"topic":"T"',
            pull.PullMessageRequestHeader("G", "T", 0, 0, 32, 4, 0, 20000, 0, "*"),
        ),
    ],
)
def test_cpp_pull_message(ext, want):
    cmd = decode(RequestCode.PULL_MESSAGE, _RPC_HOOK + ext)
    h = pull.PullMessageRequestHeader.from_ext(cmd.ext_fields)
    assert h == want
    assert PullSysFlag.SUBSCRIPTION in PullSysFlag(h.sys_flag)


@pytest.mark.parametrize(
    "code, cls, ext, want",
    [
        (RequestCode.QUERY_CONSUMER_OFFSET, consumer.QueryConsumerOffsetRequestHeader,
         '"consumerGroup":"G","queueId":3,"topic":"T"', ("G", "T", 3)),
        (RequestCode.UPDATE_CONSUMER_OFFSET, consumer.UpdateConsumerOffsetRequestHeader,
         '"commitOffset":"120","consumerGroup":"G","queueId":3,"topic":"T"', ("G", "T", 3, 120)),
        (RequestCode.GET_MAX_OFFSET, consumer.QueueRequestHeader, '"queueId":3,"topic":"T"', ("T", 3)),
        (RequestCode.GET_MIN_OFFSET, consumer.QueueRequestHeader, '"queueId":3,"topic":"T"', ("T", 3)),
        (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, consumer.SearchOffsetRequestHeader,
         '"queueId":3,"timestamp":"1574400000000","topic":"T"', ("T", 3, 1574400000000)),
        (RequestCode.GET_EARLIEST_MSG_STORETIME, consumer.QueueRequestHeader,
         '"queueId":3,"topic":"T"', ("T", 3)),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumer.GetConsumerListByGroupRequestHeader,
         '"consumerGroup":"G"', ("G",)),
        (RequestCode.CONSUMER_SEND_MSG_BACK, consumer.ConsumerSendMsgBackRequestHeader,
         '"delayLevel":0,"group":"G","offset":"123456"', (123456, "G", 0)),
        (RequestCode.UNREGISTER_CLIENT, consumer.UnregisterClientRequestHeader,
         '"clientID":"4242-10.0.0.1@DEFAULT","consumerGroup":"G","producerGroup":""',
         ("4242-10.0.0.1@DEFAULT", None, "G")),
        (RequestCode.END_TRANSACTION, transaction.EndTransactionRequestHeader,
         '"commitLogOffset":"1024","commitOrRollback":"8","fromTransactionCheck":"1","msgId":"0A00000100002A9F",'
         '"producerGroup":"PG","tranStateTableOffset":"5","transactionId":""',
         ("PG", 5, 1024, 8, "0A00000100002A9F", True, None)),
    ],
)
def test_cpp_consumer_and_transaction_requests(code, cls, ext, want):
    cmd = decode(code, _RPC_HOOK + ext)
    h = cls.from_ext(cmd.ext_fields)
    got = tuple(getattr(h, f) for f in h.__dataclass_fields__)[: len(want)]
    assert got == want


def test_cpp_oneway_update_offset_arrives_as_a_two_way_request():
    (cmd,) = FrameDecoder().feed(cpp_frame(RequestCode.UPDATE_CONSUMER_OFFSET,
                                           '"commitOffset":"1","consumerGroup":"G","queueId":0,"topic":"T"'))
    assert not cmd.is_oneway and not cmd.is_response
    assert cmd.response().opaque == 7
