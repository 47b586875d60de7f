"""gRPC message conversion: a sent message's 4.x properties and the proxy's refusals, and a
stored message as a 5.x client receives it (the fields the official clients check)."""

from __future__ import annotations

import pytest

from google.protobuf.duration_pb2 import Duration

from skiff.broker.grpc.convert import (
    BORN_HOST,
    BORN_TIMESTAMP,
    DELIVERY_TIMESTAMP,
    Invalid,
    fill_message,
    timestamp,
    to_message,
    to_properties,
)
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc

NOW = 1_800_000_000_000


def sent(**sp: object) -> pb.Message:
    user = sp.pop("user", {})
    sp.setdefault("message_id", "01ABCDEF")
    return pb.Message(topic=pb.Resource(name="T"), body=b"x", user_properties=user,  # type: ignore[arg-type]
                      system_properties=pb.SystemProperties(**sp))  # type: ignore[arg-type]


def test_a_sent_message_maps_to_the_proxys_properties():
    props = to_properties(sent(tag="A", keys=["k1", "k2"], message_group="g", user={"color": "red"},
                               born_timestamp=timestamp(NOW - 5), message_type=pb.FIFO), NOW)
    assert (props[Prop.TAGS], props[Prop.KEYS], props[Prop.SHARDING_KEY], props["color"]) == ("A", "k1 k2", "g", "red")
    assert props[Prop.UNIQ_KEY] == "01ABCDEF" and props["BORN_TIMESTAMP"] == str(NOW - 5)
    tx = to_properties(sent(message_type=pb.TRANSACTION), NOW)
    assert (tx[Prop.TRAN_MSG], tx[Prop.PGROUP]) == ("true", "T")
    later = to_properties(sent(delivery_timestamp=timestamp(NOW + 5000), message_type=pb.DELAY), NOW)
    assert later[Prop.TIMER_DELIVER_MS] == later[DELIVERY_TIMESTAMP] == str(NOW + 5000)


@pytest.mark.parametrize(("fields", "code"), [
    ({"message_id": ""}, pb.ILLEGAL_MESSAGE_ID),
    ({"tag": "a|b"}, pb.ILLEGAL_MESSAGE_TAG),
    ({"tag": " "}, pb.ILLEGAL_MESSAGE_TAG),
    ({"keys": ["ok", "bad\x01"]}, pb.ILLEGAL_MESSAGE_KEY),
    ({"message_group": "g" * 64}, pb.ILLEGAL_MESSAGE_GROUP),
    ({"delivery_timestamp": timestamp(NOW + 86_400_001)}, pb.ILLEGAL_DELIVERY_TIME),
    ({"user": {Prop.UNIQ_KEY: "forged"}}, pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
    ({"user": {str(i): "v" for i in range(129)}}, pb.MESSAGE_PROPERTIES_TOO_LARGE),
    ({"user": {"big": "v" * 17_000}}, pb.MESSAGE_PROPERTIES_TOO_LARGE),
])
def test_what_the_proxy_refuses_is_refused_with_its_code(fields: dict, code: int):
    with pytest.raises(Invalid) as caught:
        to_properties(sent(**fields), NOW)
    assert caught.value.code == code and str(caught.value)


def test_a_stored_retry_copy_reaches_a_5x_client_as_its_original():
    props = {Prop.UNIQ_KEY: "01FF", Prop.TAGS: "A", Prop.KEYS: "k1 k2", Prop.RETRY_TOPIC: "T",
             Prop.SHARDING_KEY: "g", DELIVERY_TIMESTAMP: str(NOW), "color": "red", Prop.WAIT: "false"}
    stored = StoredMessage("%RETRY%G_T", b"body", props, queue_id=0, queue_offset=7, born_timestamp=NOW - 9,
                           born_host="10.0.0.1:5000", store_timestamp=NOW - 1, store_host="10.0.0.2:10911",
                           reconsume_times=2)
    m = to_message(stored, receipt_handle="h", invisible_ms=30_000)
    sp = m.system_properties
    assert (m.topic.name, m.body, dict(m.user_properties)) == ("T", b"body", {"color": "red"})
    assert (sp.message_id, sp.tag, list(sp.keys), sp.message_group, sp.receipt_handle) == (
        "01FF", "A", ["k1", "k2"], "g", "h")
    assert (sp.delivery_attempt, sp.body_encoding, sp.message_type) == (3, pb.IDENTITY, pb.DELAY)
    assert (sp.body_digest.type, sp.body_digest.checksum) == (pb.MD5, "841A2D689AD86BD1611447453C22C6FC")
    assert sp.delivery_timestamp.ToMilliseconds() == NOW and sp.invisible_duration.ToMilliseconds() == 30_000
    assert (sp.queue_offset, sp.born_host) == (7, "10.0.0.1")


def test_a_plain_message_is_received_as_the_keyword_built_message_and_filled_in_place_alike():
    """`fill_message` sets fields one by one (the fast way); the message must be the one the
    keyword constructor makes, sub-second times and durations included, with no user property."""
    props = {Prop.UNIQ_KEY: "01AA", Prop.TAGS: "A", BORN_TIMESTAMP: str(NOW - 9), BORN_HOST: "10.0.0.9"}
    stored = StoredMessage("T", b"body", props, queue_id=1, queue_offset=3, born_timestamp=NOW - 9,
                           born_host="10.0.0.1:5000", store_timestamp=NOW + 123, store_host="10.0.0.2:10911")
    expected = pb.Message(topic=pb.Resource(name="T"), body=b"body", system_properties=pb.SystemProperties(
        message_id="01AA", tag="A", body_encoding=pb.IDENTITY, message_type=pb.NORMAL,
        body_digest=pb.Digest(type=pb.MD5, checksum="841A2D689AD86BD1611447453C22C6FC"),
        born_timestamp=timestamp(NOW - 9), born_host="10.0.0.9", store_timestamp=timestamp(NOW + 123),
        store_host="10.0.0.2:10911", queue_id=1, queue_offset=3, delivery_attempt=2, receipt_handle="h",
        invisible_duration=Duration(seconds=1, nanos=500_000_000)))
    received = to_message(stored, receipt_handle="h", delivery_attempt=2, invisible_ms=1_500)
    assert received == expected and not received.user_properties
    assert received.system_properties.born_timestamp.nanos == 991_000_000
    response = rpc.ReceiveMessageResponse()
    fill_message(response.message, stored, receipt_handle="h", delivery_attempt=2, invisible_ms=1_500)
    assert response.message.SerializeToString() == expected.SerializeToString()
