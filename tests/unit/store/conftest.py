"""Helpers for store tests: small real stores in temporary directories."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.common.clock import ManualClock
from skiff.common.config import build_config
from skiff.common.files import TMP_SUFFIX
from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host
from skiff.common.stored_message import decode_records
from skiff.store import (
    GetResult,
    MessageInput,
    MessageStore,
    RecoveryReport,
    StoreConfig,
)

STORE_HOST = pack_host("127.0.0.1", 10911)
BORN_HOST = pack_host("10.0.0.7", 40000)

SMALL = {
    "mappedFileSizeCommitLog": 4096,
    "mappedFileSizeConsumeQueue": 20 * 16,
    "maxHashSlotNum": 64,
    "maxIndexNum": 256,
    "flushIntervalCommitLog": 20,
    "flushIntervalConsumeQueue": 60_000,
    "cleanResourceInterval": 600_000,
}


def make_config(root: Path | str, **overrides: Any) -> StoreConfig:
    return build_config(StoreConfig, {"storePathRootDir": str(root), **SMALL}, overrides)


def message(
    i: int = 0,
    *,
    topic: str = "T",
    queue_id: int = 0,
    body: bytes | None = None,
    tags: str | None = None,
    keys: str | None = None,
    uniq: str | None = None,
    sys_flag: int = 0,
    extra: dict[str, str] | None = None,
    born_host: bytes = BORN_HOST,
) -> MessageInput:
    props = dict(extra or {})
    if tags:
        props[Prop.TAGS] = tags
    if keys:
        props[Prop.KEYS] = keys
    if uniq:
        props[Prop.UNIQ_KEY] = uniq
    return MessageInput(
        topic=topic, queue_id=queue_id, body=body if body is not None else f"message {i}".encode(),
        properties=encode_properties(props), flag=i % 7, sys_flag=sys_flag, born_timestamp=1_000 + i,
        born_host=born_host, tags=tags, keys=keys, uniq_key=uniq,
    )


def records_of(result: GetResult) -> list:
    """Decode the records of a pull answer."""
    return decode_records(b"".join(bytes(b) for b in result.buffers))


class StoreFactory:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.stores: list[MessageStore] = []
        self.last_report: RecoveryReport | None = None

    def __call__(self, clock: ManualClock | None = None, root: Path | None = None, **overrides: Any) -> MessageStore:
        store = MessageStore(make_config(root or self.root, **overrides), store_host=STORE_HOST,
                             clock=clock or ManualClock())
        self.stores.append(store)
        self.last_report = store.start()
        return store

    def crash_image(self, store: MessageStore, name: str = "image") -> Path:
        """Copy a running store's files: what a crash (SIGKILL) would leave on disk. A
        ``.tmp`` file of an atomic replace is left out: a background flush may rename it away
        between the listing and the copy, and recovery never reads one."""
        dest = self.root.parent / name
        shutil.copytree(store.root, dest, ignore=shutil.ignore_patterns("*" + TMP_SUFFIX))
        return dest


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[StoreFactory]:
    factory = StoreFactory(tmp_path / "store")
    yield factory
    for store in factory.stores:
        store.shutdown()


ROOT = Path(__file__).resolve().parents[3]


def run_quick_bench(name: str, directory: Path) -> dict[str, Any]:
    """``skiff bench NAME --quick --json --dir DIRECTORY`` through the real command; its figures."""
    proc = subprocess.run(
        [sys.executable, "-m", "skiff", "bench", name, "--quick", "--json", "--dir", str(directory)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
