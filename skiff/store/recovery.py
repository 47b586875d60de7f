"""Recovery at start: find the valid end of the CommitLog and make the derived files agree.

One procedure serves a clean start and a crash alike:

1. Load the files. The checkpoint names the offset below which ConsumeQueue and
   index entries were fsynced (the start of the CommitLog if it is missing).
2. From there, validate records (magic, size, structure, stored offset, body
   CRC) up to the zeros that follow the last write. The first invalid record
   ends the valid data: it and everything after it are zeroed, later files
   deleted.
3. ConsumeQueue and index entries that point past the valid end are removed
   (and counted: the report's "trimmed"); so are those from the checkpoint on,
   which are untrusted after a crash.
4. The dispatcher rebuilds the entries of the records from the checkpoint to
   the valid end, the same code the append path runs.

After a clean shutdown the checkpoint is the end, so steps 2–4 have nothing to do.
Recovery reads only from the checkpoint on, cuts the tail with ``pread`` (never
through the mapping), and drops its mappings of what it read, so a restart does
not fault the CommitLog files into the broker's memory.
"""

from __future__ import annotations

import logging
import os
import time

from skiff.common.clock import Clock
from skiff.common.files import fsync_dir
from skiff.store.checkpoint import (
    Checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from skiff.store.commitlog import CommitLog
from skiff.store.consume_queue import ConsumeQueueTable
from skiff.store.dispatcher import Dispatcher, batches_between
from skiff.store.index_service import IndexService
from skiff.store.results import RecoveryReport

log = logging.getLogger(__name__)

ABORT = "abort"
CHECKPOINT = "checkpoint"


def recover(
    root: str,
    commitlog: CommitLog,
    queues: ConsumeQueueTable,
    index: IndexService | None,
    dispatcher: Dispatcher,
    clock: Clock,
) -> RecoveryReport:
    began = time.monotonic()
    clean = not os.path.exists(os.path.join(root, ABORT))
    checkpoint = read_checkpoint(os.path.join(root, CHECKPOINT))
    notes = commitlog.load() + queues.load() + (index.load() if index is not None else [])
    start = _scan_start(commitlog, queues, checkpoint, notes)
    end, reason = commitlog.scan_valid(start)
    dirty, files_removed = commitlog.truncate(end)
    cq_trimmed = queues.truncate_phys(end)
    idx_trimmed = index.truncate_phys(end) if index is not None else 0
    queues.truncate_phys(start)
    if index is not None:
        index.truncate_phys(start)
    redispatched = 0
    for batch in batches_between(commitlog, start, end):
        dispatcher.dispatch(batch)
        redispatched += len(batch.sizes)
    commitlog.release(start, end)
    for cq in queues.all():
        cq.correct_min(commitlog.min_offset)
    make_durable(root, commitlog, queues, index, end, clock)
    open(os.path.join(root, ABORT), "wb").close()
    fsync_dir(root)
    return RecoveryReport(
        clean_shutdown=clean,
        checkpoint_offset=start,
        max_physical_offset=end,
        truncated_from=end if reason or dirty else None,
        truncated_reason=reason,
        truncated_bytes=dirty,
        commitlog_files_removed=files_removed,
        records_redispatched=redispatched,
        consume_queue_entries_trimmed=cq_trimmed,
        index_entries_trimmed=idx_trimmed,
        notes=tuple(notes),
        elapsed_ms=(time.monotonic() - began) * 1000,
    )


def _scan_start(
    commitlog: CommitLog, queues: ConsumeQueueTable, checkpoint: Checkpoint | None, notes: list[str]
) -> int:
    """Where checking and re-dispatching begins: the checkpoint, or earlier when the
    ConsumeQueues end before it (deleted queue files are rebuilt that way)."""
    lo, hi = commitlog.min_offset, commitlog.files_end
    queues_end = queues.max_phys_end()
    start = lo if checkpoint is None else checkpoint.dispatched_offset
    if checkpoint is None and hi > lo:
        notes.append("no valid checkpoint: every CommitLog record is checked")
    if start > hi:
        notes.append(f"checkpoint offset {start} is past the CommitLog files (end {hi})")
    if queues_end is not None and queues_end < start:
        notes.append(f"ConsumeQueues end at {queues_end}, before the checkpoint: rebuilding from there")
        start = queues_end
    elif queues_end is None and start > lo:
        notes.append("no ConsumeQueue entries: rebuilding them from the whole CommitLog")
        start = lo
    extended = commitlog.files.extended_start
    if extended is not None and extended < start:
        notes.append(f"the last CommitLog file was short: checking it from {extended}")
        start = extended
    return min(max(start, lo), hi)


def make_durable(
    root: str,
    commitlog: CommitLog,
    queues: ConsumeQueueTable,
    index: IndexService | None,
    dispatched: int,
    clock: Clock,
    *,
    flush_commitlog: bool = True,
    least_pages: int = 0,
) -> bool:
    """fsync the derived files (and the CommitLog), then checkpoint ``dispatched``.

    The CommitLog is fsynced at least through ``dispatched`` (a record boundary): the
    flushed offset alone can fall inside a record (ASYNC_FLUSH leaves a partly written
    page for later), and recovery must start at a record.

    ``dispatched`` must not exceed what was dispatched before this call began.
    ConsumeQueues with fewer than ``least_pages`` pages of new entries are left for a
    later call, and the checkpoint stays below their first new entry.
    Return False when the checkpoint could not be written (a full disk): that only
    makes the next recovery check more records."""
    flushed = commitlog.flush() if flush_commitlog else commitlog.flush_through(dispatched)
    left = queues.flush(least_pages)
    if index is not None:
        index.flush()
    safe = min(dispatched, flushed) if left is None else min(dispatched, flushed, left)
    try:
        write_checkpoint(os.path.join(root, CHECKPOINT), Checkpoint(flushed, safe, clock.now_ms()))
    except OSError as exc:
        log.warning("cannot write the checkpoint: %s", exc)
        return False
    return True
