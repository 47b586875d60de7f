"""Client membership, expiry and orderly locks, with a clock that moves only when told."""

from skiff.broker.clients import ClientManager
from skiff.broker.locks import RebalanceLockManager
from skiff.common.clock import ManualClock
from skiff.common.message import MessageQueue
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel, SubscriptionData
from skiff.transport.connection import Connection


def data(group: str, *topics: str) -> ConsumerData:
    return ConsumerData(group, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, tuple(SubscriptionData(t, "A || B") for t in topics))


def test_members_join_leave_and_expire():
    clock = ManualClock()
    clients = ClientManager(clock, channel_expired_ms=120_000)
    c1, c2 = Connection({}), Connection({})
    assert clients.register_consumer(data("G", "T"), clients.channel(c1, "client-1", "CPP", 63))
    assert not clients.register_consumer(data("G", "T", "U"), clients.channel(c1, "client-1", "CPP", 63))
    assert clients.register_consumer(data("G", "T"), clients.channel(c2, "client-2", "JAVA", 406))
    clients.register_producer("PG", clients.channel(c2, "client-2", "JAVA", 406))
    assert clients.consumer_group("G").client_ids() == ["client-1", "client-2"]
    assert clients.subscription("G", "T").sub_string == "A || B"

    clock.advance(60_000)
    clients.register_consumer(data("G", "T"), clients.channel(c2, "client-2", "JAVA", 406))
    clock.advance(60_001)
    expired = clients.expire()
    assert [c.client_id for c in expired] == ["client-1"]
    assert clients.consumer_group("G").client_ids() == ["client-2"]
    assert c1.is_closed

    clients.unregister(c2, "PG", "G")
    assert clients.consumer_group("G") is None and clients.producer_channels("PG") == []


def test_a_closed_connection_leaves_every_group():
    clients = ClientManager(ManualClock(), 120_000)
    conn = Connection({})
    for group in ("G1", "G2"):
        clients.register_consumer(data(group, "T"), clients.channel(conn, "c", "CPP", 63))
    clients.register_producer("PG", clients.channel(conn, "c", "CPP", 63))
    clients.connection_closed(conn)
    assert clients.consumers == {} and clients.producers == {}


def test_locks_belong_to_one_client_until_they_expire():
    clock = ManualClock()
    locks = RebalanceLockManager(clock, max_live_ms=60_000)
    q0, q1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    assert locks.try_lock("G", [q0, q1], "c1") == [q0, q1]
    assert locks.try_lock("G", [q0, q1], "c2") == []
    assert locks.try_lock("OtherGroup", [q0], "c2") == [q0]
    locks.unlock("G", [q1], "c2")  # not c2's: nothing happens
    assert locks.holder("G", q1) == "c1"
    locks.unlock("G", [q1], "c1")
    assert locks.try_lock("G", [q1], "c2") == [q1]
    clock.advance(40_000)
    assert locks.try_lock("G", [q0], "c1") == [q0]  # renewed
    clock.advance(40_000)
    assert locks.try_lock("G", [q0, q1], "c3") == [q1]  # q0 was renewed 40 s ago, q1 locked 80 s ago
    assert locks.holder("G", q0) == "c1"
    clock.advance(20_001)
    assert locks.holder("G", q0) is None
