"""Idempotent producers' sequence state across broker restarts, as Kafka keeps it: a
snapshot file plus the batches stored after it.

``config/kafkaProducers.json`` holds every producer state (`ProducerStates.to_obj`) and
the CommitLog offset it covers::

    {"commitLogOffset": 1048576,
     "producers": [["Orders", 0, 117440512000, 0, [[0, 9, 0], [10, 19, 10]]]]}

It is written every ``flushConsumerOffsetInterval`` while the state or the CommitLog
moved, and when the listener stops. Both are read on the event loop, where Produce
appends and records its batches in one step, so every batch below the offset is in the
states. A restarted broker loads the file, drops batches reaching past their queue's end
(a tail the store lost), and reads the CommitLog from the covered offset to its end: each
message carrying `PRODUCER_PROPERTY` (an idempotent batch's last, so a batch a torn tail
cut is not taken as stored) records its batch again. So
after a SIGKILL a retry of the last batch is still answered as a duplicate, and the next
batch still follows. Without a file (a new broker) nothing is read back.
"""

from __future__ import annotations

import logging
from typing import Any

from skiff.broker.kafka.idempotence import PRODUCER_PROPERTY, ProducerStates, batch_count, parse_batch_property
from skiff.broker.persist import Documents, JsonFile, WrittenWhenChanged
from skiff.common.errors import CorruptionError, DecodeError
from skiff.common.stored_message import decode_record
from skiff.protocol import fastjson
from skiff.store import MessageStore

log = logging.getLogger(__name__)

FILE_NAME = "kafkaProducers.json"
_MARK = PRODUCER_PROPERTY.encode() + b"\x01"


class ProducerSnapshots(WrittenWhenChanged):
    def __init__(self, states: ProducerStates, store: MessageStore, store_root: str) -> None:
        self.states = states
        self.store = store
        self.file = JsonFile.in_store(store_root, FILE_NAME)
        self._written = (-1, -1)
        """(state version, CommitLog offset) of the last snapshot taken."""

    def due(self) -> None:
        """Mark the state changed when a batch was recorded or the CommitLog grew since the
        last snapshot (a later restart then reads less of it back)."""
        if (self.states.version, self.store.max_physical_offset) != self._written:
            self.changed()

    def documents(self) -> Documents:
        self._written = (self.states.version, self.store.max_physical_offset)
        doc = {"commitLogOffset": self._written[1], "producers": self.states.to_obj()}
        return ((self.file, fastjson.dumps(doc)),)

    def recover(self) -> int:
        """Load the snapshot, record the batches stored after it, and write a new one; the
        number of batches read back. Run once, after the store's recovery, before Produce is
        served (on a thread: it reads the CommitLog's tail and fsyncs)."""
        doc = self.file.load()
        if doc is None:
            self.changed()  # the first snapshot marks where a later restart starts reading
            self.persist()
            return 0
        start, producers = _parse(doc, self.file.path)
        self.states.load_obj(producers, self.store.get_max_offset)
        found = 0
        commitlog = self.store.commitlog
        for _, view in commitlog.iter_records(max(start, commitlog.min_offset), self.store.max_physical_offset):
            raw = bytes(view)
            if _MARK not in raw:
                continue
            try:
                msg = decode_record(raw)
            except DecodeError:
                continue
            parsed = parse_batch_property(msg.properties.get(PRODUCER_PROPERTY, ""))
            if parsed is not None:
                pid, epoch, first, last = parsed  # on the batch's last message
                base = msg.queue_offset - batch_count(first, last) + 1
                self.states.record(msg.topic, msg.queue_id, pid, epoch, first, last, base)
                found += 1
        self.changed()
        self.persist()
        log.info("Kafka producer state: %d producer/partition states from %s, %d batches read back from the "
                 "CommitLog after offset %d", len(producers), self.file.path, found, start)
        return found


def _parse(doc: Any, path: str) -> tuple[int, list[list[object]]]:
    start = doc.get("commitLogOffset") if isinstance(doc, dict) else None
    producers = doc.get("producers") if isinstance(doc, dict) else None
    ok = isinstance(start, int) and isinstance(producers, list) and all(
        isinstance(p, list) and len(p) == 5 and isinstance(p[0], str) and all(isinstance(x, int) for x in p[1:4])
        and isinstance(p[4], list) and all(isinstance(b, list) and len(b) == 3 and all(isinstance(x, int) for x in b)
                                           for b in p[4])
        for p in producers)
    if not ok:
        raise CorruptionError(f"{path} is not a Kafka producer snapshot ({{\"commitLogOffset\": n, \"producers\": "
                              f"[...]}}); fix or remove it (idempotent producers are then taken as new)")
    assert isinstance(start, int) and isinstance(producers, list)
    return start, producers
