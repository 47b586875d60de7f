"""A filesystem tier that counts what it serves, for tests of what a read fetches."""

from __future__ import annotations

from skiff.tier.backends import FilesystemBackend


class CountingBackend(FilesystemBackend):
    """A filesystem tier that remembers what was fetched: whole objects and ranges."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.gets: list[str] = []
        self.ranges: list[tuple[str, int, int]] = []

    def get(self, key: str) -> bytes:
        self.gets.append(key)
        return super().get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self.ranges.append((key, start, length))
        return super().get_range(key, start, length)
