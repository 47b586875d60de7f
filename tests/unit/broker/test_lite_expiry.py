"""Idle lite topics and stale lite subscriptions (RocketMQ 5.5's lifecycle), over a real store and the
broker's real tables with a clock that moves only when told (tests/unit/broker/test_admin_operations.py's
`Broker`): a lite topic goes once its parent's lite.topic.expiration has passed since its last message
(never in the broker's first minLiteTTl), with its offsets, POP state and place in subscriptions, and
comes back from offset 0; a subscription its client stopped syncing goes after
liteSubscriptionCheckTimeoutMills."""

from __future__ import annotations

import asyncio

from skiff.broker.grpc.clients import GrpcClients
from skiff.broker.grpc.lite import LiteTopics, lmq_name
from skiff.broker.grpc.lite_expiry import LiteExpiry
from skiff.broker.grpc.renewal import Renewals
from skiff.broker.operations import PopOperation, PopRequest, Refusal
from skiff.common.clock import ManualClock
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from tests.unit.broker.test_admin_operations import Broker, broker, clock  # noqa: F401 - the fixtures

MIN = 60_000


def lite_of(b: Broker, clock: ManualClock) -> tuple[LiteTopics, GrpcClients, PopOperation]:
    grpc = GrpcClients(b.config, b.clients, b.groups, 4 << 20)
    pop = PopOperation(b.config, b.gate, b.pop)
    return LiteTopics(b.config, b.topics, b.groups, grpc, pop, Renewals(b.config, b.pop, clock), clock), grpc, pop


def sync(lite: LiteTopics, grpc: GrpcClients, client: str, parent: str, *names: str) -> None:
    req = rpc.SyncLiteSubscriptionRequest(action=pb.COMPLETE_ADD, topic=pb.Resource(name=parent),
                                          group=pb.Resource(name="G"), lite_topic_set=list(names))
    assert lite.sync(grpc.conn(client, ("127.0.0.1", 5000)), req).status.code == pb.OK


def test_an_idle_lite_topic_goes_with_its_state_and_comes_back_from_the_start(broker: Broker, clock: ManualClock):
    broker.topic("Expiring", 4, **{"message.type": "LITE", "lite.topic.expiration": "20"})
    broker.topic("Keeping", 4, **{"message.type": "LITE"})  # no expiration: -1, never
    lite, grpc, pop = lite_of(broker, clock)
    expiry = LiteExpiry(broker.config, broker.topics, broker.topics_op, pop, lite, clock)
    old, fresh, kept = lmq_name("Expiring", "old"), lmq_name("Expiring", "fresh"), lmq_name("Keeping", "old")
    for topic in (old, kept):
        lite._lmq(*topic.split("|")[1:])
        broker.put(topic, 0, 3)
    sync(lite, grpc, "c-1", "Expiring", "old", "fresh")
    popped = asyncio.run(pop.pop(PopRequest("G", old, 0, 2, 60_000, 0, orderly=True)))
    assert not isinstance(popped, Refusal) and len(popped.messages) == 2  # a cursor and a batch of "old"

    clock.advance(14 * MIN)
    broker.put(fresh, 0, 1)  # "fresh" had a message 14 minutes in
    assert asyncio.run(expiry.expire_topics()) == []  # nothing idle past both 20 and 15 minutes yet
    clock.advance(16 * MIN)  # "old" idle 30 min > 20 and > 15; "fresh" 16 min: not past its 20
    restarted = LiteExpiry(broker.config, broker.topics, broker.topics_op, pop, lite, clock)
    assert asyncio.run(restarted.expire_topics()) == []  # a broker that just started expires nothing
    assert asyncio.run(expiry.expire_topics()) == [old]
    assert broker.topics.get(old) is None and broker.topics.get(kept) is not None and broker.topics.get(fresh)
    assert [k for k in broker.pop.state.cursors if k[1] == old] == [] and lite.subscriptions["c-1"].names == {"fresh"}
    assert broker.store.get_max_offset(old, 0) == 0

    lite._lmq("Expiring", "old")  # sent again: made again, read from its first message
    broker.put(old, 0, 1)
    again = asyncio.run(pop.pop(PopRequest("G", old, 0, 32, 60_000, 0, orderly=True)))
    assert [p.handle.queue_offset for p in again.messages] == [0]
    clock.advance(25 * MIN)
    assert sorted(asyncio.run(expiry.expire_topics())) == sorted([old, fresh])


def test_a_subscription_its_client_stopped_syncing_goes(broker: Broker, clock: ManualClock):
    broker.topic("Parent", 4, **{"message.type": "LITE"})
    lite, grpc, pop = lite_of(broker, clock)
    expiry = LiteExpiry(broker.config, broker.topics, broker.topics_op, pop, lite, clock)
    sync(lite, grpc, "gone", "Parent", "a")
    clock.advance(2 * MIN)
    sync(lite, grpc, "alive", "Parent", "a")
    clock.advance(2 * MIN)  # "gone" last synced 4 min ago (> 3), "alive" 2 min ago
    assert expiry.expire_subscriptions() == ["gone"]
    assert set(lite.subscriptions) == {"alive"}
