"""What the tier crash tests' children share (tests/crash/test_tier_kill.py and
test_tier_compacted_kill.py): their command line, the step hook that kills the child right
after a named durable step, the one tiered topic, and what a reader from offset 0 gets."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable

from skiff.broker.tier.service import TierService
from skiff.common.stored_message import decode_records
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageStore
from skiff.tier.columns import rows_to_records
from skiff.tier.manifest_parts import PART_SUFFIX
from tests.crash.store_child import emit

BROKER = "broker-a"


class SkewedClock:
    """The system's clock moved ``skew_ms`` ahead: a child that lives a second sees the tier's
    delete delay pass (retired files due) without the test waiting it out."""

    def __init__(self, skew_ms: int) -> None:
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.skew_ms

    def monotonic(self) -> float:
        return time.monotonic() + self.skew_ms / 1000


def parse_child() -> tuple[argparse.Namespace, Callable[[str], None]]:
    """``--dir D --round R [--kill-at STEP] [--delete-delay-ms N] [--skew-ms N]``, and the step
    hook: it prints ``{"step": name}`` and SIGKILLs the child right after STEP. The tier's delete
    delay (tierFileDeleteDelayMs) is 0 unless given: files a manifest drops go at once."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--kill-at")
    parser.add_argument("--delete-delay-ms", type=int, default=0)
    parser.add_argument("--skew-ms", type=int, default=0)
    args = parser.parse_args()

    def step(name: str) -> None:
        emit({"step": name})
        if name == args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    return args, step


class OneTopic:
    """The one tiered topic, as the broker's topic manager would answer."""

    def __init__(self, name: str, queues: int, **attributes: str) -> None:
        self.name, self.queues = name, queues
        self.attributes = {"tiered.storage": "true", **attributes}

    def topics(self) -> list[str]:
        return [self.name]

    def get(self, name: str) -> TopicConfig | None:
        return TopicConfig(self.name, self.queues, self.queues, attributes=self.attributes) if name == self.name else None


def queue_view(store: MessageStore, service: TierService, topic: str, queue_id: int) -> list[list]:
    """[offset, body] of what a reader of the queue from offset 0 gets: the tier below the
    queue's local first offset, then the disk (a compacted queue's gaps skipped)."""
    low = store.get_min_offset(topic, queue_id)
    manifest = service.tier.manifest(topic, BROKER)
    rows = [[m.queue_offset, m.body.decode()]
            for m in decode_records(rows_to_records(service.tier.read(manifest, queue_id, 0, 10_000)))
            if m.queue_offset < low]
    offset = low
    while offset < store.get_max_offset(topic, queue_id):
        r = store.get_messages(topic, queue_id, offset, 100)
        rows += [[m.queue_offset, m.body.decode()] for m in decode_records(b"".join(bytes(b) for b in r.buffers))]
        assert r.next_begin_offset > offset, r
        offset = r.next_begin_offset
    return rows


def orphans(service: TierService, topic: str) -> int:
    """Data and index files and manifest parts under the topic's tier that its manifest does not
    list (as a segment's, a part or retired)."""
    known = service.tier.manifest(topic, BROKER).known_files()
    return sum(1 for k in service.tier.backend.list(f"{topic}/")
               if k.endswith((".parquet", ".keys", PART_SUFFIX)) and k not in known)
