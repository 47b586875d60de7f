"""`skiff bench broker --quick` runs end to end against a broker it starts, and reports figures
that add up (every message produced is consumed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from skiff.bench.replication import pin_cpus
from skiff.testing.processes import run_skiff


def test_quick_broker_bench_reports_every_phase():
    done = run_skiff(["bench", "broker", "--quick", "--json"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    produced = figures["produce_batched"]["messages"] + figures["produce_single"]["messages"]
    assert figures["consume"]["messages"] == produced > 0
    for phase in ("produce_batched", "produce_single", "consume"):
        assert figures[phase]["messages_per_s"] > 0 and figures[phase]["broker_cpu_us_per_message"] > 0
    for phase in ("latency_batched", "latency_single"):
        lat = figures[phase]
        assert lat["requests"] > 0 and 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]


def test_quick_broker_bench_with_acl_and_metrics_signs_every_request():
    """With --acl every request is signed and checked (an unsigned one would fail the run with
    NO_PERMISSION); with --metrics one scrape is timed."""
    done = run_skiff(["bench", "broker", "--quick", "--json", "--acl", "--metrics",
                      "--phases", "produce_batched,consume"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    assert figures["acl"] is True and figures["metrics"] is True
    assert figures["consume"]["messages"] == figures["produce_batched"]["messages"] > 0
    assert figures["scrape"]["bytes"] > 0 and figures["scrape"]["ms"] > 0


def test_acl_micro_bench_reports_each_request_kind():
    done = run_skiff(["bench", "acl", "--json", "--calls", "50", "--repeat", "1"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    assert set(figures) == {"send_single_1k", "send_batch_64x1k", "pull"}
    assert all(f["check_us"] > 0 and f["sign_us"] > 0 for f in figures.values())
    assert figures["send_batch_64x1k"]["body_bytes"] > 64 * 1024


def test_metrics_micro_bench_reports_the_added_work():
    done = run_skiff(["bench", "metrics", "--json", "--calls", "2000", "--repeat", "1"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    assert set(figures) == {"latency_histogram_us", "send_counters_us", "pull_counters_us"}
    assert figures["send_counters_us"] > 0 and figures["pull_counters_us"] > 0


def test_replication_bench_offers_a_fixed_rate_to_sync_master_with_a_slave():
    done = run_skiff(["bench", "replication", "--seconds", "1", "--sizes", "100", "--modes", "sync",
                      "--producers", "2", "--rate", "500", "--json"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    (row,) = json.loads(done.stdout[done.stdout.index("["):])
    assert row["mode"] == "sync" and row["offered_per_s"] == 500 and row["messages"] + row["not_ok"] == 500
    assert row["master_cpu_us_per_message"] > 0 and row["slave_cpu_us_per_message"] > 0
    assert 0 < row["p50_ms"] <= row["p99_ms"]


def test_replication_bench_measures_the_slave_path_in_process():
    done = run_skiff(["bench", "replication", "--slave-path", "640", "--sizes", "100,1024", "--json"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    rows = json.loads(done.stdout[done.stdout.index("["):])
    assert [(r["body_bytes"], r["messages"]) for r in rows] == [(100, 640), (1024, 640)]
    assert all(r["slave_cpu_us_per_message"] > 0 for r in rows)


def test_replication_bench_measures_the_tls_layer_in_process():
    """--tls-layer: frames through the brokers' TLS contexts and back (the bench checks every byte arrived)."""
    done = run_skiff(["bench", "replication", "--tls-layer", "300", "--sizes", "100,32768", "--json"], timeout_s=120)
    assert done.returncode == 0, done.stdout
    rows = json.loads(done.stdout[done.stdout.index("["):])
    assert [(r["mode"], r["body_bytes"], r["frames"]) for r in rows] == [("tls-layer", 100, 300),
                                                                          ("tls-layer", 32768, 300)]
    assert all(r["cpu_us_per_frame"] > 0 for r in rows)


def test_replication_bench_pin_puts_the_master_on_a_cpu_of_its_own():
    """--pin: every thread of the master on the first CPU, every thread of the others on the rest."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    code = ("import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); "
            "print(1, flush=True); time.sleep(60)")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == b"1\n"  # its second thread is running
        pin_cpus(procs[0].pid, [procs[1].pid])
        for p, want in zip(procs, ({cpus[0]}, set(cpus[1:]))):
            tids = os.listdir(f"/proc/{p.pid}/task")
            assert len(tids) == 2 and all(os.sched_getaffinity(int(t)) == want for t in tids)
    finally:
        for p in procs:
            p.kill()
            p.wait()
