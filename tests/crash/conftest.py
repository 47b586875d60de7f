"""Helpers for crash tests: a store child process to kill, and checks of what survived."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from skiff.common.stored_message import decode_record, decode_records
from skiff.store import GetStatus, MessageStore
from tests.crash.store_child import QUEUES, STORE_HOST, TOPIC, child_config

ROOT = Path(__file__).resolve().parents[2]


class Child:
    """``python -m tests.crash.store_child`` (or ``module``) with its JSON lines collected by a thread."""

    def __init__(self, store_dir: Path, *args: str, module: str = "tests.crash.store_child") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--dir", str(store_dir), *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[dict] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by SIGKILL
            with self._cond:
                self.lines.append(obj)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, key: str, count: int = 1, timeout_s: float = 60.0) -> list[dict]:
        """Wait until ``count`` lines with ``key`` arrived (or the child ended)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                found = [line for line in self.lines if key in line]
                if len(found) >= count or not self._reader.is_alive():
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"child gave no {count} {key!r} lines in {timeout_s} s; stderr: {self.stderr()}"
                self._cond.wait(left)

    def kill(self) -> None:
        """SIGKILL the child; it must still have been running (not died on its own)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        code = self.proc.wait(30)
        self._reader.join(30)
        assert code == -signal.SIGKILL, f"the child ended by itself ({code}): {self.stderr()}"

    def finish(self, timeout_s: float = 60.0) -> int:
        code = self.proc.wait(timeout_s)
        self._reader.join(timeout_s)
        return code

    def stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.poll() is not None else "(still running)"  # type: ignore[union-attr]

    def acks(self) -> list[list]:
        return [row for line in self.lines if "ack" in line for row in line["ack"]]


def open_child_store(store_dir: Path, **settings) -> tuple[MessageStore, object]:
    store = MessageStore(child_config(str(store_dir), **settings), store_host=STORE_HOST)
    return store, store.start()


def check_survivors(store: MessageStore, acked: dict[int, list], where: str) -> None:
    """Every acknowledged record reads back byte for byte, queue offsets are dense from
    min to max, and nothing past the valid end of the CommitLog is served."""
    end = store.max_physical_offset
    for phys, queue_offset, queue_id, size, sha, body in acked.values():
        raw = store.read_record(phys)
        assert raw is not None and hashlib.sha1(raw).hexdigest() == sha, f"record at {phys} lost; {where}"
        rec = decode_record(raw)
        assert (rec.queue_id, rec.queue_offset, rec.body.hex()) == (queue_id, queue_offset, body), where
        assert phys + size <= end, where
    for q in range(QUEUES):
        low, high = store.get_min_offset(TOPIC, q), store.get_max_offset(TOPIC, q)
        seen, offset = [], low
        while offset < high:
            result = store.get_messages(TOPIC, q, offset, 32)
            for rec in decode_records(b"".join(bytes(b) for b in result.buffers)):
                assert rec.commit_log_offset + rec.store_size <= end, where
                seen.append(rec.queue_offset)
            offset = result.next_begin_offset
        assert seen == list(range(low, high)), f"queue {q} offsets not dense; {where}"
        if high:
            assert store.get_messages(TOPIC, q, high, 32).status is GetStatus.OFFSET_OVERFLOW_ONE, where
    assert store.read_record(end) is None, where
