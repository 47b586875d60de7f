"""Idempotent producers' sequence state across broker restarts and failovers, as Kafka keeps
it: a snapshot file plus the batches stored after it.

``config/kafkaProducers.json`` holds every producer state (`ProducerStates.to_obj`) and
the CommitLog offset it covers::

    {"commitLogOffset": 1048576,
     "producers": [["Orders", 0, 117440512000, 0, [[0, 9, 0], [10, 19, 10]]]]}

The state is derived from the CommitLog alone: the last stored message of each idempotent
batch carries `PRODUCER_PROPERTY`, so any broker holding the log can read the state back
from it, and a slave's byte-for-byte copy holds the same batches at the same offsets.

- **A master** (``leading``) records each batch as Produce appends it, and writes the file
  every ``flushConsumerOffsetInterval`` while the state or the CommitLog moved, and when the
  listener stops. Both happen on the event loop, so every batch below the written offset is
  in the states.
- **A slave in controller mode** (`follow`) reads what it replicated since its last walk
  (the CommitLog from ``covered`` to its end, on a thread) into its own states every
  ``flushConsumerOffsetInterval`` and writes its own file; when elected, it walks the rest
  before it serves its first Produce. So the new master answers a producer's retry of a
  batch the old master stored (and replicated) with its original offset, and continues its
  sequence: neither a duplicate nor OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka takes as
  fatal for the batch at the head of its queue. Nothing is copied from the master: the
  metadata sync would bring a state up to ``slaveSyncInterval`` old, which is worse than
  none (a stale last sequence refuses the next batch; no state accepts it, KIP-360).
- **A truncation** (a demoted master or a diverged slave drops the tail its new master never
  had, `MessageStore.add_truncate_listener`) below what was read, or any truncation after
  leading, makes the next walk forget the states and read the whole CommitLog again: states
  of batches that are no longer stored would answer a retry as a duplicate of nothing.
- **At start** a broker loads the file, drops batches reaching past their queue's end (a
  tail the store lost), and walks the CommitLog from the covered offset to its end. Without
  a file (a new broker, or one from before the file) it walks the whole CommitLog once.

The walk searches each CommitLog file's range for the property's bytes (``mmap.find``) and
walks the records' sizes only up to each occurrence, decoding the record that holds it, so a
slave of RocketMQ-only traffic pays one byte scan of its new bytes per round.
"""

from __future__ import annotations

import logging
import mmap
import struct
import threading
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
_SIZE = struct.Struct(">i").unpack_from
"""A CommitLog record's (or end-of-file blank's) first field: its length."""


class ProducerSnapshots(WrittenWhenChanged):
    def __init__(self, states: ProducerStates, store: MessageStore, store_root: str) -> None:
        self.states = states
        self.store = store
        self.file = JsonFile.in_store(store_root, FILE_NAME)
        self.leading = False
        """Produce records every batch as it appends it (a master); else `follow` reads them."""
        self.covered = 0
        """Every batch stored below this CommitLog offset is in the states (a master's: as of
        its last snapshot)."""
        self._written = (-1, -1)
        """(state version, CommitLog offset) of the last snapshot taken."""
        self._cut: int | None = None
        """The lowest offset the store was truncated to since the last walk."""
        self._led = False
        """Led since the last walk: the states may hold batches past ``covered``."""
        self._cut_lock = threading.Lock()
        store.add_truncate_listener(self._truncated)

    def _truncated(self, offset: int) -> None:
        """On the truncating thread. A broker that led until now (its step-down not yet seen
        by `follow`) stops leading here too: elected again before the next round, it reads
        the CommitLog again before its first Produce rather than trust states of a cut tail."""
        with self._cut_lock:
            self._cut = offset if self._cut is None else min(self._cut, offset)
            if self.leading:
                self._led, self.leading = True, False

    def lead(self) -> None:
        """Produce records the batches from now on (after a `follow` to the CommitLog's end)."""
        self.leading = True

    def step_down(self) -> None:
        """A slave again: `follow` reads the replicated batches from the last snapshot on."""
        self.leading = False
        self._led = True

    def due(self) -> None:
        """Mark the state changed when a batch was recorded or the CommitLog grew since the
        last snapshot (a later restart then reads less of it back)."""
        if (self.states.version, self.store.max_physical_offset if self.leading else self.covered) != self._written:
            self.changed()

    def documents(self) -> Documents:
        if self.leading:
            self.covered = self.store.max_physical_offset
        self._written = (self.states.version, self.covered)
        doc = {"commitLogOffset": self.covered, "producers": self.states.to_obj()}
        return ((self.file, fastjson.dumps(doc)),)

    def recover(self) -> int:
        """Load the snapshot, record the batches stored after it, and write a new one; the
        number of batches read back. Run once, after the store's recovery, before Produce is
        served (on a thread: it reads the CommitLog's tail and fsyncs)."""
        doc = self.file.load()
        producers: list[list[object]] = []
        if doc is None:
            self.covered = self.store.commitlog.min_offset
        else:
            self.covered, producers = _parse(doc, self.file.path)
            self.states.load_obj(producers, self.store.get_max_offset)
        start = self.covered
        found = self.follow()
        self.changed()
        self.persist()
        log.info("Kafka producer state: %d producer/partition states from %s, %d batches read back from the "
                 "CommitLog after offset %d", len(producers), self.file.path, found, start)
        return found

    def follow(self) -> int:
        """Record the batches stored from ``covered`` to the CommitLog's end (on a thread; not
        while leading, when Produce records them); the number read."""
        with self._cut_lock:
            cut, self._cut = self._cut, None
        if cut is not None and (cut < self.covered or self._led):
            log.info("the CommitLog was truncated to %d: the Kafka producer state is read again from its start", cut)
            self.states.clear()
            self.covered = self.store.commitlog.min_offset
        self._led = False
        end = self.store.max_physical_offset
        try:
            found = self._read(self.covered, end)
        except DecodeError as exc:  # truncated while read: the listener has said where
            log.info("the CommitLog changed under the Kafka producer state's walk (%s): read again next round", exc)
            return 0
        self.covered = end
        return found

    def _read(self, start: int, end: int) -> int:
        commitlog = self.store.commitlog
        found = 0
        pos = max(start, commitlog.min_offset)
        while pos < end:
            f = commitlog.files.find(pos)
            if f is None:
                break
            stop = min(end, f.end)
            try:
                found += self._read_file(f.mm, f.start, pos, stop)
            except ValueError:  # the file was closed by retention meanwhile
                pass
            pos = stop
        return found

    def _read_file(self, mm: mmap.mmap, base: int, pos: int, stop: int) -> int:
        """The batches in [pos, stop) of one CommitLog file (mapped at ``base``; ``pos`` a
        record's start): the walk reads only the records' sizes up to the next occurrence of
        the property's bytes, and decodes the record holding it."""
        end = stop - base
        mark = mm.find(_MARK, pos - base, end)
        found = 0
        rel = pos - base
        while mark >= 0 and rel < end:
            total = _SIZE(mm, rel)[0]
            if total <= 0 or rel + total > len(mm):
                raise DecodeError(f"no CommitLog record starts at {base + rel} (length {total})")
            if rel + total > mark:  # the record holding the mark
                found += self._replay(mm[rel:rel + total])
                mark = mm.find(_MARK, rel + total, end)
            rel += total
        return found

    def _replay(self, raw: bytes) -> int:
        """Record the batch whose last message ``raw`` is (1), or nothing (0)."""
        if _MARK not in raw:
            return 0
        try:
            msg = decode_record(raw)
        except DecodeError:
            return 0
        parsed = parse_batch_property(msg.properties.get(PRODUCER_PROPERTY, ""))
        if parsed is None:
            return 0
        pid, epoch, first, last = parsed  # on the batch's last message
        base = msg.queue_offset - batch_count(first, last) + 1
        self.states.record(msg.topic, msg.queue_id, pid, epoch, first, last, base)
        return 1


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
