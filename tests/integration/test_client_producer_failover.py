"""Retries on another broker and latency fault avoidance, with real brokers that
die or refuse writes while our producer sends."""

from __future__ import annotations

import logging

import pytest

from skiff.client import AsyncAdmin, AsyncProducer, Message, MessageQueue
from skiff.client._impl.config import ClientConfig
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.errors import RemotingError
from skiff.testing.cluster import Cluster
from skiff.transport.loop import run_coroutine
from tests.integration.test_client_producer import by_id, config, create_topic, read_all

FAILED_ATTEMPT = "failed (attempt"


def producer(cluster: Cluster, name: str, **options) -> AsyncProducer:
    config = ClientConfig(cluster.namesrv_addr, instance_name=name, client_ip="127.0.0.1")
    return AsyncProducer(f"PG-{name}", client_config=config, **options)


def failed_attempts(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if FAILED_ATTEMPT in r.getMessage()]


def test_sends_move_to_the_live_broker_and_avoid_the_dead_one(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="skiff.client._impl.producer_impl")

    async def main(cluster: Cluster):
        await create_topic(cluster, "F-dead")
        async with producer(cluster, "avoiding") as avoiding:
            before = [await avoiding.send(Message.of("F-dead", f"before-{i}")) for i in range(8)]
            assert {r.message_queue.broker_name for r in before} == {"broker-a", "broker-b"}
            cluster.kill_broker(1)

            after = [await avoiding.send(Message.of("F-dead", f"after-{i}")) for i in range(20)]
            assert {r.message_queue.broker_name for r in after} == {"broker-a"}
            assert len(failed_attempts(caplog)) == 1  # broker-b failed once, then was skipped
            assert not avoiding._core.fault.faults.is_available("broker-b")


            with pytest.raises(RemotingError):  # a pinned (ordered) send is never moved elsewhere
                await avoiding.send(Message.of("F-dead", b"pinned"), queue=MessageQueue("F-dead", "broker-b", 0))

            cluster.start_broker(1)
            again = [await avoiding.send(Message.of("F-dead", f"again-{i}")) for i in range(6)]
            assert {r.message_queue.broker_name for r in again} == {"broker-a"}  # isolated (and off the refreshed route)
        stored = by_id(await read_all(cluster, "F-dead"))
        for r in before + after + again:
            assert r.msg_id in stored

    with Cluster(tmp_path, brokers=2) as cluster:
        run_coroutine(main(cluster))


def test_a_broker_that_refuses_writes_is_retried_around_and_then_avoided(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="skiff.client._impl.producer_impl")

    async def main(cluster: Cluster):
        await create_topic(cluster, "F-readonly")
        cluster.restart_broker(1, "--brokerPermission=4")
        async with AsyncAdmin(client_config=config(cluster, "it-admin")) as admin:
            route = await admin.topic_route("F-readonly")
        # the scenario: the route still offers broker-b for writes, and broker-b answers NO_PERMISSION
        assert {q.broker_name for q in route.queue_datas if q.perm & Perm.WRITE} == {"broker-a", "broker-b"}
        async with producer(cluster, "plain", latency_fault_enabled=False) as plain:
            unguarded = [await plain.send(Message.of("F-readonly", f"plain-{i}")) for i in range(8)]
        plain_failures = failed_attempts(caplog)
        caplog.clear()
        async with producer(cluster, "avoiding") as avoiding:
            guarded = [await avoiding.send(Message.of("F-readonly", f"avoiding-{i}")) for i in range(8)]
        assert {r.message_queue.broker_name for r in unguarded + guarded} == {"broker-a"}
        assert len(plain_failures) >= 2 and all("NO_PERMISSION" in f for f in plain_failures)
        assert len(failed_attempts(caplog)) <= 1
        stored = by_id(await read_all(cluster, "F-readonly"))
        assert sorted(stored) == sorted(r.msg_id for r in unguarded + guarded)

    with Cluster(tmp_path, brokers=2) as cluster:
        run_coroutine(main(cluster))
