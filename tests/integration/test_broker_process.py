"""`skiff broker` and `skiff up` as processes: configuration errors, a port in use,
clean stops on SIGTERM/SIGINT, and no acknowledged message lost to SIGKILL under
SYNC_FLUSH."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.testing.cluster import Cluster
from skiff.testing.processes import broker_args, free_port, run_skiff, start_skiff
from skiff.testing.wire import BrokerWire
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine

REPO = Path(__file__).resolve().parents[2]


def test_bad_configs_exit_non_zero_with_the_reason(tmp_path: Path):
    cases = [
        (["broker", "--listenPort=abc"], "skiff: listenPort: 'abc' is not a whole number"),
        (["broker", "--brokerNmae=x"], "skiff: unknown configuration key 'brokerNmae'"),
        (["broker", "-c", str(tmp_path / "missing.conf")], "skiff: cannot read config file"),
        (["broker", "-n", "nowhere", f"--storePathRootDir={tmp_path}"], "namesrvAddr: 'nowhere' has 'nowhere'"),
        (["up", "--namesrv-port", "99999"], "skiff: listenPort: 99999 is not a port"),
    ]
    with ThreadPoolExecutor(len(cases)) as pool:
        results = list(pool.map(lambda case: run_skiff(case[0], cwd=tmp_path), cases))
    for (args, words), done in zip(cases, results):
        assert done.returncode == 2 and words in done.stdout, (args, done.stdout)
        assert "Traceback" not in done.stdout


def test_a_port_in_use_exits_non_zero(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_skiff(broker_args(tmp_path / "store", "", port=port))
    assert done.returncode == 1
    assert f"skiff: cannot listen on 127.0.0.1:{port}: address already in use" in done.stdout
    assert not (tmp_path / "store" / "abort").exists()  # the store was shut down cleanly


def test_the_example_config_starts_a_broker(tmp_path: Path):
    args = ["broker", "-c", str(REPO / "examples" / "broker.conf"), "--listenHost=127.0.0.1",
            "--listenPort=0", f"--storePathRootDir={tmp_path}", "--namesrvAddr=", "--grpcServerPort=0"]
    with start_skiff(args) as broker:
        assert "broker broker-a of cluster DefaultCluster" in broker.output
    assert broker.popen.returncode == 0


def test_sigterm_and_sigint_stop_cleanly_and_unregister(tmp_path: Path):
    with Cluster(tmp_path) as cluster:
        async def send():
            wire = BrokerWire(cluster.broker_addr())
            try:
                for i in range(5):
                    assert (await wire.send(Message.of("Clean", f"m{i}"))).code == ResponseCode.SUCCESS
                await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET,
                                {"consumerGroup": "G", "topic": "Clean", "queueId": 0, "commitOffset": 4})
            finally:
                await wire.close()
        run_coroutine(send())
        broker = cluster.broker()
        broker.signal(signal.SIGINT)
        assert broker.wait() == 0
        assert "skiff broker stopped" in broker.output
        assert not (cluster.store_dir(0) / "abort").exists()
        offsets = json.loads((cluster.store_dir(0) / "config" / "consumerOffset.json").read_text())
        assert offsets == {"offsetTable": {"Clean@G": {"0": 4}}}
        assert "at 127.0.0.1:" in cluster.namesrv.output and "unregistered" in cluster.namesrv.output

        async def route_gone():
            client = RemotingClient()
            try:
                resp = await client.invoke(cluster.namesrv_addr, RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Clean"}), 5000)
                assert resp.code == ResponseCode.TOPIC_NOT_EXIST
            finally:
                await client.close()
        run_coroutine(route_gone())
        cluster.brokers[0] = None
        cluster.start_broker(0)  # then SIGTERM through the cluster's stop


def test_sigkill_under_sync_flush_loses_no_acknowledged_message(tmp_path: Path):
    with Cluster(tmp_path, broker_args=["--flushDiskType=SYNC_FLUSH"]) as cluster:
        acked: list[str] = []

        async def produce():
            wire = BrokerWire(cluster.broker_addr(), timeout_ms=5000)
            killed = False

            async def one(i: int):
                try:
                    resp = await wire.send(Message.of("Durable", f"m{i}".encode() * 50), queue_id=i % 4)
                except Exception:
                    return
                if resp.code == ResponseCode.SUCCESS:
                    acked.append(resp.ext("msgId"))
            try:
                i = 0
                while not killed:
                    await asyncio.gather(*(one(i + k) for k in range(16)))
                    i += 16
                    if len(acked) >= 300:
                        await asyncio.get_running_loop().run_in_executor(None, cluster.kill_broker, 0)
                        killed = True
                await asyncio.gather(*(one(i + k) for k in range(16)))  # in flight at the kill: not acknowledged
            finally:
                await wire.close()
        run_coroutine(produce())
        assert len(acked) >= 300
        cluster.start_broker(0)

        async def check():
            wire = BrokerWire(cluster.broker_addr())
            try:
                stored = {m.offset_msg_id for q in range(4) for m in await wire.pull_messages("G", "Durable", q)}
            finally:
                await wire.close()
            assert set(acked) <= stored, f"{len(set(acked) - stored)} acknowledged messages lost"
        run_coroutine(check())
        assert "clean_shutdown=False" in cluster.broker().output


def test_skiff_up_runs_a_namesrv_and_a_broker_in_one_process(tmp_path: Path):
    metrics_port, grpc_port = free_port(), free_port()
    args = ["up", "--dir", "data", "--namesrv-port", "0", "--broker-port", "0", "--listenHost=127.0.0.1",
            "--mappedFileSizeCommitLog=4194304", "--maxHashSlotNum=1024", "--maxIndexNum=4096",
            "--metrics-port", str(metrics_port), "--namesrv-metrics-port", "0", f"--grpcServerPort={grpc_port}"]
    with start_skiff(args, cwd=tmp_path) as up:
        m = up.wait_for_line(r"skiff broker listening on (?P<host>[\d.]+):(?P<port>\d+), store data ")
        broker_addr = f"{m['host']}:{m['port']}"
        assert f"metrics at http://127.0.0.1:{metrics_port}/metrics" in m.string
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            assert b"rocketmq_broker_permission{" in resp.read()

        async def use():
            wire = BrokerWire(broker_addr)
            try:
                assert (await wire.send(Message.of("UpTopic", b"hello"))).code == ResponseCode.SUCCESS
                assert [m.body for m in await wire.pull_messages("G", "UpTopic", 0)] == [b"hello"]
            finally:
                await wire.close()
        run_coroutine(use())
        assert f"registered with 127.0.0.1:{up.port}" in up.output
        assert f"gRPC endpoint (RocketMQ 5.x clients) listening on 127.0.0.1:{grpc_port}" in up.output
    assert up.popen.returncode == 0 and "skiff broker stopped" in up.output
    assert (tmp_path / "data" / "commitlog").is_dir() and not (tmp_path / "data" / "abort").exists()


@pytest.mark.parametrize("flag", ["--metrics-port", "--namesrv-metrics-port"])
def test_skiff_up_with_a_metrics_port_in_use_stops_with_a_clear_error(tmp_path: Path, flag: str):
    """The server's own bind finds the port taken (no test bind before it that another process
    could race): `skiff up` exits 1 naming the port and the options that move it."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--metrics-port": "0", "--namesrv-metrics-port": "0", flag: str(port)}
        done = run_skiff(["up", "--dir", "data", "--namesrv-port", "0", "--broker-port", "0",
                          "--listenHost=127.0.0.1", "--no-dashboard", "--grpcServerPort=0",
                          *(a for item in ports.items() for a in item)], cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert f"cannot serve metrics on 127.0.0.1:{port}: address already in use" in done.stdout
    assert "--metrics-port and --namesrv-metrics-port (0: no metrics)" in done.stdout


def _disk_bytes(root: Path) -> int:
    """Bytes the file system allocated under ``root`` (sparse files count what they hold)."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def test_skiff_up_uses_try_out_file_sizes_and_little_disk(tmp_path: Path):
    args = ["up", "--dir", "data", "--namesrv-port", "0", "--broker-port", "0", "--listenHost=127.0.0.1",
            "--metrics-port", "0", "--namesrv-metrics-port", "0", "--no-dashboard", "--grpcServerPort=0"]
    with start_skiff(args, cwd=tmp_path) as up:
        m = up.wait_for_line(r"skiff broker listening on (?P<host>[\d.]+):(?P<port>\d+), store data ")

        async def use():
            wire = BrokerWire(f"{m['host']}:{m['port']}")
            try:
                for queue_id in range(4):
                    sent = await wire.send_batch("TryOut", [Message.of("TryOut", b"x" * 1024, keys="k")] * 8,
                                                 queue_id=queue_id)
                    assert sent.code == ResponseCode.SUCCESS
                assert len(await wire.pull_messages("G", "TryOut", 3)) == 8
            finally:
                await wire.close()
        run_coroutine(use())
    assert up.popen.returncode == 0
    store = tmp_path / "data"
    (commitlog,) = (store / "commitlog").iterdir()
    assert commitlog.stat().st_size == 64 << 20
    assert {f.stat().st_size for f in (store / "consumequeue" / "TryOut").rglob("0*") if f.is_file()} == {600_000}
    used = _disk_bytes(store)
    assert (64 << 20) <= used <= 200_000_000, f"a try-out store takes {used / 1e6:.0f} MB"
