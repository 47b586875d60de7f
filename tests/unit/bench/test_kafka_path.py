"""`python -m skiff.bench.kafka_path` runs its workload end to end (its own check: every
Produce answered in order with error 0) and reports a CPU figure per request."""

from __future__ import annotations

import asyncio

import pytest

from skiff.bench.kafka_path import parse_args, run


@pytest.mark.parametrize("extra", [[], ["--idempotent", "--per-read", "7", "--version", "3"],
                                   ["--sync-flush", "--per-read", "1", "--version", "8"]],
                         ids=["plain", "idempotent-v3", "sync-flush-v8"])
def test_the_workload_is_answered_in_order(extra: list[str]) -> None:
    figures = asyncio.run(run(parse_args(["--requests", "300", "--warmup", "50", *extra])))
    assert figures["requests"] == 300 and figures["cpu_us_per_request"] > 0
    assert figures["writes"] <= 300  # the answers of a read leave in one write


def test_the_fetch_workload_serves_every_message_once() -> None:
    # 1,050 messages per partition: two fetches each, the second short (PULL_MAX_MESSAGES is 1,024)
    figures = asyncio.run(run(parse_args(["--fetch", "--requests", "8395", "--size", "30"])))
    assert figures["messages"] == 8400 and figures["fetches"] == 16 and figures["cpu_us_per_message"] > 0
