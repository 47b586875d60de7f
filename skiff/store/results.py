"""What goes into the store and what comes out: inputs, statuses and result records.

Expected outcomes (a full disk, a message too large, an offset out of range) are
statuses in these results, never exceptions.
"""

from __future__ import annotations

import concurrent.futures
import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from skiff.common import kernels


@kernels.kernel_row
class MessageInput(NamedTuple):
    """One message as the broker hands it over, with its bytes already encoded.

    ``tags``, ``keys`` and ``uniq_key`` repeat what ``properties`` holds; the broker
    has parsed them already, so the append path builds ConsumeQueue and index
    entries without decoding the properties again.

    A NamedTuple, not a frozen dataclass: the broker makes one per message sent
    (a third of the cost), and the append path turns a batch into columns with
    one ``zip(*batch)``.

    The compiled kernels read it by slot: its field order is checked at import against
    `skiff.common.kernels.ROW_LAYOUTS`. Build it by keyword, except on the per-message
    send path, where keywords cost more than the tuple itself (see the writer).
    """

    topic: str
    queue_id: int
    body: bytes
    properties: bytes
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags: str | None = None
    keys: str | None = None
    uniq_key: str | None = None


class PutStatus(enum.Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    SERVICE_NOT_AVAILABLE = 2
    CREATE_MAPPED_FILE_FAILED = 3
    MESSAGE_ILLEGAL = 4
    PROPERTIES_SIZE_EXCEEDED = 5
    DISK_FULL = 6
    UNKNOWN_ERROR = 7
    OS_PAGE_CACHE_BUSY = 8
    """The append lock stayed busy for osPageCacheBusyTimeOutMills: nothing was written."""
    FLUSH_SLAVE_TIMEOUT = 9
    """SYNC_MASTER: stored here, but no slave acknowledged it within slaveTimeout (set by the broker)."""
    SLAVE_NOT_AVAILABLE = 10
    """SYNC_MASTER: stored here, but no slave is connected or it is haSlaveFallbehindMax behind."""


class PutResult(NamedTuple):
    """The outcome of one append (a single message or a batch).

    For a batch, ``physical_offset`` and ``queue_offset`` are those of the first
    message; the others follow consecutively. ``flushed`` is set in SYNC_FLUSH mode:
    it resolves to PUT_OK after the fsync that covers this write, or to
    FLUSH_DISK_TIMEOUT (``asyncio.wrap_future`` turns it into an awaitable).

    A NamedTuple, not a frozen dataclass: every append makes one, and a frozen
    dataclass's ``__init__`` sets its nine fields through ``object.__setattr__`` (about
    a tenth of a lone send's append). Change a field with ``_replace``.
    """

    status: PutStatus
    reason: str = ""
    physical_offset: int = -1
    offset_msg_ids: tuple[str, ...] = ()
    queue_offset: int = -1
    message_count: int = 0
    store_timestamp: int = 0
    wrote_bytes: int = 0
    flushed: concurrent.futures.Future[PutStatus] | None = None

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


class GetStatus(enum.Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


@dataclass(frozen=True, slots=True)
class GetResult:
    """Messages of one queue as raw stored records, ready to be written to a socket.

    ``buffers`` are slices of the mapped CommitLog; records that lie back to back
    share one slice, so a queue that was written alone comes back as one slice
    per CommitLog file. The slices stay valid while they are referenced, even if
    retention deletes their file meanwhile.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = field(default_factory=list)
    message_count: int = 0
    total_bytes: int = 0
    queue_offsets: list[int] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.status is GetStatus.FOUND


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What `MessageStore.start` found and repaired."""

    clean_shutdown: bool
    """The abort marker was absent: the last run shut down properly."""
    checkpoint_offset: int
    """CommitLog offset below which derived files were known durable; the scan began here."""
    max_physical_offset: int
    """The end of the valid CommitLog after recovery."""
    truncated_from: int | None = None
    """Where an invalid record began, if one was found."""
    truncated_reason: str = ""
    truncated_bytes: int = 0
    """Non-zero bytes from the invalid record on that were zeroed or deleted."""
    commitlog_files_removed: int = 0
    records_redispatched: int = 0
    consume_queue_entries_trimmed: int = 0
    """ConsumeQueue entries that pointed past the valid end and were removed."""
    index_entries_trimmed: int = 0
    notes: tuple[str, ...] = ()
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What one retention pass deleted."""

    commitlog_files_deleted: int
    consume_queue_files_deleted: int
    index_files_deleted: int
    min_physical_offset: int
    disk_used_percent: float
    forced: bool
    """The disk was above diskSpaceCleanForciblyRatio: unexpired files went too."""


@dataclass(frozen=True, slots=True)
class StoreStats:
    put_messages: int
    put_bytes: int
    put_failures: int
    fsync_count: int
    """CommitLog fsyncs; under group commit, far fewer than SYNC_FLUSH writes."""
    consume_queue_flushes: int
    commitlog_files: int
    consume_queues: int
    index_files: int
    min_physical_offset: int
    max_physical_offset: int
    flushed_offset: int
    dispatched_offset: int
    disk_used_percent: float
    writable: bool
    """False while the disk is above diskSpaceWarningLevelRatio or the store is stopped."""
