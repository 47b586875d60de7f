"""Route, topic and registration bodies: round trips and the JSON other
RocketMQ implementations write."""

from __future__ import annotations

import dataclasses
import inspect
import struct
import zlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.protocol.bodies import register, route, topic
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.base import JsonBody
from skiff.protocol.bodies.register import RegisterBrokerBody
from skiff.protocol.bodies.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from skiff.protocol.bodies.topic import Perm, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType, perm_text
from skiff.protocol.codes import SerializeType
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, encode_frame_bytes
from skiff.protocol.headers import namesrv as namesrv_headers
from skiff.protocol.headers.base import Header
from skiff.protocol.headers.namesrv import RegisterBrokerRequestHeader
from tests.unit.protocol.strategies import body_strategy, header_strategy

BODY_CLASSES = sorted(
    {c for m in (register, route, topic) for c in vars(m).values()
     if inspect.isclass(c) and issubclass(c, JsonBody) and c is not JsonBody and c.__module__ == m.__name__},
    key=lambda c: c.__name__,
)
HEADER_CLASSES = sorted(
    {c for c in vars(namesrv_headers).values() if inspect.isclass(c) and issubclass(c, Header) and c is not Header},
    key=lambda c: c.__name__,
)
topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%|", min_size=1,
                      max_size=20)


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_namesrv_body_round_trips(cls, data):
    body = data.draw(body_strategy(cls))
    assert cls.from_json(body.to_json()) == body


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=30, deadline=None)
@given(data=st.data(), serialize=st.sampled_from(list(SerializeType)))
def test_every_namesrv_header_round_trips_through_a_frame(cls, data, serialize):
    header = data.draw(header_strategy(cls))
    cmd = RemotingCommand(code=103, ext_fields=header.to_ext(), serialize_type=serialize)
    (decoded,) = FrameDecoder().feed(encode_frame_bytes(cmd))
    assert cls.from_ext(decoded.ext_fields) == header


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_register_body_round_trips_compressed_without_the_flags(data):
    configs = data.draw(st.lists(body_strategy(TopicConfig).map(lambda tc: dataclasses.replace(
        tc, topic_name=data.draw(topic_names))), max_size=5))
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper({tc.topic_name: tc for tc in configs}, data.draw(body_strategy(DataVersion))),
        data.draw(body_strategy(tuple[str, ...])),
    )
    got = RegisterBrokerBody.decode(body.encode(True), True)
    expected_table = {
        name: TopicConfig(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type)
        for name, tc in body.topic_config_serialize_wrapper.topic_config_table.items()
    }
    assert got.topic_config_serialize_wrapper.topic_config_table == expected_table
    assert got.topic_config_serialize_wrapper.data_version == body.topic_config_serialize_wrapper.data_version
    assert got.filter_server_list == body.filter_server_list
    assert RegisterBrokerBody.decode(body.encode(False), False) == body


def test_route_json_is_what_rocketmq_clients_read():
    route = TopicRouteData(
        (QueueData("broker-a", 4, 4, 6),),
        (BrokerData("DefaultCluster", "broker-a", {1: "10.0.0.6:10911", 0: "10.0.0.5:10911"}),),
        {},
        "broker-a:4",
    )
    assert orjson.loads(route.to_json()) == {
        "orderTopicConf": "broker-a:4",
        "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                        "topicSysFlag": 0}],
        "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a",
                         "brokerAddrs": {"0": "10.0.0.5:10911", "1": "10.0.0.6:10911"}}],
        "filterServerTable": {},
    }
    assert "orderTopicConf" not in orjson.loads(TopicRouteData().to_json())


def test_reads_fastjson_unquoted_keys_and_the_old_flag_spelling():
    java = (b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.5:10911",1:"10.0.0.6:10911"},"brokerName":"b",'
            b'"cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,'
            b'"readQueueNums":8,"topicSynFlag":3,"writeQueueNums":8}]}')
    route = TopicRouteData.from_json(java)
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"}
    assert route.broker_datas[0].master_addr == "10.0.0.5:10911"
    assert route.queue_datas == (QueueData("b", 8, 8, 6, 3),)
    info = ClusterInfo.from_json(b'{"brokerAddrTable":{"b":{"brokerAddrs":{0:"h:1"},"brokerName":"b","cluster":"c"}},'
                                 b'"clusterAddrTable":{"c":["b"]}}')
    assert info.broker_addr_table["b"].broker_addrs == {0: "h:1"} and info.cluster_addr_table == {"c": ("b",)}


def test_compressed_body_layout_matches_rocketmq():
    version = DataVersion(1574400000000, 3)
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper({"T": TopicConfig("T", 4, 2, 6, TopicFilterType.MULTI_TAG, 1, True)}, version),
        ("10.0.0.9:1",),
    )
    raw = zlib.decompress(body.to_compressed())
    dv = b'{"counter":3,"timestamp":1574400000000}'
    topic = b"T 4 2 6 MULTI_TAG"
    filters = b'["10.0.0.9:1"]'
    assert raw == (struct.pack(">i", len(dv)) + dv + struct.pack(">i", 1) + struct.pack(">i", len(topic)) + topic
                   + struct.pack(">i", len(filters)) + filters)


def test_java_register_body_json_is_read():
    java = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"timestamp":1700},'
            b'"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
            b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}')
    body = RegisterBrokerBody.from_json(java)
    wrapper = body.topic_config_serialize_wrapper
    assert wrapper.data_version == DataVersion(1700, 7)
    assert wrapper.topic_config_table == {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}


@pytest.mark.parametrize(
    "data, compressed, words",
    [
        (b"[1]", False, "expected an object"),
        (b"{not json", False, "not JSON"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":"rw"}}}}', False,
         r"topicConfigTable\['T'\].perm: expected a whole number"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","topicFilterType":"X"}}}}', False,
         "SINGLE_TAG, MULTI_TAG"),
        (b'{"filterServerList":{}}', False, "filterServerList: expected an array"),
        (b"not zlib", True, "does not inflate"),
        (zlib.compress(b"\x00\x00\x00\x02{}"), True, "ends before its topic count"),
        (zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 99)), True, "overruns"),
        (zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">ii", 1, 3) + b"T 4"), True, "5 space-separated"),
        (zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">ii", 1, 11) + b"T x 4 6 ONE"), True, "bad count"),
        (zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">ii", 0, 3) + b"[1,"), True, "not JSON"),
        (zlib.compress(b"x" * 100)[:-6], True, "cut short"),
    ],
)
def test_bad_register_bodies_raise_decode_errors_that_say_why(data, compressed, words):
    with pytest.raises(DecodeError, match=words):
        RegisterBrokerBody.decode(data, compressed)


def test_perm_and_header_helpers():
    assert perm_text(Perm.READ | Perm.WRITE) == "RW-" and perm_text(7) == "RWX"
    header = RegisterBrokerRequestHeader.from_ext({"brokerName": "b", "brokerAddr": "h:1", "clusterName": "c",
                                                   "haServerAddr": "h:2", "brokerId": "0", "compressed": "1",
                                                   "bodyCrc32": "12"})
    assert header.compressed is True and header.body_crc32 == 12 and header.broker_id == 0
    assert header.to_ext()["compressed"] == "true"
