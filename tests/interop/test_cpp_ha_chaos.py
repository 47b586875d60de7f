"""The chaos test of controller mode (docs/replication.md): a group of three brokers (a master
and two slaves) on a three-member etcd; the master is killed with SIGKILL five times while the real RocketMQ C++ producer and Skiff's own Producer send ordered
messages (a sharding key each, SYNC_MASTER, a fixed rate) and Skiff's orderly push consumer
reads. Every message answered SEND_OK must be consumed at least once, in order per key
(first occurrences: a resend after a lost answer may repeat one); duplicates are counted
and printed; each killed broker comes back as a slave.

The issue asks for a kill every 20 s; the test kills as soon as every broker is in sync and
sends flow again (a few seconds), to keep the suite's time. The C++ client refreshes its
routes every 30 s and has no setting for it, so between a failover and that refresh it
sends to the broker it knew: it gets answers only while that broker is master again, and its
share of the messages is smaller than ours. After the last kill the test waits for its first
SEND_OK from the new master (at most that refresh, plus slack): its write recovery time.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from skiff.client import AsyncProducer, AsyncPushConsumer, ConsumeOrderlyStatus, Message, SelectByHash, SendStatus
from skiff.client.errors import SkiffError
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere
from skiff.testing.etcd import EtcdCluster, etcd_binary
from skiff.testing.failover import all_in_sync, info, kill_masters, master_of
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually
from tests.integration.consumer_kit import config, create_topic
from tests.interop._cpp import cpp_python, start_script

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(240),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

TOPIC = "Chaos"
KEYS = 4
INTERVAL_S = 0.05
"""Each key's sender: one message per 50 ms (20 msg/s), the next once the last is SEND_OK."""
CPP_SEND_OK = "OK"
"""SEND_OK as the C++ client's Python binding names it."""
CPP_ROUTE_REFRESH_S = 30
"""The C++ client's route refresh period: the longest it keeps sending to a dead master."""


class OurSenders:
    """Skiff's Producer, one task per sharding key ``p<k>``, resending a number until SEND_OK."""

    def __init__(self, producer: AsyncProducer) -> None:
        self.producer = producer
        self.acked: dict[str, list[int]] = {f"p{k}": [] for k in range(KEYS)}
        self.statuses: Counter[str] = Counter()
        self.running = True

    @property
    def acked_count(self) -> int:
        return sum(map(len, self.acked.values()))

    async def run(self, key: str) -> None:
        seq = 0
        while self.running:
            try:
                result = await self.producer.send(Message.of(TOPIC, f"{key}:{seq}", keys=key),
                                                  selector=SelectByHash(), arg=key)
                status = result.send_status.name
            except (SkiffError, OSError, asyncio.TimeoutError) as exc:  # the master died under the send
                status = type(exc).__name__
            self.statuses[status] += 1
            if status == SendStatus.SEND_OK.name:
                self.acked[key].append(seq)
                seq += 1
            await asyncio.sleep(INTERVAL_S)


class Reader:
    """What the orderly consumer was given, in the order it was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int, int]] = []  # (key, seq, queue id, queue offset)

    def __call__(self, msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
        for m in msgs:
            key, _, seq = m.body.decode().partition(":")
            self.seen.append((key, int(seq), m.queue_id, m.queue_offset))
        return ConsumeOrderlyStatus.SUCCESS

    def bodies(self) -> set[tuple[str, int]]:
        return {(k, s) for k, s, _, _ in self.seen}


def cpp_messages(count: int) -> list[dict[str, Any]]:
    return [{"body": f"c{i % KEYS}:{i // KEYS}", "keys": f"c{i % KEYS}", "arg": i % KEYS} for i in range(count)]


class CppProducer:
    """The C++ producer script sending ``cpp_messages`` in order; ``answers`` fills as it goes."""

    def __init__(self, home: Path, namesrv: str) -> None:
        self.proc = start_script(home, "producer", {
            "namesrv": namesrv, "group": "PG-chaos-cpp", "topic": TOPIC, "mode": "orderly", "retry_s": 120,
            "interval_ms": int(INTERVAL_S * 1000), "messages": cpp_messages(2400), "stream": True})
        self.answers: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            item = json.loads(line) if line.startswith("{") else {}
            if "answer" in item:
                self.answers.append(item["answer"])

    def ok_after(self, t: float) -> list[float]:
        return [a["t"] for a in list(self.answers) if a.get("status") == CPP_SEND_OK and a["t"] > t]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        assert self.proc.returncode == 0, stderr[-3000:]

    def acked(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = defaultdict(list)
        for spec, answer in zip(cpp_messages(len(self.answers)), self.answers):
            if answer.get("status") == CPP_SEND_OK:
                key, _, seq = spec["body"].partition(":")
                out[key].append(int(seq))
        return out


def test_kill_the_master_five_times_under_cpp_and_skiff_producers(tmp_path: Path) -> None:
    cpp_python()
    with EtcdCluster(tmp_path / "etcd", 3) as etcd, ControllerGroup(
            tmp_path, etcd.endpoints, brokers=3,
            broker_args=["--slaveTimeout=1000", "--slaveSyncInterval=500"]) as group:
        ns = group.namesrv_addr

        async def main() -> None:
            await eventually(lambda: master_of(group), 20, "a master elected")
            await create_topic(ns, TOPIC, 4)
            reader = Reader()
            consumer = AsyncPushConsumer("CG-chaos", client_config=config(ns, "chaos-consumer"), trace=False,
                                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
            consumer.subscribe(TOPIC, "*")
            consumer.register_orderly_listener(reader)
            await consumer.start()
            cpp = CppProducer(tmp_path / "home", ns)
            producer = AsyncProducer("PG-chaos", client_config=config(ns, "chaos-producer"), trace=False)
            await producer.start()
            ours = OurSenders(producer)
            tasks = [asyncio.create_task(ours.run(key)) for key in ours.acked]
            try:
                kill_times: list[float] = []
                failovers = await kill_masters(group, ours, kills=5, kill_log=kill_times)
                resumed = await eventually(lambda: cpp.ok_after(kill_times[-1]), CPP_ROUTE_REFRESH_S + 10,
                                           "the C++ producer's SEND_OK from the last master")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; our sends answered {dict(ours.statuses)}") from None
            finally:
                ours.running = False
                await asyncio.gather(*tasks)
                await producer.shutdown()
                await asyncio.to_thread(cpp.stop)
            cpp_acked = cpp.acked()
            acked = {(k, s) for source in (ours.acked, cpp_acked) for k, seqs in source.items() for s in seqs}

            try:
                await eventually(lambda: acked <= reader.bodies(), 60, "every SEND_OK message consumed")
            finally:
                await consumer.shutdown()
            final = await master_of(group)
            assert final is not None
            await eventually(lambda: all_in_sync(group, final), 30, "the restarted brokers in sync")
            roles = {i: (await info(group.addr(i)) or {}).get("brokerRole") for i in group.broker_ids}
            assert sorted(roles.values()) == ["SLAVE", "SLAVE", "SYNC_MASTER"], roles

            first_seen: dict[str, list[int]] = defaultdict(list)
            for key, seq, _, _ in reader.seen:
                if seq not in first_seen[key]:
                    first_seen[key].append(seq)
            disorder = {k: v for k, v in first_seen.items() if v != sorted(v)}
            deliveries = Counter((k, s) for k, s, _, _ in reader.seen)
            stored_twice = Counter((k, s) for k, s, _, _ in set(reader.seen))
            redelivered = sorted(m for m, n in deliveries.items() if n > stored_twice[m])
            resent = sorted(m for m, n in stored_twice.items() if n > 1)
            cpp_after = [len(cpp.ok_after(start)) - len(cpp.ok_after(end))
                         for start, end in zip([0.0, *kill_times], [*kill_times, time.time()])]
            print(f"failovers {['%.2f' % f for f in failovers]} s; SEND_OK ours {ours.acked_count} "
                  f"(statuses {dict(ours.statuses)}), C++ {sum(map(len, cpp_acked.values()))} "
                  f"(statuses {dict(Counter(a.get('status') or 'error' for a in cpp.answers))}), "
                  f"C++ SEND_OK between kills {cpp_after}, first after the last kill in "
                  f"{resumed[0] - kill_times[-1]:.1f} s; consumed {len(reader.seen)}, "
                  f"stored twice (a resend after a lost answer) {len(resent)}: {resent[:50]}, "
                  f"delivered twice {len(redelivered)}: {redelivered[:50]}")
            assert not disorder, {k: v[:100] for k, v in disorder.items()}
            assert max(failovers) <= 5.0, failovers
            assert all(cpp_acked.get(f"c{k}") for k in range(KEYS)), "the C++ producer got no SEND_OK for a key"
        asyncio.run(main())
