"""A real `skiff broker` (with a real NameServer) taking sends on every code, refusing
what it must with a clear remark, and finding messages by id and key."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop
from skiff.common.stored_message import decode_record
from skiff.protocol.bodies.route import TopicRouteData
from skiff.protocol.bodies.topic import TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.message_codec import decode_stored_messages
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.processes import start_broker
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, send_header, with_wire
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine

MAX_BODY = 65536


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("send"), broker_args=[f"--maxMessageSize={MAX_BODY}"]) as c:
        yield c


def create_topic(topic: str, read: int, write: int, perm: int) -> dict[str, str]:
    return CreateTopicRequestHeader(topic, "TBW102", read, write, perm, "SINGLE_TAG").to_ext()


def test_every_send_code_lands_in_order_with_hosts_and_ids(cluster: Cluster):
    async def test(wire: BrokerWire):
        sent = [
            await wire.send(Message.of("Codes", b"v1", tags="A", keys="k1 k2"), code=RequestCode.SEND_MESSAGE),
            await wire.send(Message.of("Codes", b"v2" * 3000, tags="B"), code=RequestCode.SEND_MESSAGE_V2, compress=True),
            await wire.send_batch("Codes", [Message.of("Codes", f"b{i}", keys=f"bk{i}") for i in range(3)]),
            await wire.send_batch("Codes", [Message.of("Codes", f"c{i}" * 2000) for i in range(2)],
                                  code=RequestCode.SEND_MESSAGE, compress=True),
        ]
        assert [r.code for r in sent] == [ResponseCode.SUCCESS] * 4, [r.remark for r in sent]
        assert [int(r.ext("queueOffset")) for r in sent] == [0, 1, 2, 5]
        assert [len(r.ext("msgId").split(",")) for r in sent] == [1, 1, 3, 2]
        assert {r.ext("MSG_REGION") for r in sent} == {"DefaultRegion"}
        msgs = await wire.pull_messages("G-codes", "Codes", 0)
        assert [m.body for m in msgs] == [b"v1", b"v2" * 3000, b"b0", b"b1", b"b2", b"c0" * 2000, b"c1" * 2000]
        assert [m.queue_offset for m in msgs] == list(range(7))
        assert (msgs[0].tags, msgs[0].keys, msgs[1].tags, msgs[3].keys) == ("A", ["k1", "k2"], "B", ["bk1"])
        assert len({m.properties[Prop.UNIQ_KEY] for m in msgs}) == 7
        assert {m.store_host for m in msgs} == {cluster.broker_addr()}
        local = wire.client.connections[cluster.broker_addr()].local_addr
        assert {m.born_host for m in msgs} == {local}
        ids = ",".join(r.ext("msgId") for r in sent).split(",")
        assert ids == [m.offset_msg_id for m in msgs]
        assert [decode_offset_msg_id(i).physical_offset for i in ids] == [m.commit_log_offset for m in msgs]
    with_wire(cluster.broker_addr(), test)


def test_a_new_topic_is_created_from_the_template_and_routed(cluster: Cluster):
    async def test(wire: BrokerWire):
        resp = await wire.send(Message.of("AutoCreated", b"x"), queue_id=3)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        resp = await wire.send(Message.of("AutoCreated", b"x"), queue_id=4)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "queueId 4 is illegal: topic AutoCreated has 4 write and 4 read queues" in resp.remark
        table = TopicConfigSerializeWrapper.from_json((await wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body)
        tc = table.topic_config_table["AutoCreated"]
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, 6)

        namesrv = RemotingClient()
        try:
            async def routed():
                request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AutoCreated"})
                r = await namesrv.invoke(cluster.namesrv_addr, request, 5000)
                return r.code == ResponseCode.SUCCESS and TopicRouteData.from_json(r.body)
            route = await eventually(routed, 10, "the new topic's route")
            assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 4)]
            assert route.broker_datas[0].broker_addrs == {0: cluster.broker_addr()}
        finally:
            await namesrv.close()
    with_wire(cluster.broker_addr(), test)


def test_permissions_are_enforced(cluster: Cluster):
    async def test(wire: BrokerWire):
        for topic, perm in (("ReadOnly", 4), ("WriteOnly", 2)):
            resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic(topic, 2, 2, perm))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        refused = await wire.send(Message.of("ReadOnly", b"x"))
        assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION,
                                                  "the topic ReadOnly does not accept messages (perm 4)")
        assert (await wire.send(Message.of("WriteOnly", b"x"))).code == ResponseCode.SUCCESS
        pulled = await wire.pull("G-perm", "WriteOnly", 0, 0)
        assert pulled.code == ResponseCode.NO_PERMISSION and "may not be read" in pulled.remark
        assert (await wire.pull("G-perm", "ReadOnly", 0, 0)).code == ResponseCode.PULL_NOT_FOUND
        too_many = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic("Huge", 2000, 8, 6))
        assert (too_many.code, too_many.remark) == (ResponseCode.SYSTEM_ERROR,
                                                    "readQueueNums=2000 is out of range (0 to 1024)")
    with_wire(cluster.broker_addr(), test)


@pytest.mark.parametrize(("message", "code", "words"), [
    (Message.of("bad topic!", b"x"), ResponseCode.MESSAGE_ILLEGAL, "has characters other than letters"),
    (Message.of("T" * 128, b"x"), ResponseCode.MESSAGE_ILLEGAL, "128 characters, more than the 127 allowed"),
    (Message.of("Big", b"x" * (MAX_BODY + 1)), ResponseCode.MESSAGE_ILLEGAL,
     f"the body is {MAX_BODY + 1} bytes, more than maxMessageSize={MAX_BODY}"),
    (Message.of(SCHEDULE_TOPIC, b"x"), ResponseCode.NO_PERMISSION, "sending to the system topic SCHEDULE_TOPIC_XXXX"),
    (Message.of("Late", b"x", delay_level=0, properties={Prop.DELAY: "later"}), ResponseCode.MESSAGE_ILLEGAL,
     "the DELAY property 'later' is not a delay level (1 to 18)"),
    (Message.of("Far", b"x", delay_ms=3 * 365 * 86_400_000), ResponseCode.MESSAGE_ILLEGAL,
     "more than timerMaxDelaySec=63072000 allows"),
])
def test_bad_messages_are_refused_with_the_reason(cluster: Cluster, message: Message, code: int, words: str):
    async def test(wire: BrokerWire):
        resp = await wire.send(message)
        assert resp.code == code and words in resp.remark, resp.remark
    with_wire(cluster.broker_addr(), test)


def test_bad_batches_are_refused_and_nothing_of_them_stored(cluster: Cluster):
    async def test(wire: BrokerWire):
        delayed = await wire.send_batch("Batches", [Message.of("Batches", b"a"), Message.of("Batches", b"b", delay_level=2)])
        assert delayed.code == ResponseCode.MESSAGE_ILLEGAL and "cannot hold delayed messages" in delayed.remark
        header = send_header(RequestCode.SEND_BATCH_MESSAGE, "Batches", 0, "", batch=True)
        cut = await wire.call(RequestCode.SEND_BATCH_MESSAGE, header, struct.pack(">iiiii", 99, 0, 0, 0, 50) + b"short")
        assert cut.code == ResponseCode.MESSAGE_ILLEGAL and "the batch body does not decode" in cut.remark
        assert (await wire.pull("G-b", "Batches", 0, 0)).code == ResponseCode.PULL_NOT_FOUND
    with_wire(cluster.broker_addr(), test)


def test_unknown_topics_are_refused_when_auto_creation_is_off(tmp_path: Path):
    with start_broker(tmp_path, "", "--autoCreateTopicEnable=false") as broker:
        async def main():
            wire = BrokerWire(broker.addr)
            try:
                resp = await wire.send(Message.of("Nowhere", b"x"))
                assert resp.code == ResponseCode.TOPIC_NOT_EXIST
                assert resp.remark == ("topic Nowhere does not exist on broker broker-a and cannot be created: "
                                       "autoCreateTopicEnable is false")
                created = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic("Made", 1, 1, 6))
                assert created.code == ResponseCode.SUCCESS
                assert (await wire.send(Message.of("Made", b"x"))).code == ResponseCode.SUCCESS
            finally:
                await wire.close()
        run_coroutine(main())


def test_a_malformed_frame_closes_only_its_connection(cluster: Cluster):
    async def test(wire: BrokerWire):
        assert (await wire.send(Message.of("Frames", b"before"))).code == ResponseCode.SUCCESS
        host, port = cluster.broker_addr().split(":")
        loop = asyncio.get_running_loop()

        def garbage() -> bytes:
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(struct.pack(">ii", 64, 1000) + b"\xff" * 60)  # header longer than the frame
                return s.recv(100)
        assert await loop.run_in_executor(None, garbage) == b""  # closed by the broker, no answer
        assert (await wire.send(Message.of("Frames", b"after"))).code == ResponseCode.SUCCESS
        cluster.broker().wait_for_line(r"malformed frame")  # the log line may trail the close
    with_wire(cluster.broker_addr(), test)


def test_messages_are_found_by_id_and_by_key(cluster: Cluster):
    async def test(wire: BrokerWire):
        sent = await wire.send(Message.of("Lookup", b"needle", keys="order-42 customer-7"))
        offset = decode_offset_msg_id(sent.ext("msgId")).physical_offset
        view = await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        found = decode_record(view.body)
        assert (found.body, found.offset_msg_id, found.keys) == (b"needle", sent.ext("msgId"), ["order-42", "customer-7"])
        missing = await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 1 << 40})
        assert missing.code == ResponseCode.SYSTEM_ERROR and "can not find message" in missing.remark

        def query(key: str, **extra: object):
            return wire.call(RequestCode.QUERY_MESSAGE, {"topic": "Lookup", "key": key, "maxNum": 32,
                                                         "beginTimestamp": 0, "endTimestamp": 1 << 62, **extra})
        by_key = decode_stored_messages((await query("customer-7")).body)
        assert [m.body for m in by_key] == [b"needle"]
        uniq = found.properties[Prop.UNIQ_KEY]
        by_id = await query(uniq, _UNIQUE_KEY_QUERY="true")
        assert [m.offset_msg_id for m in decode_stored_messages(by_id.body)] == [sent.ext("msgId")]
        assert int(by_id.ext("indexLastUpdatePhyoffset")) > offset
        assert (await query("no-such-key")).code == ResponseCode.QUERY_NOT_FOUND
    with_wire(cluster.broker_addr(), test)
