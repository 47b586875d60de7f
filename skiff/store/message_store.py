"""The message store: the CommitLog, its ConsumeQueues and index, and the threads that
flush, warm, checkpoint and clean them.

Threading: appends (`put_message`, `put_messages`, `append_replicated`) take one
lock and do one write and one dispatch call per batch; they may come from any
thread (the broker's event loop, benchmark threads). Reads take no lock. fsyncs
run on the flush threads; a SYNC_FLUSH append returns at once with a future in
`PutResult.flushed` that the broker awaits with ``asyncio.wrap_future``. The
CommitLog is written with ``pwrite`` (the GIL released while the kernel finds
fresh pages) and read through its mapping (docs/store.md, "Writing").

Files under ``storePathRootDir``: ``commitlog/``, ``consumequeue/<topic>/<queueId>/``,
``index/``, ``checkpoint``, ``abort`` and ``lock`` (see docs/store.md).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.errors import DecodeError
from skiff.common.limits import PULL_MAX_BYTES
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.service import PeriodicThread
from skiff.store.checkpoint import StoreLock
from skiff.store.checks import Checked, MessageChecker
from skiff.store.commitlog import CommitLog
from skiff.store.compacted_segment import StepHook
from skiff.store.compaction import Compaction, CompactionReport, CompactionStatus
from skiff.store.config import FlushDiskType, StoreConfig
from skiff.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from skiff.store.dispatcher import (
    NOT_CONSUMABLE,
    DispatchBatch,
    Dispatcher,
    QueueTouch,
    TagCodes,
    batches_between,
    queue_runs,
)
from skiff.store.flush import CommitLogFlusher
from skiff.store.index_service import IndexService
from skiff.store.reads import Reader, RecordFilter
from skiff.store.replicated import replicated_batch
from skiff.store.recovery import ABORT, make_durable, recover
from skiff.store.results import (
    GetResult,
    MessageInput,
    PutResult,
    PutStatus,
    RecoveryReport,
    RetentionReport,
    StoreStats,
)
from skiff.store.retention import Retention
from skiff.store.run_write import RunWriter, offset_msg_ids

log = logging.getLogger(__name__)

DispatchListener = Callable[[Sequence[QueueTouch]], None]

_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_PUT_OK = PutStatus.PUT_OK
"""A module global: ``PutStatus.PUT_OK`` is an enum class attribute lookup (~0.15 µs on
CPython 3.11, a tenth of that for a global) on every append."""


def _queue_offsets(base: int, sys_flags: Sequence[int]) -> tuple[list[int], int]:
    """The queue offsets of a batch's records from ``base`` (0 for records that are never
    consumed: prepared and rolled-back transactions) and the queue's next offset."""
    offsets = []
    next_offset = base
    for sys_flag in sys_flags:
        if sys_flag & NOT_CONSUMABLE:
            offsets.append(0)
        else:
            offsets.append(next_offset)
            next_offset += 1
    return offsets, next_offset




class MessageStore:
    def __init__(self, config: StoreConfig, *, store_host: bytes, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.store_host = store_host
        self.root = config.root
        self.commitlog = CommitLog(os.path.join(self.root, "commitlog"), config.mapped_file_size_commit_log, store_host,
                                   config.commit_log_page_cache_bytes)
        self.queues = ConsumeQueueTable(os.path.join(self.root, "consumequeue"), config.mapped_file_size_consume_queue)
        self.index = (
            IndexService(os.path.join(self.root, "index"), config.max_hash_slot_num, config.max_index_num, clock)
            if config.message_index_enable else None
        )
        self.dispatcher = Dispatcher(self.queues, self.index)
        self._runs = RunWriter(self.commitlog, self.index)
        self._maintenance_lock = threading.Lock()
        """Held by a retention pass and by compaction while they delete ConsumeQueue files."""
        self.compaction = Compaction(os.path.join(self.root, "compaction"), self.commitlog, self.queues, clock,
                                     self._safe_offset, self._maintenance_lock, self.checkpoint)
        self.reader = Reader(self.commitlog, self.queues, config.max_filter_message_count, self.compaction.segments)
        self.retention = Retention(config, clock, self.commitlog, self.queues, self.index, self._safe_offset,
                                   self.compaction.pinned_offset)
        self._checker = MessageChecker(config.max_message_size, config.mapped_file_size_commit_log, len(store_host))
        self._put_lock = threading.Lock()
        self._busy_wait_s = config.os_page_cache_busy_time_out_mills / 1000
        self._queue_offsets: dict[tuple[str, int], int] = {}
        self._listeners: list[DispatchListener] = []
        self._append_listeners: list[Callable[[int], None]] = []
        self._truncate_listeners: list[Callable[[int], None]] = []
        self._visible_lock = threading.Lock()
        self._unconfirmed: list[tuple[int, list[QueueTouch]]] = []
        """Dispatch notices held back until `set_visible_end` passes their CommitLog end."""
        self._tag_codes = TagCodes()
        self._dispatched = 0
        self._running = False
        self._started = False
        self._lock = StoreLock(self.root)
        self._flusher = CommitLogFlusher(
            self.commitlog.flush, interval_ms=config.flush_interval_commit_log,
            sync=config.flush_disk_type is FlushDiskType.SYNC_FLUSH, timeout_ms=config.sync_flush_timeout,
        )
        self._threads = [
            PeriodicThread("skiff-store-checkpoint", config.flush_interval_consume_queue / 1000, self._checkpoint),
            PeriodicThread("skiff-store-clean", config.clean_resource_interval / 1000, self._housekeeping),
        ]
        self._thorough_at = time.monotonic() + config.flush_consume_queue_thorough_interval / 1000
        self._puts = self._put_bytes = self._put_failures = 0
        self.replica = False
        """A slave's store: puts are refused, `append_replicated` alone writes."""

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> RecoveryReport:
        """Load and recover the files, then start the flush, checkpoint and clean threads."""
        if self._started:
            raise RuntimeError("a MessageStore starts once; make a new one to open the files again")
        self._started = True
        os.makedirs(self.root, exist_ok=True)
        self._lock.acquire()
        try:
            report = recover(self.root, self.commitlog, self.queues, self.index, self.dispatcher, self.clock)
        except BaseException:
            self._close_files()
            raise
        self._dispatched = self.commitlog.write_pos
        try:
            self.compaction.load()
        except BaseException:
            self._close_files()
            raise
        self._queue_offsets = {(cq.topic, cq.queue_id): cq.max_offset for cq in self.queues.all()}
        self.retention.check_disk()
        self._flusher.start()
        for t in self._threads:
            t.start()
        self._running = True
        log.info("store %s started: %s", self.root, report)
        return report

    def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove the abort marker, close the files."""
        with self._put_lock:  # appends under way finish first; later ones are refused
            if not self._running:
                return
            self._running = False
        for t in self._threads:
            t.stop()
        self._flusher.stop()
        with self._put_lock:
            clean = self._make_durable(flush_commitlog=True)
            if clean:
                os.unlink(os.path.join(self.root, ABORT))
            self._close_files()

    def _close_files(self) -> None:
        self.compaction.close()
        self.commitlog.close()
        self.queues.close()
        if self.index is not None:
            self.index.close()
        self._lock.release()

    def _make_durable(self, *, flush_commitlog: bool, least_pages: int = 0) -> bool:
        return make_durable(
            self.root, self.commitlog, self.queues, self.index, self._dispatched, self.clock,
            flush_commitlog=flush_commitlog, least_pages=least_pages,
        )

    def _checkpoint(self) -> None:
        """The periodic flush: thorough every flushConsumeQueueThoroughInterval ms, else
        only the ConsumeQueues with flushConsumeQueueLeastPages pages of new entries."""
        now = time.monotonic()
        least_pages = self.config.flush_consume_queue_least_pages
        if now >= self._thorough_at:
            self._thorough_at = now + self.config.flush_consume_queue_thorough_interval / 1000
            least_pages = 0
        self._make_durable(flush_commitlog=False, least_pages=least_pages)

    def checkpoint(self) -> bool:
        """fsync every file and write the checkpoint now (the periodic thread does this
        every flushIntervalConsumeQueue ms); False if the checkpoint could not be written."""
        return self._make_durable(flush_commitlog=True)

    def _housekeeping(self) -> None:
        self.run_retention()
        if self._dispatched < self.commitlog.write_pos:
            with self._put_lock:
                self._catch_up()

    def _safe_offset(self) -> int:
        return min(self._dispatched, self.commitlog.flushed)

    # -- appends ------------------------------------------------------------------

    def put_message(self, msg: MessageInput) -> PutResult:
        return self.put_messages((msg,))

    def put_messages(self, msgs: Sequence[MessageInput]) -> PutResult:
        """Append a batch (same topic and queue) in one write with consecutive queue offsets."""
        # The store's state first, tested at once (one call fewer per append: `_precheck` says why).
        checked = (self._checker.check(msgs) if self._running and not self.replica and not self.retention.disk_full
                   else self._precheck(msgs))
        if type(checked) is PutResult:
            self._put_failures += 1
            return checked
        # Untimed first: the lock is free but for a checkpoint's moment, and a timeout keyword
        # costs every append a keyword parse (~0.3 µs).
        lock = self._put_lock
        if not lock.acquire(False) and not lock.acquire(timeout=self._busy_wait_s):
            self._put_failures += 1
            return PutResult(PutStatus.OS_PAGE_CACHE_BUSY,
                             f"the store's append lock stayed busy for {self.config.os_page_cache_busy_time_out_mills} ms "
                             f"(osPageCacheBusyTimeOutMills); nothing was written, try again")
        try:
            if not self._running:
                return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, "the store is shutting down")
            result, touched = self._append(msgs, checked)  # type: ignore[arg-type]  # not a PutResult: tested
        finally:
            lock.release()
        if touched:
            if self.reader.visible_end is None:  # `_notify`'s own test, without its call on every put
                self._tell(touched)
            else:
                self._notify(touched)
        for fn in self._append_listeners:
            fn(self.commitlog.write_pos)
        return result

    def _precheck(self, msgs: Sequence[MessageInput]) -> Checked | PutResult:
        if not self._running:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, "the store is not running")
        if self.replica:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, "this store is a slave's copy of its master's: "
                             "only replicated data is appended")
        if self.retention.disk_full:
            return PutResult(PutStatus.DISK_FULL, self._disk_full_reason())
        return self._checker.check(msgs)

    def _append(self, msgs: Sequence[MessageInput], checked: Checked) -> tuple[PutResult, list[QueueTouch]]:
        """Write a checked batch and dispatch it (put lock held). A batch every record of which
        is consumed (all but transactions' halves) is one ConsumeQueue run: where its queue and
        the index have room reserved already (by earlier appends), its records, entries and keys
        are written in one call (`RunWriter`, skiff/store/run_write.py); else room is reserved
        first (`Dispatcher.reserve_run`), then the same call, or, where the run crosses a file,
        the CommitLog write and the run's dispatch apart (`Dispatcher.dispatch_run`). The others
        go through `DispatchBatch` as recovery's do."""
        topic_raw, sizes, total, sys_flags, tags, keys, uniq_keys, consumable, key_count = checked
        first = msgs[0]
        topic = first[0]
        queue_id = first[1]
        key = (topic, queue_id)
        n = len(msgs)
        base = self._queue_offsets.get(key, 0)
        queue_offsets, next_offset = (range(base, base + n), base + n) if consumable else _queue_offsets(
            base, sys_flags)
        commitlog = self.commitlog
        dispatcher = self.dispatcher
        tag_codes = [self._tag_codes[tags[0]]] if n == 1 else list(map(self._tag_codes.__getitem__, tags))
        written = None
        try:
            if self._dispatched < commitlog.write_pos:
                self._catch_up()
            store_ts = self.clock.now_ms()
            cq = self.queues.queues.get(key) if consumable else None
            if cq is not None:  # records, entries and keys in one call where room is reserved (run_write)
                written = self._runs.write(commitlog.place(total), cq, msgs, topic_raw, base, sizes, total, store_ts,
                                           tag_codes, key_count)
            if written is None:  # reserve first, so that a full disk refuses the put before its dispatch
                cq = dispatcher.reserve_run(topic, queue_id, next_offset - base, key_count)
                if consumable and cq is not None:
                    written = self._runs.write(commitlog.place(total), cq, msgs, topic_raw, base, sizes, total,
                                               store_ts, tag_codes, key_count)
            offsets = commitlog.append(msgs, topic_raw, queue_offsets, sizes, total, store_ts) if written is None \
                else written[0]
        except OSError as exc:
            self._put_failures += 1
            return self._disk_error(exc), []
        if written is not None:
            touched = [(topic, queue_id, next_offset)]
            self._dispatched = commitlog.write_pos
        else:
            touched = self._dispatch_appended(cq, msgs, queue_offsets, offsets, sizes, tag_codes, store_ts, checked)
        self._queue_offsets[key] = next_offset
        self._puts += n
        self._put_bytes += total
        flushed = self._flusher.request(offsets[-1] + sizes[-1]) if self._flusher.sync else None
        return PutResult(
            _PUT_OK, "", offsets[0], offset_msg_ids(self.store_host, offsets) if written is None else written[1],
            queue_offsets[0], n, store_ts, total, flushed,
        ), touched

    def _dispatch_appended(self, cq: ConsumeQueue | None, msgs: Sequence[MessageInput], queue_offsets: Sequence[int],
                           offsets: list[int], sizes: list[int], tag_codes: list[int], store_ts: int,
                           checked: Checked) -> list[QueueTouch]:
        """The ConsumeQueue and index entries of records `CommitLog.append` wrote (put lock held):
        a run of one queue (`Dispatcher.dispatch_run`), or a batch with a transaction's half
        (`DispatchBatch`, as recovery's). A failure is logged and left for `_catch_up`, which
        re-dispatches from the CommitLog; the records themselves are stored."""
        _, _, _, sys_flags, _, keys, uniq_keys, consumable, key_count = checked
        n = len(msgs)
        topic, queue_id = msgs[0][0], msgs[0][1]
        try:
            if consumable:
                touched = self.dispatcher.dispatch_run(cq, queue_offsets[0], offsets, sizes, tag_codes, store_ts,
                                                       sys_flags, keys, uniq_keys, key_count)
            else:
                # Positional: keywords would add ~0.3 µs to every put; the field order is checked
                # at import (skiff.common.kernels.ROW_LAYOUTS).
                touched = self.dispatcher.dispatch(DispatchBatch(
                    (topic,) * n, (queue_id,) * n, queue_offsets, offsets, sizes, tag_codes, (store_ts,) * n,
                    sys_flags, keys, uniq_keys, None,
                ))
        except Exception:
            log.exception("dispatch failed at CommitLog offset %d; it will be retried", self._dispatched)
            return []
        self._dispatched = self.commitlog.write_pos
        return touched

    def _dispatch(self, batch: DispatchBatch) -> list[QueueTouch]:
        """Dispatch under the put lock. A failure is logged and left for `_catch_up`, which
        re-dispatches from the CommitLog; the records themselves are stored."""
        try:
            touched = self.dispatcher.dispatch(batch)
        except Exception:
            log.exception("dispatch failed at CommitLog offset %d; it will be retried", self._dispatched)
            return []
        self._dispatched = self.commitlog.write_pos
        return touched

    def _catch_up(self) -> None:
        """Re-dispatch records written after the last successful dispatch (put lock held)."""
        if self._dispatched >= self.commitlog.write_pos:
            return
        for batch in batches_between(self.commitlog, self._dispatched, self.commitlog.write_pos):
            self.dispatcher.dispatch(batch)
            self._dispatched = batch.end
        self._dispatched = self.commitlog.write_pos
        self._queue_offsets.update({(cq.topic, cq.queue_id): cq.max_offset for cq in self.queues.all()})

    def _disk_error(self, exc: OSError) -> PutResult:
        if exc.errno in _DISK_FULL_ERRNOS:
            return PutResult(PutStatus.DISK_FULL, f"no room on disk for the store's files: {exc.strerror}")
        log.error("cannot create or write a store file: %s", exc)
        return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, f"cannot create or write a store file: {exc}")

    def _disk_full_reason(self) -> str:
        return (f"the disk is {self.retention.disk_used:.1f}% full, above "
                f"diskSpaceWarningLevelRatio={self.config.disk_space_warning_level_ratio}")

    def append_replicated(self, data: bytes | bytearray | memoryview, physical_offset: int, *,
                          hold_partial: bool = False) -> int:
        """Append raw records (a slave copying its master) at the end and dispatch them.

        ``data`` starts at ``physical_offset`` == the current max offset and holds whole
        records, or, with ``hold_partial``, may end inside one: that unit is left for the
        caller to complete (a frame of the HA stream ends anywhere). Raises ValueError for a
        wrong offset, DecodeError for bad records (nothing is written then) and OSError
        when the disk is full. Returns the new max physical offset."""
        view = memoryview(data)
        with self._put_lock:
            if physical_offset != self.commitlog.write_pos and not self._may_start_at(physical_offset):
                raise ValueError(f"replicated data starts at {physical_offset}, the CommitLog ends at {self.commitlog.write_pos}")
            whole, batch = replicated_batch(view, physical_offset, self.commitlog.file_size, self._tag_codes,
                                            hold_partial=hold_partial)
            if not whole:
                return physical_offset
            if not self.commitlog.files.files:
                self.commitlog.write_pos = self.commitlog.flushed = self._dispatched = physical_offset
            self._catch_up()
            batch = batch._replace(runs=queue_runs(batch))
            self.dispatcher.reserve_for(batch)
            self.commitlog.append_raw(view[:whole])
            touched = self._dispatch(batch)
            self._queue_offsets.update({(t, q): m for t, q, m in touched})
            end = self.commitlog.write_pos
        if touched:
            self._notify(touched)
        return end

    def _may_start_at(self, offset: int) -> bool:
        """An empty store (a new slave) may begin at any file start: RocketMQ's master sends
        a slave that reports offset 0 the start of its last CommitLog file."""
        return not self.commitlog.files.files and offset % self.commitlog.file_size == 0

    def truncate(self, offset: int) -> int:
        """Drop every record from ``offset`` (a record boundary) on, with their ConsumeQueue
        and index entries, durably: a demoted master drops the tail its successor never had.
        Returns the bytes removed. Raises ValueError when ``offset`` is not a record start."""
        with self._put_lock:
            end = self.commitlog.write_pos
            if offset == end:
                return 0
            self._check_boundary(offset)
            self._catch_up()
            self.commitlog.truncate(offset)
            self.commitlog.files.sync_range(offset, end)
            self.queues.truncate_phys(offset)
            if self.index is not None:
                self.index.truncate_phys(offset)
            self._dispatched = offset
            self._queue_offsets = {(cq.topic, cq.queue_id): cq.max_offset for cq in self.queues.all()}
            self._make_durable(flush_commitlog=True)
            for fn in self._truncate_listeners:
                fn(offset)
        log.warning("store %s truncated from %d to %d (%d bytes dropped)", self.root, end, offset, end - offset)
        return end - offset

    def _check_boundary(self, offset: int) -> None:
        if not self.commitlog.min_offset <= offset < self.commitlog.write_pos:
            raise ValueError(f"cannot truncate to {offset}: the CommitLog holds "
                             f"[{self.commitlog.min_offset}, {self.commitlog.write_pos})")
        if offset % self.commitlog.file_size and self.commitlog.record_view(offset) is None:
            raise ValueError(f"cannot truncate to {offset}: no record starts there")

    def add_dispatch_listener(self, fn: DispatchListener) -> None:
        """Call ``fn`` after each dispatched append with (topic, queue id, new max offset)
        of each queue it grew, on the appending thread, outside the put lock."""
        self._listeners.append(fn)

    def add_append_listener(self, fn: Callable[[int], None]) -> None:
        """Call ``fn(max physical offset)`` after each put, on the appending thread, outside
        the put lock (a replicating master wakes its senders); ``fn`` must not raise."""
        self._append_listeners.append(fn)

    def add_truncate_listener(self, fn: Callable[[int], None]) -> None:
        """Call ``fn(offset)`` after `truncate` dropped the records from ``offset`` on, on the
        truncating thread, inside the put lock (before anything is appended there again): what
        was read from the dropped tail (the Kafka producer state) must be read again."""
        self._truncate_listeners.append(fn)

    def set_visible_end(self, offset: int | None) -> None:
        """Serve reads only up to CommitLog ``offset`` (None: everything), and tell the
        dispatch listeners (held pulls) of the queues that grew below it meanwhile: a
        SYNC_MASTER in controller mode sets it to what its whole SyncStateSet acknowledged."""
        with self._visible_lock:
            self.reader.visible_end = offset
            ready = [t for end, t in self._unconfirmed if offset is None or end <= offset]
            self._unconfirmed = [(end, t) for end, t in self._unconfirmed if offset is not None and end > offset]
        for touched in ready:
            self._tell(touched)

    def _notify(self, touched: list[QueueTouch]) -> None:
        """Listeners hear of a grown queue once its records are visible (`set_visible_end`)."""
        if self.reader.visible_end is None:
            # Everything is visible: told now, as if this append had taken the lock before a
            # `set_visible_end` that may be under way (the lock only orders the two).
            self._tell(touched)
            return
        end = self.commitlog.write_pos
        with self._visible_lock:
            limit = self.reader.visible_end
            if limit is not None and end > limit:
                self._unconfirmed.append((end, touched))
                return
        self._tell(touched)

    def _tell(self, touched: list[QueueTouch]) -> None:
        for fn in self._listeners:
            try:
                fn(touched)
            except Exception:
                log.exception("dispatch listener %r failed", fn)

    # -- reads --------------------------------------------------------------------

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        *,
        tag_codes: frozenset[int] | None = None,
        record_filter: RecordFilter | None = None,
        max_bytes: int = PULL_MAX_BYTES,
    ) -> GetResult:
        """Up to ``max_count`` records of a queue from ``offset`` as CommitLog slices.

        ``tag_codes`` keeps entries whose tag code is in the set (tested on the
        ConsumeQueue, many entries at once); ``record_filter`` is then asked about
        each remaining raw record. The first record is returned even if it is larger
        than ``max_bytes``."""
        return self.reader.get_messages(topic, queue_id, offset, max_count, tag_codes, record_filter, max_bytes)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return 0 if cq is None else cq.max_offset

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return 0 if cq is None else self.reader.min_offset(cq)

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (the max offset if none)."""
        cq = self.queues.get(topic, queue_id)
        return 0 if cq is None else self.reader.offset_by_time(cq, timestamp_ms)

    def get_earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's first message, or -1 when it has none."""
        cq = self.queues.get(topic, queue_id)
        t = None if cq is None else self.reader.store_time(cq, self.reader.min_offset(cq))
        return -1 if t is None else t

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        cq = self.queues.get(topic, queue_id)
        return None if cq is None else self.reader.store_time(cq, offset)

    def read_record(self, physical_offset: int) -> bytes | None:
        """The raw stored record at ``physical_offset``, or None."""
        view = self.commitlog.record_view(physical_offset)
        return None if view is None else bytes(view)

    def read_raw(self, start: int, max_bytes: int) -> memoryview | None:
        """Up to ``max_bytes`` CommitLog bytes from ``start``, never past the end of its file
        or the write position (one HA frame's body, zero-copy); None when no file holds
        ``start`` (retention deleted it) or nothing is written there yet."""
        f = self.commitlog.files.find(start)
        end = min(self.commitlog.write_pos, start + max_bytes)
        if f is None or end <= start:
            return None
        try:
            return f.view(start - f.start, min(end, f.end) - start)
        except ValueError:
            return None  # closed by retention meanwhile

    def read_record_by_msg_id(self, offset_msg_id: str) -> bytes | None:
        try:
            return self.read_record(decode_offset_msg_id(offset_msg_id).physical_offset)
        except DecodeError:
            return None

    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[bytes]:
        """Records of ``topic`` with ``key`` among their KEYS or as UNIQ_KEY, stored within
        [begin_ms, end_ms], newest first, at most ``max_num`` (and maxMsgsNumBatch)."""
        if self.index is None:
            return []
        limit = max(0, min(max_num, self.config.max_msgs_num_batch))
        return self.reader.query_by_key(self.index, topic, key, limit, begin_ms, end_ms)

    # -- topics and administration ------------------------------------------------

    def topics(self) -> list[str]:
        return self.queues.topics()

    def queue_ids(self, topic: str) -> list[int]:
        return self.queues.queue_ids(topic)

    def prepare_topic(self, topic: str, queue_nums: int) -> int:
        """Make the directories and first files of ``topic``'s queues now (an admin creating
        the topic), not on the first message of each; return how many were made. Raises OSError."""
        return self.queues.prepare(topic, queue_nums)

    def delete_topic(self, topic: str) -> None:
        """Drop the topic's ConsumeQueues (its records stay in the CommitLog until they
        expire) and checkpoint at once, so recovery never resurrects them."""
        self.compaction.delete_topic(topic)  # first, outside the put lock: it waits for a compaction under way
        with self._put_lock:
            self.queues.delete_topic(topic)
            for key in [k for k in self._queue_offsets if k[0] == topic]:
                del self._queue_offsets[key]
            self._make_durable(flush_commitlog=True)

    def run_retention(self, *, manual: bool = False) -> RetentionReport:
        """One retention pass now; ``manual`` deletes expired files whatever the hour."""
        with self._maintenance_lock:
            return self.retention.run(manual=manual)

    def compact(self, topic: str, queue_id: int, *, delete_retention_ms: int, max_offset_map_size: int,
                step: StepHook | None = None) -> CompactionReport:
        """Compact one queue now (see `skiff.store.compaction`): its flushed records are
        rewritten keeping the latest of each KEYS value, at their queue offsets. Appends
        go on meanwhile; ``step`` is told each durable step (crash tests)."""
        return self.compaction.compact(topic, queue_id, delete_retention_ms=delete_retention_ms,
                                       max_offset_map_size=max_offset_map_size, step=step)

    def compaction_status(self, topic: str, queue_id: int) -> CompactionStatus:
        return self.compaction.status(topic, queue_id)

    def flush(self) -> int:
        """fsync the CommitLog now; return the flushed offset."""
        return self.commitlog.flush()

    # -- state --------------------------------------------------------------------

    @property
    def max_physical_offset(self) -> int:
        return self.commitlog.write_pos

    @property
    def min_physical_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def flushed_offset(self) -> int:
        return self.commitlog.flushed

    @property
    def dispatched_offset(self) -> int:
        return self._dispatched

    @property
    def running(self) -> bool:
        return self._running

    def stats(self) -> StoreStats:
        return StoreStats(
            put_messages=self._puts,
            put_bytes=self._put_bytes,
            put_failures=self._put_failures,
            fsync_count=self.commitlog.fsync_count,
            consume_queue_flushes=self.queues.flush_count,
            commitlog_files=len(self.commitlog.files.files),
            consume_queues=len(self.queues.queues),
            index_files=0 if self.index is None else len(self.index.files),
            min_physical_offset=self.min_physical_offset,
            max_physical_offset=self.max_physical_offset,
            flushed_offset=self.flushed_offset,
            dispatched_offset=self._dispatched,
            disk_used_percent=self.retention.disk_used,
            writable=self._running and not self.retention.disk_full,
        )

