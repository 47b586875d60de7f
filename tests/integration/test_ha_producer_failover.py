"""Failover as our producers see it (controller mode, real etcd and brokers): the master of
the only broker group is killed -9 while an async and a blocking producer send in a loop
with a send timeout longer than the election; no send fails (the producers refresh the
route and wait for the new master), and every acknowledged message is consumed from the
broker elected after it (docs/client.md, "What a send does")."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

import pytest

from skiff.client import AsyncProducer, AsyncPullClient, ClientConfig, Message, Producer, PullStatus, SendResult
from skiff.protocol.codes import RequestCode
from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.failover import equals, master_of, sync_set
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire
from tests.integration.consumer_kit import create_topic

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

TOPIC = "ProducerFailover"
QUEUES = 4
SEND_TIMEOUT_MS = 10_000
"""Longer than an election (the 2 s lease of ControllerGroup plus the vote)."""


def client_config(namesrv: str, name: str) -> ClientConfig:
    """Default intervals: the route is refreshed because a send needs it, not by the 30 s poll."""
    return ClientConfig(namesrv, instance_name=name, client_ip="127.0.0.1")


async def knows_topic(addr: str) -> bool:
    wire = BrokerWire(addr)
    try:
        return TOPIC.encode() in (await wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body
    finally:
        await wire.close()


async def read_all(namesrv: str) -> dict[str, bytes]:
    """Every message of the topic by msg id (UNIQ_KEY), pulled through the route."""
    out: dict[str, bytes] = {}
    async with AsyncPullClient(client_config=client_config(namesrv, "failover-reader")) as pull:
        for mq in await pull.fetch_subscribe_queues(TOPIC):
            offset = 0
            while True:
                result = await pull.pull(mq, offset, 32)
                out.update((m.msg_id, m.body) for m in result.messages)
                if result.status is not PullStatus.FOUND:
                    break
                offset = result.next_begin_offset
    return out


class Tally:
    """What every sender got, shared by the event-loop senders and the blocking one's thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[str, bytes] = {}
        self.failed: list[tuple[str, BaseException]] = []
        self.slowest_s = 0.0
        self.running = True

    def record(self, body: str, started: float, result: SendResult | None, error: BaseException | None) -> None:
        with self.lock:
            self.slowest_s = max(self.slowest_s, time.monotonic() - started)
            if result is not None:
                self.acked[result.msg_id] = body.encode()
            else:
                self.failed.append((body, error))  # type: ignore[arg-type]

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.acked) + len(self.failed)


async def async_sender(producer: AsyncProducer, tally: Tally, name: str) -> None:
    i = 0
    while tally.running:
        body = f"{name}-{i}"
        started = time.monotonic()
        try:
            tally.record(body, started, await producer.send(Message.of(TOPIC, body)), None)
        except Exception as exc:  # noqa: BLE001 - what the test counts
            tally.record(body, started, None, exc)
        i += 1


def blocking_sender(producer: Producer, tally: Tally) -> None:
    i = 0
    while tally.running:
        body = f"blocking-{i}"
        started = time.monotonic()
        try:
            tally.record(body, started, producer.send(Message.of(TOPIC, body)), None)
        except Exception as exc:  # noqa: BLE001 - what the test counts
            tally.record(body, started, None, exc)
        i += 1


def test_no_send_fails_while_the_master_is_killed_and_a_new_one_elected(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="skiff.client._impl")
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint,
                                                          broker_args=["--slaveTimeout=1000"]) as group:
        async def main() -> None:
            first = await eventually(lambda: master_of(group), 20, "a master elected")
            await eventually(lambda: equals(sync_set(group, first), "1,2"), 30, "both in the SyncStateSet")
            await create_topic(group.namesrv_addr, TOPIC, QUEUES)
            other = next(i for i in group.broker_ids if i != first)
            await eventually(lambda: knows_topic(group.addr(other)), 20, "the topic synced to the slave")

            tally = Tally()
            namesrv = group.namesrv_addr
            async with AsyncProducer("PG-failover", client_config=client_config(namesrv, "failover-async"),
                                     send_timeout_ms=SEND_TIMEOUT_MS) as producer:
                blocking = Producer("PG-failover-blocking", client_config=client_config(namesrv, "failover-blocking"),
                                    send_timeout_ms=SEND_TIMEOUT_MS)
                blocking.start()
                tasks = [asyncio.create_task(async_sender(producer, tally, f"async{k}")) for k in range(3)]
                thread = asyncio.create_task(asyncio.to_thread(blocking_sender, blocking, tally))
                try:
                    await eventually(lambda: tally.count > 100, 20, "sends flowing before the kill")
                    group.kill_broker(first)
                    killed_at = time.monotonic()
                    assert await eventually(lambda: master_of(group), 20, "the other broker elected") == other
                    elected_s = time.monotonic() - killed_at
                    after = tally.count
                    await eventually(lambda: tally.count > after + 100, 30, "sends acknowledged by the new master")
                finally:
                    tally.running = False
                    await asyncio.gather(*tasks, thread)
                    await asyncio.to_thread(blocking.shutdown)

            assert tally.failed == [], tally.failed[:5]
            felt = [r.getMessage() for r in caplog.records
                    if "failed (attempt" in r.getMessage() or "waiting up to" in r.getMessage()]
            assert felt, "no send saw the failover (retried or waited for the master)"
            assert any(b.startswith(b"blocking-") for b in tally.acked.values())
            stored = await eventually(lambda: _has_all(namesrv, tally.acked), 30, "every acknowledged message read")
            assert {k: stored[k] for k in tally.acked} == tally.acked
            print(f"election {elected_s:.2f} s, slowest send {tally.slowest_s:.2f} s, {len(tally.acked)} acked")
        asyncio.run(main())


async def _has_all(namesrv: str, acked: dict[str, bytes]) -> dict[str, bytes] | None:
    stored = await read_all(namesrv)
    return stored if acked.keys() <= stored.keys() else None
