"""The short profile of `skiff chaos` (docs/reliability.md): the cluster of the long runs (three
etcd members and three SYNC_MASTER brokers in controller mode, each in its own network
namespace on a bridge), our keyed producers and an orderly and a concurrent consumer group,
and one fault of each kind (kill -9 of the master, SIGSTOP of the master, the master
partitioned from every other node, a slave's disk full, etcd's leader killed), each
recovered before the next. The checkers read the history: any SEND_OK message lost, any
key's order broken, any value delivered that was never sent fails the test; so does a fault
after which writes never came back. A 2 s lease keeps it short, and makes the paused and
the partitioned master lose their lease: the case where a consumer used to skip a SEND_OK
message (docs/reliability.md)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from skiff.testing.chaos.foreign import INTERPRETERS, ForeignClientMissing, interpreter
from skiff.testing.chaos.history import read_history
from skiff.testing.chaos.run import ChaosOptions, run_chaos
from skiff.testing.netns import netns_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd is not installed (make etcd)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and tmpfs mounts need root")]

FAULTS = ["kill-master", "pause-master", "partition-master", "disk-full-slave", "kill-etcd-leader"]


def test_one_fault_of_each_kind_loses_and_reorders_nothing_under_sync_master(tmp_path: Path) -> None:
    reason = netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    opts = ChaosOptions(tmp_path, duration_s=len(FAULTS) * 4.0 - 1, fault_interval_s=4.0, fault_hold_s=2.0,
                        faults=FAULTS, keys=4, rate=40.0, lease_ms=2000, drain_s=40.0, warm_up_s=1.0)
    results = asyncio.run(run_chaos(opts, log=lambda line: None))
    text = (tmp_path / "results.txt").read_text()
    print(text)
    assert results["ok"] and results["lost"] == 0 and results["order_violations"] == 0, text
    assert sorted(r["name"] for r in results["rto"]) == sorted(FAULTS), text
    assert all(r["end_ms"] is not None and r["rto_ms"] is not None for r in results["rto"]), text
    for queue in results["queue"]:
        assert queue["success"] >= 200 and queue["unexpected"] == 0, text
        assert queue["dequeued"] >= queue["success"], text
    assert {q["group"] for q in results["queue"]} == {"orderly", "concurrent"}
    events = read_history(tmp_path / "history")
    assert sum(e.is_fault for e in events) == 2 * len(FAULTS)
    assert (tmp_path / "plot.png").stat().st_size > 10_000 and (tmp_path / "logs" / "broker-1.log").exists()


@pytest.mark.interop
def test_rocketmq_cpp_and_5x_clients_send_through_a_master_kill_losing_and_reordering_nothing(tmp_path: Path) -> None:
    """``--clients python,cpp,rmq5``: the C++ client (remoting, through the NameServer) and the
    5.x client (gRPC, the brokers' endpoints) send keyed values beside ours through one kill -9
    of the master; their SEND_OK values are read by our groups like ours, nothing lost, each
    key's order kept, every history line of theirs well formed."""
    reason = netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    try:
        for client in INTERPRETERS:
            interpreter(client)
    except ForeignClientMissing as exc:
        pytest.skip(str(exc))
    opts = ChaosOptions(tmp_path, duration_s=3.0, fault_interval_s=4.0, fault_hold_s=2.0, faults=["kill-master"],
                        keys=2, rate=10.0, lease_ms=2000, drain_s=40.0, warm_up_s=1.0,
                        clients=["python", "cpp", "rmq5"])
    results = asyncio.run(run_chaos(opts, log=lambda line: None))
    text = (tmp_path / "results.txt").read_text()
    print(text)
    assert results["ok"] and results["lost"] == 0 and results["order_violations"] == 0, text
    clients = results["by_client"]
    assert set(clients) == {"python", "cpp", "rmq5"}, text
    for kind, c in clients.items():
        assert c["success"] >= 10 and c["lost"] == 0 and c["order_violations"] == 0, (kind, text)
    assert not any("not history lines" in n for n in results["notes"]), text
    events = read_history(tmp_path / "history")
    for prefix in ("c", "g"):  # our groups delivered the foreign clients' values
        delivered = {e.value for e in events if e.op == "dequeue" and e.client == "orderly"}
        assert any(v.startswith(prefix) for v in delivered), (prefix, text)
    assert sorted(r["name"] for r in results["rto"]) == ["kill-master"], text
