"""The tier tests' store on a manual clock (compaction and retention steps are timed by it), and a
tier backend of each kind (a directory, a bucket of moto's S3 server started once per module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.common.clock import ManualClock
from skiff.store import MessageStore
from skiff.testing.s3 import S3Server, moto_s3
from skiff.tier.backends import FilesystemBackend, S3Backend, TierBackend
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


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3() as server:
        yield server


@pytest.fixture(params=["file", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> TierBackend:
    """Each test that asks for it runs on both backends (a bucket of its own on S3)."""
    if request.param == "file":
        return FilesystemBackend(str(tmp_path))
    server: S3Server = request.getfixturevalue("s3")
    return S3Backend(server.bucket(f"tier-{abs(hash(request.node.name)) % 10**8}"), "c", client=server.client())
