"""`skiff up --ha` as docs/replication.md's walk-through uses it: separate broker processes
whose pids it prints, the dashboard on, a send, kill -9 of the master by its pid, the other
broker elected, sends resuming, the killed broker restarted as a slave, a small store, and
everything stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path

import pytest

from skiff.testing.etcd import etcd_binary
from skiff.testing.processes import run_skiff
from skiff.testing.up_ha import UpHa, alive
from skiff.testing.waits import wait_for

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

TOPIC = "Orders"
DISK_LIMIT = 300 << 20
"""Two try-out brokers (a 64 MiB CommitLog file each) and etcd (its 64 MB write-ahead log and
the next one preallocated); RocketMQ's sizes took 2.2 GB."""


def test_kill_the_master_by_its_printed_pid_and_sends_resume_on_the_other(tmp_path: Path) -> None:
    with UpHa(tmp_path, restart_delay_s=2) as up:
        ns = ["-n", up.namesrv_addr]
        assert sorted(up.brokers) == [1, 2]
        pids = {b.pid for b in up.brokers.values()}
        assert len(pids) == 2 and up.proc is not None and up.proc.pid not in pids and up.etcd_pid not in pids
        assert all(alive(pid) for pid in pids)
        first = up.master_id
        other = 2 if first == 1 else 1
        assert up.brokers[other].role == "slave" and up.brokers[other].epoch == up.brokers[first].epoch

        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(up.dashboard_url, timeout=10) as page:
            assert page.status == 200

        listed = _cluster(ns)
        assert sorted(b["addr"] for b in listed) == sorted(b.addr for b in up.brokers.values())
        assert run_skiff(["topic", "create", "-t", TOPIC, *ns]).returncode == 0
        sent = run_skiff(["send", "-t", TOPIC, "--count", "5", "before", *ns])
        assert sent.returncode == 0 and sent.stdout.count("SEND_OK") == 5, sent.stdout

        mark = up.mark()
        killed = up.brokers[first].pid
        os.kill(killed, signal.SIGKILL)
        up.wait_line(rf"id {first} \(pid {killed}\) was killed by SIGKILL; restarting it in 2 s", 10, mark)
        elected = up.wait_line(rf"id {other} \(pid {up.brokers[other].pid}\) is MASTER now, epoch (\d+)", 30, mark)
        assert int(elected[1]) > int(up.brokers[first].epoch)

        def resumed() -> bool:
            after = run_skiff(["send", "-t", TOPIC, "after", *ns])
            return after.returncode == 0 and "SEND_OK" in after.stdout
        wait_for(resumed, 30, "a send answered SEND_OK by the new master")

        restarted = up.wait_line(rf"id {first} restarted: pid (\d+)", 60, mark)
        assert int(restarted[1]) != killed and alive(int(restarted[1]))
        up.wait_line(rf"id {first} \(pid {restarted[1]}\) is a slave of id {other}, epoch {elected[1]}, in sync", 30,
                     mark)

        def both_in_the_new_epoch() -> list[dict] | None:
            brokers = _cluster(ns)
            roles = sorted((b["broker_id"], b["runtime"].get("brokerRole"), b["runtime"].get("controllerEpoch"))
                           for b in brokers)
            return brokers if roles == [(0, "SYNC_MASTER", elected[1]), (first, "SLAVE", elected[1])] else None
        wait_for(both_in_the_new_epoch, 30, "the new master as id 0 and the restarted broker as a slave")

        status = run_skiff(["topic", "status", "-t", TOPIC, "--json", *ns])
        assert status.returncode == 0, status.stdout
        stored = sum(q["max_offset"] for q in json.loads(status.stdout))
        read = run_skiff(["consume", "-t", TOPIC, "--from-beginning", "--count", str(stored), "--timeout-s", "20",
                          *ns])
        assert read.returncode == 0, read.stdout
        assert read.stdout.count(" before") == 5 and read.stdout.count(" after") == stored - 5 >= 1, read.stdout

        used = _disk_bytes(up.store)
        assert used < DISK_LIMIT, f"{used >> 20} MB in {up.store}"
        print(f"store {used >> 20} MB; failover to id {other}, epoch {elected[1]}")

        children = [*pids, int(restarted[1]), up.etcd_pid]
        assert up.stop() == 0
    assert not [pid for pid in children if alive(pid)]


def _cluster(ns: list[str]) -> list[dict]:
    listed = run_skiff(["cluster", "list", "--json", *ns])
    assert listed.returncode == 0, listed.stdout
    return json.loads(listed.stdout)


def _disk_bytes(root: Path) -> int:
    """Blocks allocated, as du counts them (CommitLog files are reserved whole)."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())
