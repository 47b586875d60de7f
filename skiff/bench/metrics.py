"""Micro-benchmark of what metrics add to each request: ``skiff bench metrics``.

The end-to-end cost (`skiff bench broker --metrics` against `skiff bench broker`) is
smaller than the run-to-run spread on a busy machine, so this times the added work
alone: the latency histogram's wrapper around a handler that answers at once (two
clock reads, a bisect, three adds), and the per-request traffic counters a send and a
pull bump (`BrokerStats.stored`, `BrokerStats.pulled`). Figures are µs per request,
best of ``--repeat`` rounds, with the bare handler call subtracted.
"""

from __future__ import annotations

from collections.abc import Sequence

from skiff.bench._micro import best_us, micro_main
from skiff.broker.config import BrokerConfig
from skiff.broker.ha.role import Role
from skiff.broker.stats import BrokerStats
from skiff.common.clock import SYSTEM_CLOCK
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.transport.rpc_metrics import RpcLatency


def measure(calls: int, repeat: int) -> dict[str, float]:
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "BenchTopic"})
    answer = req.response(0)

    def bare(_conn: object, _cmd: RemotingCommand) -> RemotingCommand:
        return answer
    timed = RpcLatency().wrap({req.code: bare})[req.code]
    config = BrokerConfig()
    stats = BrokerStats(config, None, SYSTEM_CLOCK, Role.of(config))  # type: ignore[arg-type]  # counters only
    base = best_us(lambda: bare(None, req), calls, repeat)
    wrapped = best_us(lambda: timed(None, req), calls, repeat)  # type: ignore[arg-type]
    stored = best_us(lambda: stats.stored("BenchTopic", 64, 70_000), calls, repeat)
    pulled = best_us(lambda: stats.pulled(32, "BenchTopic", "BenchGroup", 3, 36_000, 1_000), calls, repeat)
    return {"latency_histogram_us": round(wrapped - base, 3), "send_counters_us": round(stored, 3),
            "pull_counters_us": round(pulled, 3)}


def main(argv: Sequence[str] | None = None) -> int:
    return micro_main(argv, "skiff bench metrics", __doc__, 100_000, measure,
                      lambda name, us: f"{name:22} {us:6.3f} us per request")


if __name__ == "__main__":
    raise SystemExit(main())
