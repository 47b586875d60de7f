"""Tiered storage through real processes: a NameServer, a broker whose tier is a bucket of
moto's S3 server (a real process on a free port), topics with ``tiered.storage=true``.

The broker's background uploader puts the sealed messages in the bucket; CommitLog
retention (fileReservedTime=0, every hour a delete hour, small files) deletes what is
expired, but never a tiered topic's messages younger than its ``retention.local.ms``;
once that is 0, their files go, and a pull of those offsets (our client) is answered
from the bucket, every message once and in order.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections.abc import Iterator

import orjson
import pytest

from confluent_kafka import Consumer, TopicPartition

from skiff.client import AsyncAdmin, AsyncPullClient, Message, MessageQueue, PullStatus
from skiff.common.stored_message import StoredMessage
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from skiff.protocol.message_codec import decode_stored_messages
from skiff.testing.cluster import Cluster
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.dashboard import api_call, with_dashboard_client
from skiff.testing.grpc_wire import GrpcWire, messages
from skiff.testing.processes import free_port, run_skiff
from skiff.testing.s3 import S3_ENV, moto_s3
from skiff.testing.waits import eventually, wait_for
from skiff.testing.wire import BrokerWire
from skiff.tier.backends import backend_from_url
from skiff.tier.manifest import Manifest
from skiff.tier.tier import Tier
from tests.integration.consumer_kit import config, run, send, wait_for_route

pytestmark = pytest.mark.xdist_group("tier-s3")  # one moto server and one cluster for the module, not one per worker

BODY = "x" * 1000
METRICS_PORT = free_port()
GRPC_PORT = free_port()
KAFKA_PORT = free_port()
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
SMALL_FILES = ["--mappedFileSizeCommitLog=65536", "--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}",
               "--cleanResourceInterval=200", "--flushIntervalCommitLog=50"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, object]]:
    saved = {k: os.environ.get(k) for k in S3_ENV}
    os.environ.update(S3_ENV)  # the broker's boto3 reads its credentials from the environment
    try:
        with moto_s3() as s3:
            s3.bucket("skiff-tier")
            args = [f"--tierStorageUrl=s3://skiff-tier/cluster1", f"--metricsPort={METRICS_PORT}", f"--tierS3Endpoint={s3.endpoint}",
                    "--tierSealMs=1", "--tierUploadIntervalMs=300", "--tierDeleteGraceMs=500",
                    "--tierFileDeleteDelayMs=600000", *SMALL_FILES,  # replaced files outlive the module's tests
                    f"--grpcServerPort={GRPC_PORT}", f"--kafkaListenPort={KAFKA_PORT}", "--reviveInterval=100"]
            with Cluster(tmp_path_factory.mktemp("tier"), broker_args=args) as c:
                yield c, s3
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def skiff_ok(*args: str) -> str:
    done = run_skiff(list(args))
    assert done.returncode == 0, done.stdout
    return done.stdout


async def queue_bounds(admin: AsyncAdmin, topic: str) -> tuple[int, int]:
    """The queue's offsets kept on the broker's disk (topic status answers the tier's first offset)."""
    (b,) = await admin.tier(topic)
    assert b.state is not None, b.error
    (q,) = b.state.queues
    return q.local_min_offset, q.local_max_offset


async def read_from(ns: str, topic: str, first: int, end: int) -> list[tuple[int, str]]:
    """(offset, body) of every message pulled from ``first`` up to ``end``, following
    nextBeginOffset (an answer to retry says so by moving nowhere)."""
    out: list[tuple[int, str]] = []
    async with AsyncPullClient(client_config=config(ns, f"tier-reader-{topic}")) as puller:
        offset = first

        async def more() -> bool:
            nonlocal offset
            result = await puller.pull(MessageQueue(topic, "broker-a", 0), offset, 64)
            if result.status is PullStatus.FOUND:
                out.extend((m.queue_offset, m.body.decode()) for m in result.messages)
            offset = result.next_begin_offset
            return offset >= end

        await eventually(more, 60, f"pulls of {topic} from {first} to reach {end}")
    return out


async def pulls_until_found(ns: str, topic: str, offset: int) -> int:
    """How many pulls, made back to back, it takes to get ``offset`` back. The broker holds a pull
    while the tier fetches the offset's file (up to a second each, TIER_PULL_HOLD_MAX_MS): a few
    pulls, where answering each "retry at once" made it tens to hundreds."""
    deadline, pulls = time.monotonic() + 60, 0
    async with AsyncPullClient(client_config=config(ns, f"tier-first-{topic}")) as puller:
        while True:
            pulls += 1
            result = await puller.pull(MessageQueue(topic, "broker-a", 0), offset, 32)
            if result.status is PullStatus.FOUND:
                assert result.messages[0].queue_offset == offset
                return pulls
            assert time.monotonic() < deadline, f"offset {offset} of {topic} never came back: {result.status}"


def test_tiered_messages_stay_local_for_retention_local_ms_then_come_from_the_bucket(cluster) -> None:
    c, s3 = cluster
    ns = c.namesrv_addr
    skiff_ok("topic", "create", "-t", "Plain", "-q", "1", "-n", ns)
    skiff_ok("topic", "create", "-t", "Tiered", "-q", "1", "-n", ns, "--attr", "tiered.storage=true",
             "--attr", "retention.local.ms=3600000")

    async def scenario() -> None:
        async with AsyncAdmin(client_config=config(ns, "tier-admin")) as admin:
            for t in ("Plain", "Tiered"):
                await wait_for_route(admin, t)
            await send(ns, [Message.of("Plain", BODY) for _ in range(200)])
            await send(ns, [Message.of("Tiered", f"t{i}-{BODY}", keys=f"k{i}") for i in range(300)])
            await send(ns, [Message.of("Plain", BODY) for _ in range(100)])

            async def uploaded() -> bool:
                (b,) = await admin.tier("Tiered")
                return b.state is not None and b.state.queues[0].uploaded_to == 300

            await eventually(uploaded, 30, "the uploader to put Tiered's 300 messages in the bucket")

            async def plain_trimmed() -> bool:
                return (await queue_bounds(admin, "Plain"))[0] > 0

            await eventually(plain_trimmed, 30, "retention to delete Plain's first CommitLog files")
            # the same pass would have taken Tiered's files: retention.local.ms holds them
            assert (await queue_bounds(admin, "Tiered")) == (0, 300)
            assert (await queue_bounds(admin, "Plain"))[0] <= 200

            skiff_ok("topic", "update", "-t", "Tiered", "-q", "1", "-n", ns, "--attr", "retention.local.ms=0")

            async def tiered_trimmed() -> bool:
                return (await queue_bounds(admin, "Tiered"))[0] > 0

            await eventually(tiered_trimmed, 30, "retention to delete Tiered's uploaded files")
            local_min, _ = await queue_bounds(admin, "Tiered")
            (q,) = await admin.topic_status("Tiered")
            assert (q.min_offset, q.max_offset) == (0, 300)  # the queue's first offset is the tier's
        assert await pulls_until_found(ns, "Tiered", 0) <= 15  # held while the tier fetches, not a storm
        got = await read_from(ns, "Tiered", 0, 300)
        assert got == [(i, f"t{i}-{BODY}") for i in range(300)]
        assert local_min > 0  # so offsets 0..local_min-1 came from the bucket

    run(scenario())
    table = skiff_ok("topic", "tier", "status", "-t", "Tiered", "-n", ns)
    assert "UPLOADED TO" in table and "broker-a: tiered.storage=true, tier s3://skiff-tier/cluster1" in table, table
    (answer,) = orjson.loads(skiff_ok("topic", "tier", "status", "-t", "Tiered", "-n", ns, "--json"))
    q = answer["state"]["queues"][0]
    assert (q["uploadedTo"], q["remoteRows"], q["firstRemoteOffset"], q["lagMessages"]) == (300, 300, 0, 0)
    assert q["localMinOffset"] > 0 and q["remoteBytes"] > 0
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as page:
        metrics = page.read().decode()
    assert re.search(r'^skiff_tier_remote_bytes\{[^}]*topic="Tiered"\} [1-9]', metrics, re.M), metrics
    assert re.search(r'^skiff_tier_lag_messages\{[^}]*topic="Tiered"\} 0\.0$', metrics, re.M), metrics
    assert re.search(r'^skiff_tier_read_messages_total\{[^}]*\} [1-9]', metrics, re.M), metrics
    dashboard_panel(ns)
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="skiff-tier")["Contents"]]
    assert "cluster1/Tiered/broker-a/manifest.json" in keys and not any(k.startswith("cluster1/Plain") for k in keys)


def query_json(ns: str, *args: str) -> list[dict]:
    """``skiff message query ... --json``: the messages found, as JSON."""
    return orjson.loads(skiff_ok("message", "query", "-n", ns, "--json", *args))


@pytest.mark.slow
def test_queries_by_key_id_and_time_find_messages_only_the_tier_holds(cluster) -> None:
    """Messages uploaded, their local copies deleted by retention: the query by key, by
    offsetMsgId, by UNIQ_KEY, the search of an offset by time and the earliest store time
    answer them from the bucket; a key shared by local and tiered messages answers each once."""
    c, _ = cluster
    ns = c.namesrv_addr
    skiff_ok("topic", "create", "-t", "Queried", "-q", "1", "-n", ns, "--attr", "tiered.storage=true",
             "--attr", "retention.local.ms=3600000")
    mq = MessageQueue("Queried", "broker-a", 0)
    tenth = sorted(f"q{i}-{BODY}" for i in range(7, 300, 30))

    async def fill() -> None:
        async with AsyncAdmin(client_config=config(ns, "tier-query-admin")) as admin:
            await wait_for_route(admin, "Queried")
            await send(ns, [Message.of("Queried", f"q{i}-{BODY}", keys=[f"q{i}", f"g{i % 30}"]) for i in range(300)])
            await send(ns, [Message.of("Plain", BODY) for _ in range(100)])  # so the files Queried's are in close

            async def uploaded() -> bool:
                (b,) = await admin.tier("Queried")
                return b.state is not None and b.state.queues[0].uploaded_to == 300

            await eventually(uploaded, 30, "Queried's messages to be uploaded")

    async def trimmed() -> int:
        async with AsyncAdmin(client_config=config(ns, "tier-query-admin")) as admin:

            async def gone() -> bool:
                return (await queue_bounds(admin, "Queried"))[0] >= 150

            await eventually(gone, 30, "retention to delete Queried's first CommitLog files")
            return (await queue_bounds(admin, "Queried"))[0]

    async def by_key(key: str, **window: int) -> list[StoredMessage]:
        async with AsyncAdmin(client_config=config(ns, "tier-query-key")) as admin:
            return await admin.messages_by_key("Queried", key, **window)

    run(fill())
    # uploaded and still local: each message is answered once
    assert sorted(m.body.decode() for m in run(by_key("g7"))) == tenth
    skiff_ok("topic", "update", "-t", "Queried", "-q", "1", "-n", ns, "--attr", "retention.local.ms=0")
    local_min = run(trimmed())
    # by key: messages that only the tier holds
    (old,) = query_json(ns, "--key", "q5", "-t", "Queried")
    assert old["body"] == f"q5-{BODY}" and old["queue_offset"] < local_min
    # by offsetMsgId: its CommitLog offset is gone from the disk
    (by_id,) = query_json(ns, "--id", old["offset_msg_id"])
    assert (by_id["body"], by_id["queue_offset"], by_id["msg_id"]) == (old["body"], old["queue_offset"], old["msg_id"])
    assert sorted(m.body.decode() for m in run(by_key("g7"))) == tenth  # some local, most only in the tier
    assert run(by_key("q5", begin_ms=old["store_timestamp"] + 1)) == []  # the time range applies to the tier

    async def by_time() -> None:
        async with AsyncAdmin(client_config=config(ns, "tier-query-time")) as admin:
            by_uniq = await admin.message_by_id(old["msg_id"], "Queried")  # UNIQ_KEY
            assert (by_uniq.offset_msg_id, by_uniq.queue_offset) == (old["offset_msg_id"], old["queue_offset"])

            async def stored_at(offset: int) -> int:
                """The store time of the message at ``offset`` (pulled through the tier's reads,
                whose first answer may be "retry")."""
                got: list[int] = []

                async def pulled() -> bool:
                    m = await admin.message_at(mq, offset)
                    got.extend([] if m is None else [m.store_timestamp])
                    return bool(got)

                await eventually(pulled, 30, f"a pull of offset {offset} to answer")
                return got[0]

            stamp = old["store_timestamp"]
            found = await admin.search_offset(mq, stamp)
            assert found <= old["queue_offset"] < local_min  # the first stored at that time, from the tier
            assert await stored_at(found) == stamp
            assert found == 0 or await stored_at(found - 1) < stamp
            assert await admin.search_offset(mq, 0) == 0  # the local store alone would answer local_min
            assert await admin.earliest_msg_store_time(mq) == await stored_at(0)
            # a group's offsets reset by time (INVOKE_BROKER_TO_RESET_OFFSET) find the same offset
            assert await admin.reset_offset_by_time("tier-reset", "Queried", stamp) == {mq: found}
            assert await admin.fetch_consumer_offset("tier-reset", mq) == found

    run(by_time())
    # `skiff consumer reset-offset` to time 0: the tier's first offset, not the disk's (local_min)
    (reset,) = orjson.loads(skiff_ok("consumer", "reset-offset", "-g", "tier-reset", "-t", "Queried",
                                     "--timestamp", "0", "-n", ns, "--json"))
    assert reset["offset"] == 0


async def tiered_only(ns: str, topic: str, bodies: list[str]) -> int:
    """A new tiered topic of one queue holding ``bodies``, uploaded, then retention.local.ms set to 0
    until retention deleted at least its first half locally: the queue's local minimum offset."""
    skiff_ok("topic", "create", "-t", topic, "-q", "1", "-n", ns, "--attr", "tiered.storage=true",
             "--attr", "retention.local.ms=3600000")
    async with AsyncAdmin(client_config=config(ns, f"tier-admin-{topic}")) as admin:
        await wait_for_route(admin, topic)
        await send(ns, [Message.of(topic, b) for b in bodies])
        await send(ns, [Message.of("Plain", BODY) for _ in range(100)])  # so the files with the topic's close

        async def uploaded() -> bool:
            (b,) = await admin.tier(topic)
            return b.state is not None and b.state.queues[0].uploaded_to == len(bodies)

        await eventually(uploaded, 30, f"{topic}'s messages to be uploaded")
        skiff_ok("topic", "update", "-t", topic, "-q", "1", "-n", ns, "--attr", "retention.local.ms=0")

        async def gone() -> bool:
            return (await queue_bounds(admin, topic))[0] >= len(bodies) // 2

        await eventually(gone, 30, f"retention to delete {topic}'s first CommitLog files")
        return (await queue_bounds(admin, topic))[0]


@pytest.mark.slow
def test_pops_grpc_and_kafka_reads_and_searches_by_time_reach_messages_only_the_tier_holds(cluster) -> None:
    """300 messages uploaded, their local copies deleted by retention: a remoting POP and a gRPC
    ReceiveMessage of new groups get every one, in order, from the bucket; a tiered message
    popped and not acknowledged is redelivered (its record read from the tier); gRPC PullMessage
    and a Kafka consumer's Fetch from offset 0 read them all, in order; gRPC QueryOffset and
    Kafka ListOffsets by a tiered message's store time find its offset in the tier."""
    c, _ = cluster
    ns = c.namesrv_addr
    topic = "Popped"
    bodies = [f"p{i}-{BODY}" for i in range(300)]
    local_min = run(tiered_only(ns, topic, bodies))

    async def pops() -> list[int]:
        wire = BrokerWire(c.broker_addr())
        try:
            got: list[tuple[int, str, int]] = []

            async def more() -> bool:
                _, found = await wire.pop("tier-pop", topic, queue_id=0, poll_ms=500)
                got.extend((m.queue_offset, m.body.decode(), m.store_timestamp) for m, _ in found)
                for _, handle in found:
                    assert (await wire.ack("tier-pop", topic, handle)).code == 0
                return len(got) >= 300

            await eventually(more, 60, "POP to get every message from the bucket")
            assert [(o, b) for o, b, _ in got] == list(enumerate(bodies))
            # popped from the tier, not acknowledged: redelivered through the retry topic
            _, (first, *_) = await wire.pop("tier-redeliver", topic, queue_id=0, max_nums=1, invisible_ms=300,
                                            poll_ms=5000)
            assert first[0].queue_offset == 0 and first[0].body.decode() == bodies[0]
            again: list[str] = []

            async def redelivered() -> bool:
                _, found = await wire.pop("tier-redeliver", topic, poll_ms=500)
                again.extend(m.body.decode() for m, _ in found if m.reconsume_times == 1)
                return bool(again)

            await eventually(redelivered, 30, "the unacknowledged tiered message to come back")
            assert again[0] == bodies[0]
            await send_back_to_dlq(wire)
            return [t for _, _, t in got]
        finally:
            await wire.close()

    async def send_back_to_dlq(wire: BrokerWire) -> None:
        """A pulled message only the tier holds, sent back (CONSUMER_SEND_MSG_BACK) to the DLQ:
        its record comes from the tier by its CommitLog offset."""
        pulled: list[StoredMessage] = []

        async def pull_first() -> bool:  # "retry" while the broker fetches the file
            answer = await wire.pull("tier-back", topic, 0, 1, max_nums=1)
            pulled.extend(decode_stored_messages(answer.body) if answer.code == ResponseCode.SUCCESS else [])
            return bool(pulled)

        await eventually(pull_first, 30, "a pull of tiered offset 1")
        (m,) = pulled
        back = await wire.call(RequestCode.CONSUMER_SEND_MSG_BACK,
                               ConsumerSendMsgBackRequestHeader(m.commit_log_offset, "tier-back", -1).to_ext())
        assert back.code == ResponseCode.SUCCESS, back.remark
        (dead,) = await wire.pull_messages("tier-dlq-reader", "%DLQ%tier-back", 0)
        assert (dead.body.decode(), dead.properties["RETRY_TOPIC"]) == (bodies[1], topic)

    stored = run(pops())

    async def grpc() -> int:
        wire = GrpcWire(f"127.0.0.1:{GRPC_PORT}")
        try:
            got: list[tuple[int, str]] = []

            async def more() -> bool:
                found = messages(await wire.receive("tier-receive", topic, wait_ms=500))
                got.extend((m.system_properties.queue_offset, m.body.decode()) for m in found)
                return len(got) >= 300

            await eventually(more, 60, "gRPC ReceiveMessage to get every message from the bucket")
            assert sorted(got) == list(enumerate(bodies))
            await forward_to_dlq(wire)
            pulled: list[tuple[int, str]] = []
            offset = 0

            async def pull() -> bool:  # one answer a batch, following next_offset (held while the tier fetches)
                nonlocal offset
                answers = await wire.pull("tier-grpc-pull", topic, 0, offset)
                pulled.extend((m.system_properties.queue_offset, m.body.decode()) for m in messages(answers))
                offset = next(a.next_offset for a in answers if a.HasField("next_offset"))
                return offset >= 300

            await eventually(pull, 60, "gRPC PullMessage to read every message from the bucket")
            assert pulled == list(enumerate(bodies))
            request = rpc.QueryOffsetRequest(message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
                                             query_offset_policy=pb.TIMESTAMP)
            request.timestamp.FromMilliseconds(stored[40])
            answer = await wire.unary("QueryOffset", request, rpc.QueryOffsetResponse)
            assert answer.status.code == pb.OK, answer.status
            return answer.offset
        finally:
            await wire.close()

    async def forward_to_dlq(wire: GrpcWire) -> None:
        """A received message only the tier holds, forwarded to the DLQ (ForwardMessageToDeadLetterQueue)."""
        group = "tier-dlq"
        received: list = []

        async def receive_first() -> bool:
            received.extend(messages(await wire.receive(group, topic, batch=1, wait_ms=500)))
            return bool(received)

        await eventually(receive_first, 30, "gRPC ReceiveMessage of a new group to get a tiered message")
        m = received[0]
        assert m.system_properties.queue_offset < 150  # deleted locally: the record comes from the tier
        forward = rpc.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic), receipt_handle=m.system_properties.receipt_handle,
            message_id=m.system_properties.message_id, delivery_attempt=1, max_delivery_attempts=16)
        moved = await wire.unary("ForwardMessageToDeadLetterQueue", forward, rpc.ForwardMessageToDeadLetterQueueResponse)
        assert moved.status.code == pb.OK, moved.status

        async def dead_lettered() -> list[str]:
            return [d.body.decode() for d in messages(await wire.pull(group, f"%DLQ%{group}", 0))]

        assert await eventually(dead_lettered, 15, "the DLQ copy") == [m.body.decode()]

    by_grpc = run(grpc())
    first_at = stored.index(stored[40])  # the first message stored in the same ms as offset 40
    assert by_grpc == first_at < local_min
    kafka = Consumer({"bootstrap.servers": f"127.0.0.1:{KAFKA_PORT}", "group.id": "tier-kafka"})
    try:
        [found] = kafka.offsets_for_times([TopicPartition(topic, 0, stored[40])], timeout=20)
        assert found.error is None and found.offset == first_at
        [start] = kafka.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=20)
        assert start.offset == 0  # the disk alone would answer its first offset, local_min
        kafka.assign([TopicPartition(topic, 0, 0)])
        fetched: list[tuple[int, str]] = []

        def fetch() -> bool:
            m = kafka.poll(1.0)
            if m is not None and m.error() is None:
                fetched.append((m.offset(), m.value().decode()))
            return len(fetched) >= 300

        wait_for(fetch, 60, "a Kafka consumer to fetch every message from the bucket")
        assert fetched == list(enumerate(bodies))
    finally:
        kafka.close()


def test_a_grpc_pull_of_an_offset_only_the_tier_holds_is_held_while_the_tier_fetches(cluster) -> None:
    """gRPC PullMessage from offset 0 of 300 messages only the bucket holds, on a cold cache (a
    topic nobody read yet): the broker holds each pull while the tier fetches what it asked for
    (up to TIER_PULL_HOLD_MAX_MS), so nearly every answer carries messages; answered "no message,
    same offset" at once, the same read took 35-71 pulls here, 25-61 of them empty. Every message
    once, in order."""
    c, _ = cluster
    ns = c.namesrv_addr
    topic = "GrpcPulled"
    bodies = [f"g{i}-{BODY}" for i in range(300)]
    local_min = run(tiered_only(ns, topic, bodies))

    async def read() -> tuple[list[tuple[int, str]], list[int]]:
        """(offset, body) of every message pulled, and how many each pull answered."""
        wire = GrpcWire(f"127.0.0.1:{GRPC_PORT}")
        pulled: list[tuple[int, str]] = []
        counts: list[int] = []
        offset, deadline = 0, time.monotonic() + 60
        try:
            while offset < len(bodies):
                assert time.monotonic() < deadline, f"gRPC pulls of {topic} stuck at {offset} after {len(counts)}"
                answers = await wire.pull("tier-grpc-cold", topic, 0, offset)
                found = messages(answers)
                pulled.extend((m.system_properties.queue_offset, m.body.decode()) for m in found)
                counts.append(len(found))
                offset = next(a.next_offset for a in answers if a.HasField("next_offset"))
        finally:
            await wire.close()
        return pulled, counts

    pulled, counts = run(read())
    assert local_min > 0 and pulled == list(enumerate(bodies))  # offsets below local_min from the bucket
    print(f"gRPC PullMessage calls for a cold first read of {len(bodies)} tiered messages: {len(counts)} "
          f"({counts.count(0)} empty)")
    assert counts.count(0) <= 3, counts  # a fetch over TIER_PULL_HOLD_MAX_MS on a loaded machine: a few


def test_a_compacted_topic_tiers_its_compacted_segments(cluster) -> None:
    """A COMPACTION topic with tiered.storage=true: nothing goes up before its queue is compacted,
    then the bucket holds the latest message of each key, at its offset; a later compaction's
    upload takes the keys it supersedes out of the older files, the uploaded records leave the
    broker's disk (retention.local.ms 0, fileReservedTime 0), and a pull from offset 0 gets the
    compacted view from the bucket."""
    c, s3 = cluster
    ns = c.namesrv_addr
    topic = "TieredPrices"
    skiff_ok("topic", "create", "-t", topic, "-q", "1", "-n", ns, "--cleanup-policy", "compaction",
             "--attr", "tiered.storage=true")
    tier = Tier(backend_from_url("s3://skiff-tier/cluster1", endpoint_url=s3.endpoint))

    def in_the_bucket() -> list[tuple[int, str, str]]:
        m = tier.manifest(topic, "broker-a")
        rows = tier.read(m, 0, 0, 1000)
        return list(zip(rows.column("queue_offset").to_pylist(), rows.column("keys").to_pylist(),
                        (b.decode() for b in rows.column("body").to_pylist())))

    async def compacted_and_uploaded(admin: AsyncAdmin, end: int) -> None:
        async def done() -> bool:
            (b,) = await admin.compaction(topic, run=True)  # compacts what is flushed by now
            (t,) = await admin.tier(topic, upload=True)
            assert t.state is not None, t.error
            return b.state is not None and b.state.queues[0].cleaned_offset == end and \
                t.state.queues[0].uploaded_to == end

        await eventually(done, 30, f"{topic} to be compacted and its segment uploaded up to {end}")

    async def scenario() -> tuple[list[tuple[int, str, str]], tuple[int, int]]:
        async with AsyncAdmin(client_config=config(ns, "tier-compacted-admin")) as admin:
            await wait_for_route(admin, topic)
            await send(ns, [Message.of(topic, f"v{i}", keys=f"k{i % 4}") for i in range(40)])
            await compacted_and_uploaded(admin, 40)
            first = in_the_bucket()
            planned.append(tier.manifest(topic, "broker-a"))  # a reader's plan before the rewrite
            await send(ns, [Message.of(topic, f"v{i}", keys=f"k{i % 2}") for i in range(40, 50)])
            await compacted_and_uploaded(admin, 50)
            return first, await queue_bounds(admin, topic)

    planned: list[Manifest] = []
    first, bounds = run(scenario())
    assert first == [(i, f"k{i % 4}", f"v{i}") for i in range(36, 40)]
    want = [(38, "k2", "v38"), (39, "k3", "v39"), (48, "k0", "v48"), (49, "k1", "v49")]
    assert in_the_bucket() == want  # 36 and 37 went: 48 and 49 supersede them
    assert bounds == (50, 50)  # the compacted segment's uploaded records left the disk
    assert run(read_from(ns, topic, 0, 50)) == [(o, v) for o, _, v in want]
    listed = s3.client().list_objects_v2(Bucket="skiff-tier", Prefix=f"cluster1/{topic}/")
    m = tier.manifest(topic, "broker-a")
    assert sorted(o["Key"] for o in listed["Contents"]) == sorted(
        [f"cluster1/{topic}/broker-a/manifest.json"] + [f"cluster1/{f}" for f in m.known_files()])
    # the replaced file stays retired for tierFileDeleteDelayMs: the old plan still reads it whole
    assert planned[0].listed_files() & {r.file for r in m.retired}
    old = Tier(tier.backend).read(planned[0], 0, 0, 1000)
    assert old.column("queue_offset").to_pylist() == [36, 37, 38, 39]


def test_a_deleted_topics_tier_goes_after_the_grace_period(cluster) -> None:
    c, s3 = cluster
    ns = c.namesrv_addr
    skiff_ok("topic", "create", "-t", "Gone", "-q", "1", "-n", ns, "--attr", "tiered.storage=true")

    def keys() -> list[str]:
        listed = s3.client().list_objects_v2(Bucket="skiff-tier", Prefix="cluster1/Gone/")
        return [o["Key"] for o in listed.get("Contents", [])]

    async def fill() -> None:
        async with AsyncAdmin(client_config=config(ns, "tier-gone-admin")) as admin:
            await wait_for_route(admin, "Gone")
            await send(ns, [Message.of("Gone", f"g{i}") for i in range(20)])

            async def uploaded() -> bool:
                (b,) = await admin.tier("Gone")
                return b.state is not None and b.state.queues[0].uploaded_to == 20

            await eventually(uploaded, 30, "the uploader to put Gone's messages in the bucket")

    run(fill())
    assert "cluster1/Gone/broker-a/manifest.json" in keys() and any(k.endswith(".parquet") for k in keys())
    skiff_ok("topic", "delete", "-t", "Gone", "-n", ns)
    wait_for(lambda: not keys(), 30, "the deleted topic's tier to be deleted after the grace period")


def dashboard_panel(ns: str) -> None:
    """The dashboard's topic page and API show the tier's state per queue."""
    async def test(client) -> None:
        topic = await api_call(client, "GET", "/api/topics/Tiered")
        (row,) = topic["tier"]
        assert (row["broker_name"], row["queue_id"], row["uploaded_to"], row["lag_messages"]) == ("broker-a", 0, 300, 0)
        assert row["local_min_offset"] > 0 and row["url"] == "s3://skiff-tier/cluster1"
        assert (await api_call(client, "GET", "/api/topics/Plain"))["tier"] == []
        page = await (await client.get("/topics/Tiered")).text()
        assert 'id="tier"' in page and "s3://skiff-tier/cluster1" in page

    with_dashboard_client(ns, test)
