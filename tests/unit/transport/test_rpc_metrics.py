"""RpcLatency: bucket counts, sums, and timing of handlers that answer now, later (a coroutine
or a `LateAnswer`), or never (oneway)."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from skiff.protocol.command import RemotingCommand
from skiff.transport.late import LateAnswer
from skiff.transport.rpc_metrics import RpcLatency


def samples(latency: RpcLatency) -> dict[tuple[str, str, str, str], float]:
    registry = CollectorRegistry()
    registry.register(latency)
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, s.labels["request_code"], s.labels["response_code"], s.labels.get("le", ""))] = s.value
    return out


def test_buckets_are_cumulative_and_sum_is_kept() -> None:
    latency = RpcLatency()
    for ms in (0.5, 2.0, 2.5, 40.0, 20_000.0):
        latency.observe(10, 0, ms)
    got = samples(latency)
    assert got[("rocketmq_rpc_latency_bucket", "10", "0", "1.0")] == 1
    assert got[("rocketmq_rpc_latency_bucket", "10", "0", "3.0")] == 3
    assert got[("rocketmq_rpc_latency_bucket", "10", "0", "50.0")] == 4
    assert got[("rocketmq_rpc_latency_bucket", "10", "0", "10000.0")] == 4
    assert got[("rocketmq_rpc_latency_bucket", "10", "0", "+Inf")] == 5
    assert got[("rocketmq_rpc_latency_count", "10", "0", "")] == 5
    assert got[("rocketmq_rpc_latency_sum", "10", "0", "")] == 20_045.0


def test_wrapped_handlers_are_timed_with_their_response_codes() -> None:
    latency = RpcLatency()

    async def later(_conn, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0.01)
        return cmd.response(1, "late")

    owed = LateAnswer()
    handlers = latency.wrap({10: lambda _c, cmd: cmd.response(0), 11: later, 15: lambda _c, _cmd: None,
                             12: lambda _c, _cmd: owed})
    req = RemotingCommand.request(10)
    assert handlers[10](None, req).code == 0  # type: ignore[arg-type, union-attr]
    assert asyncio.run(handlers[11](None, RemotingCommand.request(11))).code == 1  # type: ignore[arg-type]
    assert handlers[15](None, RemotingCommand.request(15, oneway=True)) is None  # type: ignore[arg-type]
    timed = handlers[12](None, RemotingCommand.request(12))  # type: ignore[arg-type]
    assert isinstance(timed, LateAnswer) and not timed.given
    given: list[RemotingCommand] = []
    timed.then(lambda _req, answer: given.append(answer))
    owed.give(RemotingCommand.request(12).response(2, "replicated"))
    assert [a.code for a in given] == [2]
    got = samples(latency)
    assert got[("rocketmq_rpc_latency_count", "10", "0", "")] == 1
    assert got[("rocketmq_rpc_latency_count", "11", "1", "")] == 1
    assert got[("rocketmq_rpc_latency_sum", "11", "1", "")] >= 10.0
    assert got[("rocketmq_rpc_latency_count", "15", "-1", "")] == 1
    assert got[("rocketmq_rpc_latency_count", "12", "2", "")] == 1
