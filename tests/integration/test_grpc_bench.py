"""`skiff bench grpc` runs end to end against a broker it starts: it produces over gRPC, then
receives and acknowledges what it produced, and reports CPU per message for both; with each
`grpcServerEngine` (Skiff's own HTTP/2 door, the default, and grpcio's server, the fallback,
which no other test runs)."""

from __future__ import annotations

import json

import pytest

from skiff.testing.processes import run_skiff


@pytest.mark.parametrize("engine", ["skiff", "grpcio"])
def test_grpc_bench_produces_then_receives_everything(engine: str):
    done = run_skiff(["bench", "grpc", "--seconds", "1", "--batch", "8", "--in-flight", "2", "--json",
                      "--engine", engine], timeout_s=120)
    assert done.returncode == 0, done.stdout
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    assert figures["produced"] > 0 and figures["produced"] % 8 == 0
    assert 0 < figures["received"] <= figures["produced"]
    assert figures["produce_broker_cpu_us"] > 0 and figures["receive_broker_cpu_us"] > 0
