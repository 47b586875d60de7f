"""`skiff bench producer` against a real cluster: the count it reports is the count stored."""

from __future__ import annotations

import json
import subprocess

from skiff.client import Admin
from skiff.testing.cluster import Cluster
from skiff.testing.processes import skiff_command


def test_bench_producer_reports_what_it_stored(tmp_path):
    with Cluster(tmp_path) as cluster:
        done = subprocess.run(
            skiff_command(["bench", "producer", "-n", cluster.namesrv_addr, "--seconds", "1", "--batch", "16",
                           "--in-flight", "2", "--size", "100", "--topic", "B-bench", "--json"]),
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        figures = json.loads(done.stdout.splitlines()[-1])
        assert figures["messages"] > 0 and figures["send_failed"] == figures["response_failed"] == 0
        assert figures["messages"] % 16 == 0 and figures["p50_rt_ms"] <= figures["p99_rt_ms"] <= figures["max_rt_ms"]
        assert figures["client_cpu_us_per_msg"] > 0 and figures["broker_cpu_us_per_msg"] is None
        with Admin(cluster.namesrv_addr, instance_name="it-bench") as admin:
            stored = sum(q.max_offset for q in admin.topic_status("B-bench"))
        assert stored == figures["messages"] + 16  # plus the warm-up batch
