"""One gate for every door: each refusal case run through remoting and through gRPC, against
one real broker, gets the same refusal — the 4.x code over remoting, the proxy's gRPC code
for it over gRPC, and the same reason text on both (skiff.broker.operations.gate).

The first case is the hole this gate closed: a write-only topic (perm 2) served its
messages over gRPC PullMessage while remoting refused them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import PopResponseCode, RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.headers.pop import NORMAL_TOPIC, ExtraInfo
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire, first_status
from skiff.testing.processes import free_port
from skiff.testing.wire import BrokerWire

OK_GROUP, OFF_GROUP, NO_GROUP = "gate-ok", "gate-off", "gate-missing"
READ_WRITE, WRITE_ONLY, READ_ONLY, NO_TOPIC = "GateRW", "GateWO", "GateRO", "GateMissing"


@dataclass(frozen=True)
class Doors:
    remoting: BrokerWire
    grpc: GrpcWire


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory):
    port = free_port()
    args = [f"--grpcServerPort={port}", "--autoCreateSubscriptionGroup=false"]
    with Cluster(tmp_path_factory.mktemp("gate"), broker_args=args) as cluster:
        async def prepare() -> None:
            wire = BrokerWire(cluster.broker_addr())
            try:
                for topic, perm in ((READ_WRITE, 6), (WRITE_ONLY, 6), (READ_ONLY, 6)):
                    header = CreateTopicRequestHeader(topic, "TBW102", 1, 1, perm, "SINGLE_TAG")
                    resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                    sent = await wire.send(Message.of(topic, b"held"))
                    assert sent.code == ResponseCode.SUCCESS, sent.remark
                for topic, perm in ((WRITE_ONLY, 2), (READ_ONLY, 4)):  # updated after a message is in it
                    header = CreateTopicRequestHeader(topic, "TBW102", 1, 1, perm, "SINGLE_TAG")
                    resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                for group in (SubscriptionGroupConfig(OK_GROUP),
                              SubscriptionGroupConfig(OFF_GROUP, consume_enable=False)):
                    resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, group.to_json())
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
            finally:
                await wire.close()
        asyncio.run(prepare())
        yield cluster.broker_addr(), f"127.0.0.1:{port}"


def through_both(endpoint: tuple[str, str], test: Callable[[Doors], Awaitable[None]]) -> None:
    async def main() -> None:
        doors = Doors(BrokerWire(endpoint[0]), GrpcWire(endpoint[1]))
        try:
            await test(doors)
        finally:
            await doors.remoting.close()
            await doors.grpc.close()
    asyncio.run(main())


# (group, topic, queue id, remoting code, gRPC code, words of the reason)
CONSUME_CASES = [
    (OK_GROUP, WRITE_ONLY, 0, ResponseCode.NO_PERMISSION, pb.FORBIDDEN, "may not be read (perm 2)"),
    (OFF_GROUP, READ_WRITE, 0, ResponseCode.NO_PERMISSION, pb.FORBIDDEN, f"group {OFF_GROUP} may not consume"),
    (NO_GROUP, READ_WRITE, 0, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, pb.CONSUMER_GROUP_NOT_FOUND,
     f"group {NO_GROUP} does not exist"),
    (OK_GROUP, NO_TOPIC, 0, ResponseCode.TOPIC_NOT_EXIST, pb.TOPIC_NOT_FOUND, f"topic {NO_TOPIC} does not exist"),
    (OK_GROUP, READ_WRITE, 9, ResponseCode.SYSTEM_ERROR, pb.BAD_REQUEST, "queue 9 of topic GateRW is not readable"),
]


@pytest.mark.parametrize(("group", "topic", "queue_id", "code", "grpc_code", "words"), CONSUME_CASES)
def test_consuming_is_refused_alike_by_every_door(endpoint: tuple[str, str], group: str, topic: str, queue_id: int,
                                                  code: int, grpc_code: int, words: str) -> None:
    async def test(doors: Doors) -> None:
        pulled = await doors.remoting.pull(group, topic, queue_id, 0)
        popped, _ = await doors.remoting.pop(group, topic, queue_id=queue_id)
        grpc_pulled = first_status(await doors.grpc.pull(group, topic, queue_id))
        answers: list[tuple[str, Any, Any]] = [("pull", pulled.code, pulled.remark),
                                               ("pop", popped.code, popped.remark),
                                               ("grpc pull", grpc_pulled.code, grpc_pulled.message)]
        if queue_id == 0:  # ReceiveMessage reads every queue of the topic
            received = first_status(await doors.grpc.receive(group, topic))
            answers.append(("grpc receive", received.code, received.message))
        reasons = {reason for _, _, reason in answers}
        assert len(reasons) == 1 and words in reasons.pop(), answers
        assert [(door, c) for door, c, _ in answers] == [
            (door, code if not door.startswith("grpc") else grpc_code) for door, _, _ in answers]
    through_both(endpoint, test)


def test_a_readable_topic_is_served_by_every_door(endpoint: tuple[str, str]) -> None:
    """The gate lets the allowed read through: the same message by remoting pull and gRPC pull."""
    async def test(doors: Doors) -> None:
        pulled = await doors.remoting.pull(OK_GROUP, READ_WRITE, 0, 0)
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        streamed = await doors.grpc.pull(OK_GROUP, READ_WRITE, 0)
        assert first_status(streamed).code == pb.OK
        assert [r.message.body for r in streamed if r.HasField("message")] == [b"held"]
    through_both(endpoint, test)


# (topic, remoting code, gRPC code, words of the reason)
SEND_CASES = [
    (READ_ONLY, ResponseCode.NO_PERMISSION, pb.FORBIDDEN, "does not accept messages (perm 4)"),
    ("SCHEDULE_TOPIC_XXXX", ResponseCode.NO_PERMISSION, pb.FORBIDDEN, "system topic"),
    ("bad topic!", ResponseCode.MESSAGE_ILLEGAL, pb.BAD_REQUEST, "bad topic!"),
]


@pytest.mark.parametrize(("topic", "code", "grpc_code", "words"), SEND_CASES)
def test_sending_is_refused_alike_by_every_door(endpoint: tuple[str, str], topic: str, code: int, grpc_code: int,
                                                words: str) -> None:
    async def test(doors: Doors) -> None:
        sent = await doors.remoting.send(Message.of(topic, b"x"))
        grpc_sent = await doors.grpc.send(topic, [b"x"])
        assert (sent.code, grpc_sent.status.code) == (code, grpc_code), (sent.remark, grpc_sent.status.message)
        assert sent.remark == grpc_sent.status.message and words in sent.remark
    through_both(endpoint, test)


# (topic, queue id, broker name, remoting code, gRPC code, words of the reason)
SETTLE_CASES = [
    (NO_TOPIC, 0, "broker-a", ResponseCode.TOPIC_NOT_EXIST, pb.TOPIC_NOT_FOUND, f"topic {NO_TOPIC} does not exist"),
    (READ_WRITE, 9, "broker-a", ResponseCode.MESSAGE_ILLEGAL, pb.BAD_REQUEST, "queue 9 of topic GateRW is not readable"),
    (READ_WRITE, 0, "broker-z", ResponseCode.MESSAGE_ILLEGAL, pb.BAD_REQUEST, "from broker broker-z"),
    (READ_WRITE, 0, "broker-a", PopResponseCode.NO_MESSAGE, pb.INVALID_RECEIPT_HANDLE, "not in flight"),
]


@pytest.mark.parametrize(("topic", "queue_id", "broker", "code", "grpc_code", "words"), SETTLE_CASES)
def test_settling_a_popped_message_is_refused_alike_by_every_door(endpoint: tuple[str, str], topic: str,
                                                                  queue_id: int, broker: str, code: int,
                                                                  grpc_code: int, words: str) -> None:
    """Ack and change of invisible time (one operation, `PopOperation`) of a handle that names no
    message in flight here: remoting ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME, gRPC
    AckMessage and ChangeInvisibleDuration give the same refusal."""
    handle = ExtraInfo(0, int(time.time() * 1000), 60_000, 0, NORMAL_TOPIC, broker, queue_id, 0, 0)

    async def test(doors: Doors) -> None:
        acked = await doors.remoting.ack(OK_GROUP, topic, handle)
        changed = await doors.remoting.change_invisible(OK_GROUP, topic, handle, 5_000)
        grpc_acked = await doors.grpc.ack(OK_GROUP, topic, handle.encode_receipt())
        grpc_changed = await doors.grpc.change_invisible(OK_GROUP, topic, handle.encode_receipt(), 5_000)
        answers = [(acked.code, acked.remark), (changed.code, changed.remark),
                   (grpc_acked.status.code, grpc_acked.status.message),
                   (grpc_acked.entries[0].status.code, grpc_acked.entries[0].status.message),
                   (grpc_changed.status.code, grpc_changed.status.message)]
        assert [c for c, _ in answers] == [code, code, grpc_code, grpc_code, grpc_code], answers
        reasons = {reason for _, reason in answers}
        assert len(reasons) == 1 and words in reasons.pop(), answers
    through_both(endpoint, test)


def test_a_popped_message_is_settled_through_either_door(endpoint: tuple[str, str]) -> None:
    """What one door pops the other settles: a gRPC receive's handle acknowledged over remoting
    is gone for gRPC too, and the message is not received again."""
    async def test(doors: Doors) -> None:
        group = "gate-settle"
        create = await doors.remoting.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                                           SubscriptionGroupConfig(group).to_json())
        assert create.code == ResponseCode.SUCCESS, create.remark
        received = await doors.grpc.receive(group, READ_WRITE)
        [message] = [r.message for r in received if r.HasField("message")]
        assert message.body == b"held"
        handle = ExtraInfo.parse(message.system_properties.receipt_handle)
        assert (await doors.remoting.ack(group, READ_WRITE, handle)).code == ResponseCode.SUCCESS
        again = await doors.grpc.ack(group, READ_WRITE, message.system_properties.receipt_handle)
        assert again.status.code == pb.INVALID_RECEIPT_HANDLE, again.status.message
        assert first_status(await doors.grpc.receive(group, READ_WRITE)).code == pb.MESSAGE_NOT_FOUND
    through_both(endpoint, test)


def test_a_group_offset_is_read_alike_by_every_door(endpoint: tuple[str, str]) -> None:
    """One rule for where a group starts: no committed offset on a queue whose first message
    is still stored is offset 0 over remoting QUERY_CONSUMER_OFFSET and gRPC GetOffset alike;
    a commit through one door is read through the other."""
    async def test(doors: Doors) -> None:
        ext = {"consumerGroup": "gate-offsets", "topic": READ_WRITE, "queueId": "0"}
        queried = await doors.remoting.call(RequestCode.QUERY_CONSUMER_OFFSET, ext)
        mq = pb.MessageQueue(topic=pb.Resource(name=READ_WRITE), id=0)
        got = await doors.grpc.unary("GetOffset", rpc.GetOffsetRequest(group=pb.Resource(name="gate-offsets"),
                                                                       message_queue=mq), rpc.GetOffsetResponse)
        assert (queried.code, queried.ext("offset")) == (ResponseCode.SUCCESS, "0")
        assert (got.status.code, got.offset) == (pb.OK, 0)
        updated = await doors.grpc.unary("UpdateOffset", rpc.UpdateOffsetRequest(
            group=pb.Resource(name="gate-offsets"), message_queue=mq, offset=1), rpc.UpdateOffsetResponse)
        assert updated.status.code == pb.OK
        queried = await doors.remoting.call(RequestCode.QUERY_CONSUMER_OFFSET, ext)
        assert queried.ext("offset") == "1"
    through_both(endpoint, test)
