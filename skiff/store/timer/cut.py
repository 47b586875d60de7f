"""What a cut CommitLog means for a stopped timer's files.

A master that steps down stops its timer (whose last checkpoint names the CommitLog's end)
and then cuts the CommitLog back to what its successor has (`MessageStore.truncate`); the
successor's records are replicated over the cut part. Left alone, two of the timer's files
would name offsets past the cut, inside or beyond records they never saw:

- the delivery checkpoint: recovery at the next promotion would read the CommitLog from
  inside a record (a loop for ever on a zero length in the chaos runs) and would skip
  the deliveries the successor stored between the cut and the old end;
- the replay progress of SCHEDULE_TOPIC_XXXX's queues: the successor's parked messages
  at the offsets between the cut and the old progress would never be scheduled.

`after_cut` lowers both to the cut, durably, before anything is replicated there.
"""

from __future__ import annotations

import logging
import os

from skiff.common.files import replace_atomically
from skiff.common.names import SCHEDULE_TOPIC
from skiff.store.message_store import MessageStore
from skiff.store.timer.formats import (
    Progress,
    decode_checkpoint,
    decode_progress,
    encode_checkpoint,
    encode_progress,
    read_small_file,
)

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint"
PROGRESS_FILE = "progress"


def timer_root(store_root: str) -> str:
    """Where the timer of the store at ``store_root`` keeps its files."""
    return os.path.join(store_root, "timer")


def after_cut(store: MessageStore, offset: int, now_ms: int) -> list[str]:
    """Bring the stopped timer's checkpoint down to the CommitLog offset ``offset`` the store
    was cut to, and its replay progress down to SCHEDULE_TOPIC_XXXX's queue ends after the
    cut; return what was lowered (for the log). Files that do not exist are left so."""
    root = timer_root(store.root)
    notes = []
    checkpoint_path = os.path.join(root, CHECKPOINT_FILE)
    raw = read_small_file(checkpoint_path)
    if raw is not None:
        at = decode_checkpoint(raw, checkpoint_path)
        if at > offset:
            replace_atomically(checkpoint_path, encode_checkpoint(offset, now_ms))
            notes.append(f"delivery checkpoint {at} -> {offset}")
    progress_path = os.path.join(root, PROGRESS_FILE)
    raw = read_small_file(progress_path)
    if raw is not None:
        progress = decode_progress(raw, progress_path)
        queues = dict(progress.queues)
        for q, replayed in progress.queues.items():
            end = store.get_max_offset(SCHEDULE_TOPIC, q)
            if replayed > end:
                queues[q] = end
                notes.append(f"{SCHEDULE_TOPIC} queue {q} replayed to {replayed} -> {end}")
        if queues != progress.queues:
            replace_atomically(progress_path, encode_progress(Progress(queues, progress.slots), now_ms))
    if notes:
        log.warning("timer files lowered to the cut CommitLog (%d): %s", offset, "; ".join(notes))
    return notes
