"""`skiff bench grpc` runs end to end against a broker it starts: it produces over gRPC, then
receives and acknowledges what it produced, and reports CPU per message for both."""

from __future__ import annotations

import json

from skiff.testing.processes import run_skiff


def test_grpc_bench_produces_then_receives_everything():
    done = run_skiff(["bench", "grpc", "--seconds", "1", "--batch", "8", "--in-flight", "2", "--json"],
                     timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    assert figures["produced"] > 0 and figures["produced"] % 8 == 0
    assert 0 < figures["received"] <= figures["produced"]
    assert figures["produce_broker_cpu_us"] > 0 and figures["receive_broker_cpu_us"] > 0
