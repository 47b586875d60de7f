"""A broker restarted over a store with RocketMQ's 1 GiB CommitLog files stays small:
recovery reads only what it must validate, never the whole mapping (issue 12, where a
restart over 7 MB of messages used to cost 1.1 GB of RSS)."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from skiff.common import kernels
from skiff.common.message import Message
from skiff.protocol.codes import ResponseCode
from skiff.testing.processes import SkiffProcess, start_broker
from skiff.testing.waits import wait_for
from skiff.testing.wire import BrokerWire
from skiff.transport.loop import run_coroutine

COMMITLOG_BYTES = 1 << 30
IDLE_RSS_LIMIT = 150 * 1000 * 1000
BATCHES = 128
BATCH = 32
BODY = bytes(range(256)) * 4  # 1 KiB: 4 MiB of messages in all

FULL_SIZE_STORE = (
    f"--mappedFileSizeCommitLog={COMMITLOG_BYTES}",
    "--maxHashSlotNum=4096",
    "--maxIndexNum=16384",
    "--flushIntervalCommitLog=50",
)
"""RocketMQ's CommitLog file size (the index stays small: it is not what this measures)."""


def _fill(addr: str) -> None:
    async def main() -> None:
        wire = BrokerWire(addr)
        try:
            for i in range(BATCHES):
                resp = await wire.send_batch("Restart", [Message.of("Restart", BODY)] * BATCH, queue_id=i % 4)
                assert resp.code == ResponseCode.SUCCESS, resp
        finally:
            await wire.close()
    run_coroutine(main())


def _last_body(addr: str) -> tuple[int, bytes]:
    async def main() -> tuple[int, bytes]:
        wire = BrokerWire(addr)
        try:
            got = await wire.pull_messages("G", "Restart", 3, BATCHES // 4 * BATCH - 1)
            return got[-1].queue_offset, got[-1].body
        finally:
            await wire.close()
    return run_coroutine(main())


def _settled_rss(broker: SkiffProcess) -> int:
    """The broker's RSS once it stopped growing (its warm thread populates 32 MiB ahead
    of the writer just after the start): two readings 0.3 s apart within 1 MB."""
    proc = psutil.Process(broker.pid)
    last = [proc.memory_info().rss]

    def steady() -> int:
        time.sleep(0.3)  # the interval between two readings, not a wait for an event
        now = proc.memory_info().rss
        before, last[0] = last[0], now
        return now if abs(now - before) < 1_000_000 else 0
    return wait_for(steady, timeout_s=30, what="the broker's RSS to settle")


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_a_restart_over_a_full_size_commitlog_keeps_idle_rss_small(tmp_path: Path, stop: str):
    store = tmp_path / "store"
    broker = start_broker(store, "", *FULL_SIZE_STORE)
    try:
        _fill(broker.addr)
        port = broker.port
    finally:
        broker.stop() if stop == "sigterm" else broker.kill()
    (commitlog,) = (store / "commitlog").iterdir()
    assert commitlog.stat().st_size == COMMITLOG_BYTES
    broker = start_broker(store, "", *FULL_SIZE_STORE, port=port)
    try:
        assert _last_body(broker.addr) == (BATCHES // 4 * BATCH - 1, BODY)  # recovery found every message
        assert kernels.IMPLEMENTATION in broker.output  # the start line says which kernels run
        rss = _settled_rss(broker)
        assert rss <= IDLE_RSS_LIMIT, f"idle RSS after a restart: {rss / 1e6:.0f} MB"
    finally:
        broker.stop()
