"""What the tier crash tests' children share (tests/crash/test_tier_kill.py and
test_tier_compacted_kill.py): their command line, the step hook that kills the child right
after a named durable step, the one tiered topic, and what a reader from offset 0 gets."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable

from skiff.broker.tier.service import TierService
from skiff.common.stored_message import decode_records
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageStore
from skiff.tier.columns import rows_to_records
from tests.crash.store_child import emit

BROKER = "broker-a"


def parse_child() -> tuple[argparse.Namespace, Callable[[str], None]]:
    """``--dir D --round R [--kill-at STEP]``, and the step hook: it prints ``{"step": name}``
    and SIGKILLs the child right after STEP."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--kill-at")
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
    """Data and index files under the topic's tier that its manifest does not list."""
    listed = service.tier.manifest(topic, BROKER).segments
    known = {s.file for s in listed} | {s.index.file for s in listed if s.index}
    return sum(1 for k in service.tier.backend.list(f"{topic}/") if k.endswith((".parquet", ".keys")) and k not in known)
