"""An idempotent producer's sequences survive a broker restart: after a clean stop (the
snapshot) and after a SIGKILL (the snapshot taken at start plus the batches read back
from the CommitLog), a retry of the producer's last batch is answered with its original
offset and not stored again, its next batch is accepted, and a gap is still refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiff.protocol.kafka.apis import ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import Record, encode_batch
from tests.integration.kafka_kit import kafka_cluster
from tests.integration.test_kafka_wire import Wire, end_offset, make_topic, produce_body

TOPIC = "idem-restart"


class Idempotent:
    """One producer id's batches on partition 0, over a fresh connection each time."""

    def __init__(self, bootstrap: str) -> None:
        wire = Wire(bootstrap)
        try:
            make_topic(wire, TOPIC)
            ids = wire.call(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout_ms": 60_000})
        finally:
            wire.close()
        assert ids["error_code"] == 0
        self.pid = ids["producer_id"]
        self.bootstrap = bootstrap

    def produce(self, base_sequence: int, *values: bytes) -> dict[str, Any]:
        records = [Record(i, 1_000 + i, None, v) for i, v in enumerate(values)]
        data = encode_batch(0, records, producer_id=self.pid, producer_epoch=0, base_sequence=base_sequence)
        wire = Wire(self.bootstrap)
        try:
            answer = wire.call(ApiKey.PRODUCE, 8, produce_body(TOPIC, data, acks=-1))
        finally:
            wire.close()
        part: dict[str, Any] = answer["responses"][0]["partition_responses"][0]
        return part

    def end(self) -> int:
        wire = Wire(self.bootstrap)
        try:
            return end_offset(wire, TOPIC)
        finally:
            wire.close()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_sequences_survive_a_restart(tmp_path: Path, how: str) -> None:
    with kafka_cluster(tmp_path, "--defaultTopicQueueNums=1") as (cluster, bootstrap):
        producer = Idempotent(bootstrap)
        assert producer.produce(0, b"a", b"b", b"c")["base_offset"] == 0
        assert producer.produce(3, b"d", b"e")["base_offset"] == 3
        if how == "stop":
            cluster.restart_broker(0)
        else:
            cluster.kill_broker(0)
            cluster.start_broker(0)
        retry = producer.produce(3, b"d", b"e")  # the last batch again: a retry across the restart
        assert (retry["error_code"], retry["base_offset"]) == (0, 3)
        assert producer.end() == 5, "the retried batch was stored again"
        older = producer.produce(0, b"a", b"b", b"c")  # an earlier batch still kept is a duplicate too
        assert (older["error_code"], older["base_offset"]) == (0, 0)
        gap = producer.produce(7, b"h")
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        following = producer.produce(5, b"f", b"g")
        assert (following["error_code"], following["base_offset"]) == (0, 5)
        assert producer.end() == 7
