"""Compacted topics through real processes: the attribute set at creation and shown by the
admin, sends without KEYS refused, the broker's scheduled compaction and `skiff topic
compact`, and consumers (pull client, lite pull, push) reading the latest message of
each key from the earliest offset."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from skiff.client import AsyncAdmin, AsyncProducer, AsyncPullClient, AsyncPushConsumer, ConsumeStatus, Message, MessageQueue, PullStatus
from skiff.protocol.errors import MessageIllegalError
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere
from skiff.testing.cluster import Cluster
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.processes import run_skiff
from skiff.testing.wire import BrokerWire, with_wire
from skiff.testing.waits import eventually
from tests.integration.consumer_kit import config, run, send, wait_for, wait_for_route

TOPIC = "Prices"
KEYS = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    args = ["--compactionScheduleInternal=300", "--compactionMinDirtyRatio=0.3", "--flushIntervalCommitLog=50"]
    with Cluster(tmp_path_factory.mktemp("compaction"), broker_args=args) as c:
        yield c


def latest(count: int, prefix: str = "v") -> dict[str, str]:
    return {f"k{i % KEYS}": f"{prefix}{i}" for i in range(count)}


async def read_all(ns: str, topic: str) -> list[tuple[int, str, str]]:
    """(offset, key, body) of every message a pull from offset 0 returns, following nextBeginOffset."""
    async with AsyncPullClient(client_config=config(ns, f"reader-{topic}")) as puller:
        out, offset = [], 0
        while True:
            result = await puller.pull(MessageQueue(topic, "broker-a", 0), offset, 4)
            if result.status is not PullStatus.FOUND:
                return out
            out += [(m.queue_offset, " ".join(m.keys), m.body.decode()) for m in result.messages]
            assert result.next_begin_offset > offset
            offset = result.next_begin_offset


def test_a_compacted_topic_keeps_the_latest_message_per_key(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    created = run_skiff(["topic", "create", "-t", TOPIC, "-q", "1", "--cleanup-policy", "compaction",
                         "--attr", "delete.retention.ms=600000", "-n", ns])
    assert created.returncode == 0, created.stdout

    async def scenario() -> None:
        async with AsyncAdmin(client_config=config(ns, "compaction-admin")) as admin:
            await wait_for_route(admin, TOPIC)
            with pytest.raises(MessageIllegalError, match="no KEYS"):
                await send(ns, [Message.of(TOPIC, "no key")])
            await send(ns, [Message.of(TOPIC, f"v{i}", keys=f"k{i % KEYS}") for i in range(40)])

            async def cleaned() -> bool:
                (b,) = await admin.compaction(TOPIC)
                return b.state is not None and b.state.queues[0].cleaned_offset == 40

            await eventually(cleaned, 30, "the broker's scheduled compaction to clean all 40 messages")
            (b,) = await admin.compaction(TOPIC)
            assert b.state.cleanup_policy == "COMPACTION" and b.state.delete_retention_ms == 600_000
            q = b.state.queues[0]
            assert (q.start_offset, q.segment_records, q.runs >= 1, q.bytes_reclaimed > 0) == (0, KEYS, True, True)
        seen = await read_all(ns, TOPIC)
        assert seen == [(35 + j, f"k{j}", f"v{35 + j}") for j in range(KEYS)]

    run(scenario())
    status = run_skiff(["topic", "compact-status", "-t", TOPIC, "-n", ns, "--json"])
    assert status.returncode == 0, status.stdout
    (answer,) = orjson.loads(status.stdout)
    assert answer["state"]["queues"][0]["cleanedOffset"] == 40
    table = run_skiff(["topic", "compact-status", "-t", TOPIC, "-n", ns])
    assert "COMPACTION" in table.stdout and "CLEANED" in table.stdout
    queues = run_skiff(["topic", "status", "-t", TOPIC, "-n", ns])
    assert queues.returncode == 0 and "cleanup.policy=COMPACTION" in queues.stdout, queues.stdout


def test_compact_now_and_consumers_read_across_gaps(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    topic = "Accounts"
    missing = run_skiff(["topic", "compact", "-t", "NoSuchTopicHere", "-n", ns])
    assert missing.returncode == 1
    bad = run_skiff(["topic", "create", "-t", "BadAttr", "--attr", "cleanup.policy=KEEP", "-n", ns])
    assert bad.returncode == 2 and "must be DELETE or COMPACTION" in bad.stdout, bad.stdout  # a bad argument

    async def scenario() -> None:
        async with AsyncAdmin(client_config=config(ns, "compaction-admin-2")) as admin:
            await admin.create_topic(topic, queue_nums=1, attributes={"cleanup.policy": "COMPACTION",
                                                                      "delete.retention.ms": "0"})
            await wait_for_route(admin, topic)
            await send(ns, [Message.of(topic, f"a{i}", keys=f"k{i % KEYS}") for i in range(12)])
            await send(ns, [Message.of(topic, b"", keys="k0")])  # a tombstone: removed at once (retention 0)

            with pytest.raises(MessageIllegalError, match="message 1 of the batch has no KEYS"):
                async with AsyncProducer("compaction-batch", client_config=config(ns, "compaction-batch")) as p:
                    await p.send_batch([Message.of(topic, "x", keys="k1"), Message.of(topic, "no key")])

    run(scenario())

    async def bad_attribute(wire: BrokerWire) -> None:
        header = CreateTopicRequestHeader(topic, "TBW102", 1, 1, 6, "SINGLE_TAG", attributes="+cleanup.policy=KEEP")
        answer = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
        assert answer.code == ResponseCode.SYSTEM_ERROR and "must be DELETE or COMPACTION" in answer.remark

    with_wire(cluster.broker_addr(), bad_attribute)  # refused on the broker too; the topic is unchanged
    compacted = run_skiff(["topic", "compact", "-t", topic, "-n", ns])
    assert compacted.returncode == 0 and "compacted 1 queue(s)" in compacted.stdout, compacted.stdout
    expected = [(o, f"k{o % KEYS}", f"a{o}") for o in range(7, 12) if o % KEYS]

    async def consumers() -> None:
        assert await read_all(ns, topic) == expected
        got: list[tuple[int, str, str]] = []
        consumer = AsyncPushConsumer("compaction-push", client_config=config(ns, "compaction-push"),
                                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)

        def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            got.extend((m.queue_offset, " ".join(m.keys), m.body.decode()) for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        async with consumer:
            await wait_for(lambda: len(got) >= len(expected), "the push consumer to get the compacted queue")
        assert sorted(got) == expected

    run(consumers())
    switched = run_skiff(["topic", "update", "-t", topic, "-q", "1", "--cleanup-policy", "delete", "-n", ns])
    assert switched.returncode == 0, switched.stdout
    refused = run_skiff(["topic", "compact", "-t", topic, "-n", ns])
    assert refused.returncode == 1 and "not compacted" in refused.stdout, refused.stdout
