"""Retention: deleting old CommitLog files, and the ConsumeQueue and index files they orphan.

A CommitLog file expires `fileReservedTime` hours after its last write (taken
as the store time of the next file's first record, so the injected clock decides
and tests need not wait). Expired files go at the `deleteWhen` hours, or at once
when disk use passes `diskMaxUsedSpaceRatio`, or on request (`run(manual=True)`,
an admin command). Above `diskSpaceCleanForciblyRatio` the oldest files go even
unexpired. Deletion runs oldest first and stops at the first file it must keep;
the newest file, and any file holding records that are not yet dispatched and
flushed, are always kept. Then ConsumeQueue files whose entries all point below
the new CommitLog minimum are deleted and each queue's min offset moves forward;
index files wholly below it go too.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable

from skiff.common.clock import Clock
from skiff.store.commitlog import CommitLog
from skiff.store.config import StoreConfig
from skiff.store.consume_queue import ConsumeQueueTable
from skiff.store.index_service import IndexService
from skiff.store.results import RetentionReport

DELETE_FILES_BATCH_MAX = 10
"""CommitLog files one pass deletes at most (RocketMQ's DELETE_FILES_BATCH_MAX)."""

_MS_PER_HOUR = 3_600_000


def disk_used_percent(path: str) -> float:
    """How full the file system holding ``path`` is, in percent."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return 0.0
    return 100.0 * (total - st.f_bfree * st.f_frsize) / total


class Retention:
    def __init__(
        self,
        config: StoreConfig,
        clock: Clock,
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        safe_offset: Callable[[], int],
        pinned_offset: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self._safe_offset = safe_offset
        self._pinned_offset = pinned_offset
        """Where compacted queues' dirty records begin: kept unless the disk forces deletion."""
        self.disk_used = 0.0
        self.disk_full = self.disk_used >= config.disk_space_warning_level_ratio
        """The disk passed diskSpaceWarningLevelRatio at the last `check_disk`: an attribute set
        there, not a property, as every append reads it (one call fewer per put)."""
        self.holds: list[Callable[[], int | None]] = []
        """CommitLog offsets below which files may go, from above the store (the tier's: data
        not yet uploaded). Unlike the pinned offset, a hold stands even when the disk forces
        deletion: deleting what exists nowhere else would lose it."""

    def add_hold(self, hold: Callable[[], int | None]) -> None:
        self.holds.append(hold)

    def check_disk(self) -> float:
        self.disk_used = disk_used_percent(self.config.root)
        self.disk_full = self.disk_used >= self.config.disk_space_warning_level_ratio
        return self.disk_used

    def run(self, *, manual: bool = False) -> RetentionReport:
        """One pass: decide whether deletion is due, delete, then tidy derived files."""
        used = self.check_disk()
        cfg = self.config
        forced = cfg.clean_file_forcibly_enable and used >= cfg.disk_space_clean_forcibly_ratio
        due = manual or forced or used >= cfg.disk_max_used_space_ratio or self._delete_hour()
        deleted = self._delete_commitlog_files(forced) if due else 0
        cq_deleted = idx_deleted = 0
        if deleted or manual:
            min_phys = self.commitlog.min_offset
            cq_deleted = self.queues.delete_below_phys(min_phys)
            idx_deleted = self.index.delete_below_phys(min_phys) if self.index else 0
            self.check_disk()
        return RetentionReport(deleted, cq_deleted, idx_deleted, self.commitlog.min_offset, self.disk_used, forced)

    def _delete_hour(self) -> bool:
        return time.localtime(self.clock.now_ms() / 1000).tm_hour in self.config.delete_hours

    def _delete_commitlog_files(self, forced: bool) -> int:
        files = self.commitlog.files.files
        safe = self._safe_offset()
        pinned = None if forced else self._pinned_offset()
        if pinned is not None:
            safe = min(safe, pinned)
        for hold in self.holds:
            held = hold()
            if held is not None:
                safe = min(safe, held)
        expiry_ms = self.config.file_reserved_time * _MS_PER_HOUR
        now = self.clock.now_ms()
        count = 0
        for f, successor in itertools.pairwise(files):
            if count >= DELETE_FILES_BATCH_MAX or f.end > safe:
                break
            last_write = self.commitlog.first_store_timestamp(successor)
            if last_write is None or (not forced and last_write + expiry_ms > now):
                break
            count += 1
        if count:
            self.commitlog.files.remove_head(count)
        return count
