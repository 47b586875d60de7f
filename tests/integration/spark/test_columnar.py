"""The columnar read path returns exactly what the message path gives for the same stored
messages: ids, bodies, keys, tags, properties, offsets and timestamps, on a topic that holds
single sends, batches, a compressed body, an empty body and messages without properties.

The message path is Skiff's pull client decoding each record into a message; the columnar
path is the skiff source (raw pulls decoded into Arrow columns), read through Spark."""

from __future__ import annotations

import asyncio

import pytest

from skiff.client import AsyncProducer, Message, MessageQueue, Producer, PullClient, PullStatus
from skiff.client._impl.producer_impl import Prepared
from skiff.columnar.schema import HIDDEN_PROPERTIES
from skiff.common.properties import Prop
from skiff.common.stored_message import decode_records
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.message_codec import send_properties
from tests.integration.spark.kit import create_topic, pull_all, reader, send

pytestmark = pytest.mark.spark


async def _send_empty_body(namesrv: str, mq: MessageQueue) -> None:
    """A message with an empty body, as a foreign client may send (Skiff's producer refuses to)."""
    async with AsyncProducer("spark-test-empty", namesrv) as producer:
        core = producer._running()
        props = send_properties(Message.of(mq.topic, b"-", tags="empty"), "EMPTY0000000000000000000000000001")
        await core.send(Prepared(mq.topic, b"", 0, props, 0, "EMPTY0000000000000000000000000001"), queue=mq)


@pytest.fixture(scope="module")
def mixed(cluster):
    ns = cluster.namesrv_addr
    topic = create_topic(ns, "columnar", queues=2)
    mq = MessageQueue(topic, "broker-a", 0)
    send(ns, [Message.of(topic, f"single-{i}".encode(), tags="A" if i % 2 else "B", keys=f"k{i} shared",
                         properties={"n": str(i), "région": "é✓"}) for i in range(12)])
    send(ns, [Message.of(topic, b"bare")], queue=mq)
    send(ns, [Message.of(topic, bytes(range(256)) * 40, tags="A", properties={"big": "yes"})], queue=mq)  # compressed
    with Producer("spark-test-batch", ns) as producer:
        producer.send_batch([Message.of(topic, f"batch-{i}".encode(), tags="B", properties={"b": str(i)})
                             for i in range(20)], queue=mq)
    asyncio.run(_send_empty_body(ns, mq))
    return topic


def _expected(namesrv: str, topic: str) -> dict[tuple[str, int, int], object]:
    return {(mq.broker_name, mq.queue_id, m.queue_offset): m for mq, m in pull_all(namesrv, topic)}


def _ms(timestamp) -> int:
    return round(timestamp.timestamp() * 1000)


@pytest.mark.parametrize("options", [
    {"pullBatchSize": "7"},
    {"pullBatchSize": "1024", "includeProperties": "false", "minPartitions": "5"},
    {"subExpression": "A || empty"},
])
def test_the_columnar_source_returns_what_the_pull_client_decodes(spark, cluster, mixed, options):
    expected = _expected(cluster.namesrv_addr, mixed)
    flags = [m.sys_flag for m in expected.values()]
    assert any(f & MessageSysFlag.COMPRESSED for f in flags) and any(not m.body for m in expected.values())
    tags = options.get("subExpression")
    if tags:
        wanted = set(tags.split(" || "))
        expected = {k: m for k, m in expected.items() if m.tags in wanted}
    rows = reader(spark, cluster.namesrv_addr, mixed, **options).collect()
    assert sorted((r.broker, r.queue_id, r.queue_offset) for r in rows) == sorted(expected)
    with_properties = options.get("includeProperties") != "false"
    for row in rows:
        msg = expected[(row.broker, row.queue_id, row.queue_offset)]
        assert (row.topic, row.msg_id, bytes(row.body), row.keys, row.tags) == \
            (mixed, msg.msg_id, msg.body, msg.get_property(Prop.KEYS), msg.tags)
        assert row.properties == ({k: v for k, v in msg.properties.items() if k not in HIDDEN_PROPERTIES}
                                  if with_properties else None)
        assert (_ms(row.born_timestamp), _ms(row.store_timestamp), row.reconsume_times) == \
            (msg.born_timestamp, msg.store_timestamp, msg.reconsume_times)


def test_a_raw_pull_is_the_records_a_pull_decodes(cluster, mixed):
    mq = MessageQueue(mixed, "broker-a", 0)
    with PullClient(cluster.namesrv_addr) as client:
        raw = client.pull_raw(mq, 0, 1024, sub_expression="A")
        decoded = client.pull(mq, 0, 1024, sub_expression="A")
        past = client.pull_raw(mq, raw.max_offset, 32)
    assert (raw.status, raw.next_begin_offset, raw.min_offset, raw.max_offset) == \
        (decoded.status, decoded.next_begin_offset, decoded.min_offset, decoded.max_offset)
    assert raw.recheck_tags == frozenset({"A"})
    rechecked = [m for m in decode_records(raw.body) if m.tags in raw.recheck_tags]
    assert [(m.msg_id, m.body) for m in rechecked] == [(m.msg_id, m.body) for m in decoded.messages]
    assert rechecked and (past.status, past.body) == (PullStatus.NO_NEW_MSG, b"")
