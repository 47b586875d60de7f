"""Offset stores: the in-memory table rules and the broadcasting consumer's local file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from skiff.client._impl.offset_store import (
    NO_OFFSET,
    LocalFileOffsetStore,
    ReadFrom,
    read_offsets_file,
    write_offsets_file,
)
from skiff.common.errors import CorruptionError
from skiff.common.message import MessageQueue

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
Q2 = MessageQueue("U", "broker-b", 0)


def test_update_rules() -> None:
    store = LocalFileOffsetStore(Path("unused.json"))
    assert store.read_memory(Q0) == NO_OFFSET
    store.update(Q0, 10)
    store.update(Q0, 5, increase_only=True)
    assert store.read_memory(Q0) == 10
    store.update(Q0, 5)
    assert store.read_memory(Q0) == 5
    store.update(Q0, -1)
    assert store.read_memory(Q0) == 5, "a negative offset is never stored"


def test_local_file_round_trip_and_backup(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = LocalFileOffsetStore.for_client(tmp_path, "127.0.0.1@DEFAULT", "G")
        assert store.path == tmp_path / "127.0.0.1@DEFAULT" / "G.json"
        await store.load()
        assert await store.read(Q0, ReadFrom.STORE) == NO_OFFSET
        store.update(Q0, 7)
        store.update(Q2, 3)
        await store.persist_all([Q0, Q2])
        store.update(Q0, 9)
        store.remove(Q0)  # broadcasting keeps what it had
        await store.persist(Q0)

        again = LocalFileOffsetStore(store.path)
        await again.load()
        assert again.table() == {Q0: 9, Q2: 3}
        assert read_offsets_file(store.path.with_name("G.json.bak")) == {Q0: 7, Q2: 3}

    asyncio.run(scenario())


def test_damaged_file_falls_back_to_backup(tmp_path: Path) -> None:
    path = tmp_path / "G.json"
    write_offsets_file(path, {Q0: 1})
    write_offsets_file(path, {Q0: 2, Q1: 4})
    path.write_bytes(b'{"offsetTable": [{"topic": "T"')  # a torn write by some other tool
    assert read_offsets_file(path) == {Q0: 1}


def test_both_files_damaged_is_an_error_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "G.json"
    path.write_bytes(b"not json")
    path.with_name("G.json.bak").write_bytes(orjson.dumps({"offsetTable": [
        {"topic": "T", "brokerName": "b", "queueId": 0, "offset": -4}]}))
    with pytest.raises(CorruptionError, match="G.json") as info:
        read_offsets_file(path)
    assert "G.json.bak" in str(info.value) and "non-negative" in str(info.value)


def test_missing_file_is_an_empty_table(tmp_path: Path) -> None:
    assert read_offsets_file(tmp_path / "none.json") == {}


def test_file_is_readable_json(tmp_path: Path) -> None:
    path = tmp_path / "G.json"
    write_offsets_file(path, {Q1: 12, Q0: 11})
    doc = orjson.loads(path.read_bytes())
    assert doc["offsetTable"] == [
        {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 11},
        {"topic": "T", "brokerName": "broker-a", "queueId": 1, "offset": 12},
    ]
    assert not path.with_name("G.json.tmp").exists()
