"""The broker's JSON tables on disk (topics, subscription groups, consumer offsets),
written atomically: a temporary file, fsync, rename over the old one, fsync the
directory. A crash leaves the old file or the new one, never a torn mix.

Files live under ``<storePathRootDir>/config/``, as RocketMQ keeps them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from skiff.common.clock import Clock
from skiff.common.errors import CorruptionError
from skiff.common.files import replace_atomically
from skiff.protocol import fastjson
from skiff.protocol.bodies.admin import DataVersion

log = logging.getLogger(__name__)

CONFIG_DIR = "config"


class JsonFile:
    """One JSON document at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def in_store(cls, store_root: str, name: str) -> JsonFile:
        return cls(os.path.join(store_root, CONFIG_DIR, name))

    def load(self) -> Any | None:
        """The document, or None when there is no file yet; `CorruptionError` names a bad one."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if not data.strip():
            return None
        try:
            return fastjson.loads(data)
        except fastjson.JsonDecodeError as exc:
            raise CorruptionError(f"{self.path} is not valid JSON ({exc}); fix or remove it") from None

    def save(self, data: bytes) -> None:
        """Replace the file with ``data`` atomically and durably."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        replace_atomically(self.path, data)


Documents = tuple[tuple[JsonFile, bytes], ...]
"""What a `WrittenWhenChanged` snapshot holds: each file with its new content."""


class WrittenWhenChanged:
    """State changed often in memory and written to its files every so often when it changed
    (consumer offsets, POP state). Changes call `changed`; `snapshot` takes the documents on the
    event loop, where the changes happen, and clears the mark; `write` saves them (fsyncs: on a
    thread); a failed write marks the state changed again, so the next round writes it."""

    _dirty = False

    def changed(self) -> None:
        self._dirty = True

    def documents(self) -> Documents:
        """The state as its files hold it."""
        raise NotImplementedError

    def snapshot(self) -> Documents | None:
        """The documents if the state changed since the last snapshot, else None."""
        if not self._dirty:
            return None
        self._dirty = False
        return self.documents()

    def write(self, data: Documents) -> None:
        try:
            for file, content in data:
                file.save(content)
        except BaseException:
            self._dirty = True
            raise

    def persist(self) -> bool:
        """Write now if changed (blocking); True when it did."""
        data = self.snapshot()
        if data is None:
            return False
        self.write(data)
        return True


class VersionedTable:
    """A table stamped with a DataVersion and saved whole after every change."""

    def __init__(self, store_root: str, file_name: str, clock: Clock) -> None:
        self.clock = clock
        self.file = JsonFile.in_store(store_root, file_name)
        self.data_version = DataVersion(clock.now_ms(), 0)

    _table: dict[str, Any]

    def document(self) -> bytes:
        """The table as the file holds it."""
        raise NotImplementedError

    def replace(self, table: Mapping[str, Any], version: DataVersion) -> bool:
        """Take a master's table whole when its version differs from this one (a slave's
        sync, as RocketMQ's SlaveSynchronize); True when it changed."""
        if version == self.data_version:
            return False
        self._table = dict(table)
        self.data_version = version
        self.file.save(self.document())
        log.info("%s taken from the master (data version %d)", os.path.basename(self.file.path), version.counter)
        return True

    def changed(self, what: str) -> None:
        """Bump the version, save the table, log ``what``."""
        self.data_version = self.data_version.next(self.clock.now_ms())
        self.file.save(self.document())
        log.info("%s (data version %d)", what, self.data_version.counter)
