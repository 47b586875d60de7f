"""Fetch: each partition's queue read from the fetch offset through `PullOperation.read`,
the stored messages served as one record batch v2, with Kafka's long polling.

Long polling: a Fetch that finds fewer than ``min_bytes`` is held until the store
dispatches a message to one of its partitions, or ``max_wait_ms`` passes (librdkafka
fetches again at once after an empty answer, so an answer without waiting is a busy loop).
The waiters (`skiff.broker.queue_waiters`) are woken by the store's dispatch listener
(`QueueWaiters.notify`, on any thread) and by the tier when what one of them waits for is
fetched (`QueueWaiters.wake`), and read their partitions again.

What an answer holds (what the three clients need, docs/kafka.md): records are never
null (an empty set instead); the first partition that has messages gets at least one
whole record even past the byte limits (KIP-74), a later partition that does not fit gets
none, never part of a batch. Offsets a compaction removed are gaps inside a batch (its
records' offset deltas); a read that finds only removed entries answers an empty batch
spanning them, so the client moves past them instead of asking again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from skiff.broker.kafka.errors import refusal_error
from skiff.broker.kafka.mapping import raw_record
from skiff.broker.ha.role import Role
from skiff.broker.operations import Gate, PullOperation, PullRequest, Refusal, compile_subscription
from skiff.broker.queue_waiters import QueueWaiters
from skiff.common.errors import DecodeError
from skiff.common.limits import PULL_MAX_MESSAGES
from skiff.filter import MessageFilter
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import encode_batch
from skiff.protocol.kafka.stored_batch import stored_batch

READER_GROUP = "KAFKA_FETCH"
"""The group a Kafka Fetch reads as in the broker's statistics (a Fetch names none)."""
Key = tuple[str, int]


class Fetch:
    def __init__(self, gate: Gate, role: Role, pull: PullOperation, waiters: QueueWaiters) -> None:
        self.gate = gate
        self.role = role
        self.pull = pull
        self.store = pull.store
        self.waiters = waiters
        flt = compile_subscription("*", "TAG", False)
        assert isinstance(flt, MessageFilter)
        self._all = flt
        self._buffer = bytearray()
        """`_pulled`'s buffer."""

    def _pulled(self, buffers: Sequence[bytes | memoryview]) -> bytes | memoryview:
        """The pulled records in one piece: the store's one view as it is (most pulls: a run of
        records within one CommitLog file), else copied into a buffer kept between reads (it only
        grows, up to what a pull reads): a MiB-sized buffer allocated per partition answer is
        mapped afresh by malloc on many reads, and the kernel zeroes its pages on first touch
        (docs/performance.md, "Kafka: batched produce rows from the kernel"). Valid until the next
        call; `stored_batch` keeps nothing of it."""
        if len(buffers) == 1:
            return buffers[0]
        size = sum(map(len, buffers))
        if len(self._buffer) < size:
            self._buffer = bytearray(size)
        view = memoryview(self._buffer)
        at = 0
        for b in buffers:
            view[at:at + len(b)] = b
            at += len(b)
        return view[:size]

    async def fetch(self, req: dict[str, Any], queues: dict[Key, int | ErrorCode]) -> dict[str, Any]:
        """``queues``: each (topic, partition)'s queue here, or why this broker does not serve it."""
        keys = [(t, q) for (t, _), q in queues.items() if isinstance(q, int)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, req["max_wait_ms"]) / 1000.0
        event = asyncio.Event()
        self.waiters.register(keys, event)
        try:
            while True:
                event.clear()
                responses, size, failed = self._read(req, queues)
                left = deadline - loop.time()
                if size >= max(1, req["min_bytes"]) or failed or left <= 0 or not keys:
                    break
                try:
                    await asyncio.wait_for(event.wait(), left)
                except asyncio.TimeoutError:
                    pass
        finally:
            self.waiters.unregister(keys, event)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}

    def _read(self, req: dict[str, Any], queues: dict[Key, int | ErrorCode]) -> tuple[list[dict[str, Any]], int, bool]:
        budget = req.get("max_bytes", 0) or 0x7FFFFFFF
        total = 0
        failed = False
        out = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                answer, size = self._partition(t["topic"], p["partition"], queues[(t["topic"], p["partition"])],
                                               p["fetch_offset"],
                                               min(p["partition_max_bytes"], budget - total), first=total == 0)
                failed = failed or answer["error_code"] != 0
                total += size
                parts.append(answer)
            out.append({"topic": t["topic"], "partitions": parts})
        return out, total, failed

    def _partition(self, topic: str, partition: int, queue: int | ErrorCode, offset: int, max_bytes: int,
                   first: bool) -> tuple[dict[str, Any], int]:
        answer: dict[str, Any] = {"partition_index": partition, "error_code": 0, "high_watermark": -1,
                                  "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                                  "preferred_read_replica": -1, "records": b""}
        if self.role.is_slave:
            queue = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if isinstance(queue, ErrorCode):
            answer["error_code"] = int(queue)
            return answer, 0
        tc = self.gate.readable_queue(topic, queue)
        if isinstance(tc, Refusal):
            answer["error_code"] = int(refusal_error(tc))
            return answer, 0
        lo, hi = self.pull.first_offset(topic, queue), self.store.get_max_offset(topic, queue)  # lo: maybe tiered
        answer.update(high_watermark=hi, last_stable_offset=hi, log_start_offset=lo)
        if offset < lo or offset > hi:
            answer["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
            return answer, 0
        if offset == hi or (max_bytes <= 0 and not first):
            return answer, 0
        pulled = self.pull.read(PullRequest(READER_GROUP, topic, queue, offset, PULL_MAX_MESSAGES), self._all)
        result = pulled.result
        if not result.found:
            if offset < result.next_begin_offset <= hi:  # only removed entries: step over them
                answer["records"] = encode_batch(offset, [], last_offset_delta=result.next_begin_offset - offset - 1)
            return answer, 0
        try:
            _, batch = stored_batch(self._pulled(result.buffers), max_bytes, first, raw_record)
        except DecodeError:
            answer["error_code"] = int(ErrorCode.CORRUPT_MESSAGE)
            return answer, 0
        answer["records"] = batch  # b"": a later partition gets nothing rather than part of a batch
        return answer, len(batch)

