"""The message store's configuration, with RocketMQ's key names.

Build it with `skiff.common.config.build_config(StoreConfig, props)`; keys may be
camelCase (``mappedFileSizeCommitLog``, or RocketMQ's old ``mapedFileSizeCommitLog``)
or snake_case. Every value is checked when the object is made, and a bad one
raises `ConfigError` naming the RocketMQ key.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import ClassVar

from skiff.common.config import snake_to_camel
from skiff.common.errors import ConfigError
from skiff.common.limits import MESSAGE_MAX_BYTES

CQ_ENTRY_BYTES = 20
"""One ConsumeQueue entry; its layout is in `skiff.store.consume_queue`."""


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = 0
    """Acknowledge after the write; a background thread fsyncs every flushIntervalCommitLog ms."""
    SYNC_FLUSH = 1
    """Acknowledge after the fsync that covers the write (group commit)."""


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


@dataclass(frozen=True)
class StoreConfig:
    ALIASES: ClassVar[dict[str, str]] = {
        "mapedFileSizeCommitLog": "mapped_file_size_commit_log",
        "mapedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    }

    store_path_root_dir: str = field(default_factory=_default_root)
    mapped_file_size_commit_log: int = 1 << 30
    """Bytes per CommitLog file; a record never spans two files."""
    mapped_file_size_consume_queue: int = 300_000 * CQ_ENTRY_BYTES
    """Bytes per ConsumeQueue file, a multiple of the 20-byte entry."""
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    """ms between background CommitLog fsyncs (ASYNC_FLUSH)."""
    commit_log_page_cache_bytes: int = 64 << 20
    """Flushed CommitLog bytes kept in the page cache behind the flushed offset; older pages
    are dropped after each flush (0: keep them all, as RocketMQ does). Skiff's own key:
    see docs/store.md, "Dropping behind"."""
    flush_interval_consume_queue: int = 1000
    """ms between fsyncs of ConsumeQueue and index files, each followed by a checkpoint."""
    flush_consume_queue_least_pages: int = 2
    """Pages of new entries a ConsumeQueue needs before a periodic flush fsyncs it (RocketMQ's
    key and default): a queue written a few entries a second waits for the thorough flush,
    and the checkpoint stops below its first unflushed entry meanwhile."""
    flush_consume_queue_thorough_interval: int = 60_000
    """ms between periodic flushes that fsync every ConsumeQueue with new entries."""
    sync_flush_timeout: int = 5000
    """ms a SYNC_FLUSH writer waits for its fsync before it gets FLUSH_DISK_TIMEOUT."""
    os_page_cache_busy_time_out_mills: int = 1000
    """ms an append waits for the append lock (held by another append, a catch-up or a topic
    deletion's checkpoint) before it is refused with OS_PAGE_CACHE_BUSY, which the broker
    answers as SYSTEM_BUSY: a sender retries elsewhere instead of stalling the broker."""
    file_reserved_time: int = 72
    """hours a CommitLog file is kept after its last write."""
    delete_when: str = "04"
    """hours of the day (local time) when expired files are deleted, e.g. "04;16"."""
    disk_max_used_space_ratio: int = 75
    """percent of the disk used above which expired files are deleted at once."""
    disk_space_clean_forcibly_ratio: int = 85
    """percent above which the oldest files are deleted even before they expire."""
    disk_space_warning_level_ratio: int = 90
    """percent above which the store refuses writes (DISK_FULL)."""
    clean_file_forcibly_enable: bool = True
    clean_resource_interval: int = 10_000
    """ms between retention passes and disk-usage checks."""
    max_message_size: int = MESSAGE_MAX_BYTES
    """largest message body accepted, in bytes."""
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    message_index_enable: bool = True
    max_filter_message_count: int = 800
    """ConsumeQueue entries one filtered pull scans at most (RocketMQ's 16000 bytes / 20)."""
    max_msgs_num_batch: int = 64
    """Most messages one query by key returns."""
    timer_precision_ms: int = 100
    """Tick of the timer's in-memory wheel: a delayed message is delivered within one tick after its time."""
    timer_slot_ms: int = 3_600_000
    """Span of due times one schedule log holds (a multiple of timerPrecisionMs)."""
    timer_lookahead_ms: int = 60_000
    """How long before its start a slot's schedule log is loaded into the wheel."""
    timer_flush_interval_ms: int = 1000
    """ms between the timer's commits: fsync of its logs, then its progress and checkpoint files."""
    compaction_schedule_internal: int = 15 * 60_000
    """ms between the broker's looks at its compacted topics (RocketMQ 5.1's name and spelling)."""
    max_offset_map_size: int = 100 << 20
    """Bytes one compaction pass's key-hash -> offset map may take (RocketMQ 5.1's name); a
    queue with more distinct keys in its dirty part is compacted in several passes."""
    compaction_min_dirty_ratio: float = 0.5
    """A queue is compacted when its dirty bytes reach this share of its bytes (Kafka's
    min.cleanable.dirty.ratio), or when a tombstone it keeps has expired."""

    def __post_init__(self) -> None:
        self._positive(
            "mapped_file_size_commit_log", "mapped_file_size_consume_queue",
            "flush_interval_commit_log", "flush_interval_consume_queue", "flush_consume_queue_thorough_interval",
            "sync_flush_timeout",
            "os_page_cache_busy_time_out_mills",
            "clean_resource_interval", "max_message_size", "max_hash_slot_num",
            "max_filter_message_count", "max_msgs_num_batch", "timer_precision_ms", "timer_slot_ms",
            "timer_flush_interval_ms", "compaction_schedule_internal", "max_offset_map_size",
        )
        if not 0.0 <= self.compaction_min_dirty_ratio <= 1.0:
            self._fail("compaction_min_dirty_ratio", "must be from 0 to 1")
        if self.mapped_file_size_consume_queue % CQ_ENTRY_BYTES:
            self._fail("mapped_file_size_consume_queue", f"must be a multiple of {CQ_ENTRY_BYTES}")
        if self.max_index_num < 2:
            self._fail("max_index_num", "must be at least 2 (index entry 0 is never used)")
        for name in ("file_reserved_time", "flush_consume_queue_least_pages"):
            if getattr(self, name) < 0:
                self._fail(name, "must not be negative")
        for name in ("disk_max_used_space_ratio", "disk_space_clean_forcibly_ratio",
                     "disk_space_warning_level_ratio"):
            if not 0 <= getattr(self, name) <= 100:
                self._fail(name, "must be a percentage from 0 to 100")
        if self.commit_log_page_cache_bytes < 0:
            self._fail("commit_log_page_cache_bytes", "must not be negative (0 keeps every page)")
        if self.timer_precision_ms > 1000:
            self._fail("timer_precision_ms", "must be at most 1000")
        if self.timer_slot_ms % self.timer_precision_ms:
            self._fail("timer_slot_ms", f"must be a multiple of timerPrecisionMs={self.timer_precision_ms}")
        if self.timer_lookahead_ms < 0:
            self._fail("timer_lookahead_ms", "must not be negative")
        if not self.store_path_root_dir:
            self._fail("store_path_root_dir", "must not be empty")
        self.delete_hours  # noqa: B018 - parses and validates deleteWhen

    @property
    def delete_hours(self) -> frozenset[int]:
        """The hours of ``delete_when`` as numbers."""
        hours = set()
        for part in self.delete_when.split(";"):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit() or not 0 <= int(part) <= 23:
                self._fail("delete_when", f"{part!r} is not an hour from 00 to 23")
            hours.add(int(part))
        return frozenset(hours)

    @property
    def root(self) -> str:
        return os.path.expanduser(self.store_path_root_dir)

    def _positive(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                self._fail(name, "must be a positive whole number")

    def _fail(self, name: str, why: str) -> None:
        raise ConfigError(f"{snake_to_camel(name)}: {getattr(self, name)!r} {why}")
