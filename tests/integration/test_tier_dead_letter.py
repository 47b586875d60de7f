"""A message only the tier holds, moved to the dead-letter queue at its last delivery attempt.

A real broker with a filesystem tier deletes its local copy of an uploaded message (small
CommitLog files, fileReservedTime=0, retention.local.ms=0). A gRPC group receives it (from the
bucket), and the broker restarts before the consumer gives up on it: its tier caches are cold,
so when the client forwards the message to the DLQ (delivery attempt = max attempts, as the
official clients do), the broker must wait for the tier's fetch (`TIER_SETTLE_WAIT_S`) rather
than answer busy; the DLQ then holds the message whole: body (compressed when sent, stored
inflated in the tier), keys, tag and user properties.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skiff.client import AsyncAdmin, Message
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire, messages
from skiff.testing.processes import free_port, run_skiff
from skiff.testing.waits import eventually
from tests.integration.consumer_kit import config, run, send, wait_for_route

EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
TOPIC = "TieredDead"
GROUP = "tier-last-attempt"


@pytest.mark.slow  # a cluster, a restart: about 15 s
def test_a_message_only_the_tier_holds_reaches_the_dlq_whole_after_its_last_attempt(tmp_path: Path) -> None:
    grpc_port = free_port()
    args = [f"--tierStorageUrl=file://{tmp_path / 'tier'}", "--tierSealMs=1", "--tierUploadIntervalMs=200",
            "--mappedFileSizeCommitLog=65536", "--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}",
            "--cleanResourceInterval=200", "--flushIntervalCommitLog=50", f"--grpcServerPort={grpc_port}"]
    body = os.urandom(2000) + b"compressible " * 3000  # past the producer's compression threshold
    target = Message.of(TOPIC, body, keys="order-7 order-8", tags="TagA", properties={"user": "u-1", "n": "7"})
    with Cluster(tmp_path / "cluster", broker_args=args) as cluster:
        ns = cluster.namesrv_addr
        done = run_skiff(["topic", "create", "-t", TOPIC, "-q", "1", "-n", ns, "--attr", "tiered.storage=true"])
        assert done.returncode == 0, done.stdout

        async def only_in_the_tier() -> None:
            async with AsyncAdmin(client_config=config(ns, "tier-dlq-admin")) as admin:
                await wait_for_route(admin, TOPIC)
                (sent,) = await send(ns, [target])
                assert sent.queue_offset == 0
                await send(ns, [Message.of(TOPIC, f"filler-{i}-" + "x" * 1000) for i in range(150)])

                async def gone() -> bool:
                    (b,) = await admin.tier(TOPIC)
                    (q,) = b.state.queues if b.state is not None else (None,)
                    return q is not None and q.uploaded_to == 151 and q.local_min_offset > 0

                await eventually(gone, 60, "offset 0 uploaded and deleted from the broker's disk")

        run(only_in_the_tier())

        async def receive() -> bytes:
            wire = GrpcWire(f"127.0.0.1:{grpc_port}")
            try:
                got: list = []

                async def first() -> bool:  # the broker fetches the file meanwhile
                    got.extend(messages(await wire.receive(GROUP, TOPIC, batch=1, wait_ms=500)))
                    return bool(got)

                await eventually(first, 30, "the tiered message to be received")
                (m,) = got
                assert (m.system_properties.queue_offset, m.system_properties.delivery_attempt) == (0, 1)
                assert m.body == body
                return m.system_properties.receipt_handle.encode()
            finally:
                await wire.close()

        handle = run(receive()).decode()
        cluster.restart_broker(0)  # the tier's caches start empty: the DLQ move has to fetch

        async def forward() -> list:
            wire = GrpcWire(f"127.0.0.1:{grpc_port}")
            try:
                request = rpc.ForwardMessageToDeadLetterQueueRequest(
                    group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC), receipt_handle=handle,
                    message_id=target.properties.get("UNIQ_KEY", ""), delivery_attempt=1, max_delivery_attempts=1)
                moved = await wire.unary("ForwardMessageToDeadLetterQueue", request,
                                         rpc.ForwardMessageToDeadLetterQueueResponse)
                assert moved.status.code == pb.OK, moved.status  # waited for the fetch, not "busy"

                async def dead() -> list:
                    return messages(await wire.pull("tier-dlq-reader", f"%DLQ%{GROUP}", 0, 0))

                return await eventually(dead, 30, "the DLQ's copy")
            finally:
                await wire.close()

        (copy,) = run(forward())
    assert copy.body == body
    assert (list(copy.system_properties.keys), copy.system_properties.tag) == (["order-7", "order-8"], "TagA")
    assert (copy.user_properties["user"], copy.user_properties["n"]) == ("u-1", "7")
