"""The tier tests' store on a manual clock (compaction and retention steps are timed by it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.common.clock import ManualClock
from skiff.store import MessageStore
from tests.unit.store.conftest import StoreFactory


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[MessageStore]:
    factory = StoreFactory(tmp_path / "store")
    yield factory(clock, file_reserved_time=0)
    for s in factory.stores:
        s.shutdown()
