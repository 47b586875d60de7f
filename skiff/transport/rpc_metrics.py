"""RpcLatency: RocketMQ 5's ``rocketmq_rpc_latency`` histogram (ms) by request and response
code, kept in plain lists so a request costs two clock reads and a bisect.

`wrap` puts every handler behind the timer; a handler that answers later (a held
pull, a SYNC_FLUSH send) is timed until it answers, as RocketMQ times it. Oneway
requests are timed with response code "-1" (nothing is sent back).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Awaitable, Iterator, Mapping

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from skiff.protocol.command import RemotingCommand
from skiff.transport.connection import Connection, Handler, HandlerResult
from skiff.transport.late import LateAnswer

BUCKETS_MS = (1.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 3000.0, 10_000.0)
"""Upper bounds of the buckets (ms), as RocketMQ's RemotingMetricsManager sets them, plus 10 s
for held pulls."""


class RpcLatency(Collector):
    def __init__(self, protocol_type: str = "remoting", const_labels: Mapping[str, str] | None = None) -> None:
        self.protocol_type = protocol_type
        self.const_labels = dict(const_labels or {})
        self._series: dict[tuple[int, int], list[float]] = {}
        """(request code, response code) → bucket counts, then the count, then the sum."""

    def observe(self, code: int, response_code: int, ms: float) -> None:
        series = self._series.get((code, response_code))
        if series is None:
            series = self._series[(code, response_code)] = [0.0] * (len(BUCKETS_MS) + 3)
        series[bisect.bisect_left(BUCKETS_MS, ms)] += 1
        series[-2] += 1
        series[-1] += ms

    def wrap(self, handlers: Mapping[int, Handler]) -> dict[int, Handler]:
        return {code: self._timed(handler) for code, handler in handlers.items()}

    def _timed(self, handler: Handler) -> Handler:
        """The handler, timed; the common case (answered at once) is inlined, as it runs per request."""
        clock, series_of, bounds, observe = time.perf_counter, self._series, BUCKETS_MS, self.observe
        command = RemotingCommand

        def timed(conn: Connection, cmd: RemotingCommand) -> HandlerResult:
            started = clock()
            result = handler(conn, cmd)
            if type(result) is command:
                ms = (clock() - started) * 1000.0
                series = series_of.get((cmd.code, result.code))
                if series is not None:
                    series[bisect.bisect_left(bounds, ms)] += 1
                    series[-2] += 1
                    series[-1] += ms
                else:
                    observe(cmd.code, result.code, ms)
                return result
            if result is None:
                observe(cmd.code, -1, (clock() - started) * 1000.0)
                return None
            if isinstance(result, LateAnswer):
                return self._timed_late(cmd.code, started, result)
            return self._later(cmd.code, started, result)  # type: ignore[arg-type]
        return timed

    def _timed_late(self, code: int, started: float,
                    answer: LateAnswer[RemotingCommand]) -> LateAnswer[RemotingCommand]:
        timed: LateAnswer[RemotingCommand] = LateAnswer()

        def observed(_: object, response: RemotingCommand) -> None:
            self.observe(code, response.code, (time.perf_counter() - started) * 1000.0)
            timed.give(response)
        answer.then(observed)
        return timed

    async def _later(self, code: int, started: float,
                     pending: Awaitable[RemotingCommand | None]) -> RemotingCommand | None:
        result = await pending
        self.observe(code, -1 if result is None else result.code, (time.perf_counter() - started) * 1000.0)
        return result

    def collect(self) -> Iterator[HistogramMetricFamily]:
        names = ["protocol_type", "request_code", "response_code", *self.const_labels]
        family = HistogramMetricFamily("rocketmq_rpc_latency", "Time from a request's arrival to its answer (ms).",
                                       labels=names, unit="")
        for (code, resp), series in sorted(self._series.items()):
            cumulative, buckets = 0.0, []
            for bound, count in zip((*BUCKETS_MS, float("inf")), series[:-2]):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            family.add_metric([self.protocol_type, str(code), str(resp), *self.const_labels.values()], buckets,
                              series[-1])
        yield family
