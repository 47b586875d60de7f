"""ConsumerOffsetManager: the offset each consumer group has committed per queue.

Commits arrive often (every pull of a push consumer carries one, and clients
send UPDATE_CONSUMER_OFFSET every 5 s), so they only change memory; the table is
written to ``config/consumerOffset.json`` every ``flushConsumerOffsetInterval``
and at shutdown, atomically. The file has RocketMQ's form (a Java broker's
file, whose queue ids are unquoted numbers, reads here too)::

    {"offsetTable": {"TopicA@GroupA": {"0": 120, "1": 98}}}

On a slave the offsets consumers committed there, which its master has not caught
up with yet (`local`), go to ``config/slaveConsumerOffset.json`` in the same form
with each write, so a slave restarted while its master is still down still gives
them back when the master returns (docs/replication.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.broker.persist import Documents, JsonFile, WrittenWhenChanged
from skiff.protocol.bodies.base import JsonBody

FILE_NAME = "consumerOffset.json"
LOCAL_FILE_NAME = "slaveConsumerOffset.json"
KEY_SEPARATOR = "@"


@dataclass(frozen=True, slots=True)
class ConsumerOffsetTable(JsonBody):
    offset_table: Mapping[str, Mapping[int, int]] = field(default_factory=dict)


class ConsumerOffsetManager(WrittenWhenChanged):
    def __init__(self, store_root: str) -> None:
        self._file = JsonFile.in_store(store_root, FILE_NAME)
        self._local_file = JsonFile.in_store(store_root, LOCAL_FILE_NAME)
        self._table: dict[tuple[str, str], dict[int, int]] = {}
        self.local: dict[tuple[str, str, int], int] = {}

    def load(self) -> None:
        self._table = _read(self._file, FILE_NAME)
        local = _read(self._local_file, LOCAL_FILE_NAME)
        self.local = {(group, topic, q): offset for (group, topic), queues in local.items() for q, offset in queues.items()}

    def documents(self) -> Documents:
        """The table, and on a slave (`track_local`) its own commits too."""
        table = ((self._file, self.table().to_json()),)
        if not self.track_local:
            return table
        local: dict[tuple[str, str], dict[int, int]] = {}
        for (group, topic, queue_id), offset in self.local.items():
            local.setdefault((group, topic), {})[queue_id] = offset
        return (*table, (self._local_file, _as_table(local).to_json()))

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self._table.get((group, topic))
        if queues is None:
            queues = self._table[(group, topic)] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.changed()
            if self.track_local:
                self.local[(group, topic, queue_id)] = offset

    track_local = False
    """On a slave: remember commits consumers make here (`local`), so a sync from the
    master neither loses them nor lets the master's older offsets overwrite them."""

    def table(self) -> ConsumerOffsetTable:
        """The whole table (GET_ALL_CONSUMER_OFFSET's answer)."""
        return _as_table(self._table)

    def merge_master(self, master: ConsumerOffsetTable) -> None:
        """A slave takes its master's offsets, except where a consumer committed a larger
        one here that the master has not caught up with yet."""
        for key, queues in master.offset_table.items():
            topic, sep, group = key.rpartition(KEY_SEPARATOR)
            if not sep:
                continue
            for queue_id, offset in queues.items():
                local = self.local.get((group, topic, queue_id))
                if local is not None and local > offset:
                    continue
                if self.local.pop((group, topic, queue_id), None) is not None:
                    self.changed()
                mine = self._table.setdefault((group, topic), {})
                if mine.get(queue_id) != offset:
                    mine[queue_id] = offset
                    self.changed()

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when the group never committed one for this queue."""
        queues = self._table.get((group, topic))
        return None if queues is None else queues.get(queue_id)

    def entries(self) -> list[tuple[str, str, int, int]]:
        """Every committed offset as (group, topic, queue id, offset): what lag metrics read."""
        return [(g, t, q, o) for (g, t), queues in self._table.items() for q, o in queues.items()]

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get((group, topic), {}))

    def topics_of(self, group: str) -> list[str]:
        return sorted(t for g, t in self._table if g == group)

    def groups_of(self, topic: str) -> list[str]:
        return sorted(g for g, t in self._table if t == topic)

    def remove_group(self, group: str) -> None:
        self._remove([k for k in self._table if k[0] == group])

    def remove_topic(self, topic: str) -> None:
        self._remove([k for k in self._table if k[1] == topic])

    def _remove(self, keys: list[tuple[str, str]]) -> None:
        for key in keys:
            del self._table[key]
        if keys:
            self.changed()


def _read(file: JsonFile, name: str) -> dict[tuple[str, str], dict[int, int]]:
    raw = file.load()
    if raw is None:
        return {}
    table = {}
    for key, queues in ConsumerOffsetTable.from_obj(raw, name).offset_table.items():
        topic, sep, group = key.rpartition(KEY_SEPARATOR)
        if sep:
            table[(group, topic)] = dict(queues)
    return table


def _as_table(table: Mapping[tuple[str, str], Mapping[int, int]]) -> ConsumerOffsetTable:
    return ConsumerOffsetTable({f"{topic}{KEY_SEPARATOR}{group}": dict(queues)
                                for (group, topic), queues in table.items()})
