"""Master terms and the CommitLog offsets they start at, and where a replica that
joins a new master must cut its CommitLog.

Each election starts a term (epoch) at the new master's max offset: every byte
before it came from earlier terms, every byte after it from this one. The list
of ``(epoch, start offset)`` lives in etcd with the group's state and, as this
broker last saw it, in ``<storePathRootDir>/ha-epochs.json`` (RocketMQ 5.x keeps
the same list in ``epochFileCheckpoint``). A replica joining a master finds the
newest term both lists agree on (same epoch, same start); its bytes after the
end of that term on either side are a tail the new master never had (a demoted
master's unreplicated writes, or what a slave copied from it) and are cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import orjson

from skiff.broker.persist import JsonFile

Epochs = list[tuple[int, int]]

FILE_NAME = "ha-epochs.json"


def truncation_point(local: Sequence[tuple[int, int]], remote: Sequence[tuple[int, int]], local_end: int) -> int:
    """Where a replica with ``local`` terms and ``local_end`` bytes must cut its CommitLog to
    follow a master whose terms are ``remote`` (``local_end`` when nothing is cut).

    A replica that never followed a master in controller mode (no local terms) keeps
    what it has; so does one whose history shares no term with the master's (it is
    then told to start afresh by the master refusing its offset)."""
    remote_at = {epoch: (i, start) for i, (epoch, start) in enumerate(remote)}
    for i in range(len(local) - 1, -1, -1):
        epoch, start = local[i]
        found = remote_at.get(epoch)
        if found is None or found[1] != start:
            continue
        j = found[0]
        local_next = local[i + 1][1] if i + 1 < len(local) else local_end
        remote_next = remote[j + 1][1] if j + 1 < len(remote) else math.inf
        return int(min(local_next, remote_next, local_end))
    return local_end


class EpochFile:
    """This broker's copy of the term list, replaced atomically and durably."""

    def __init__(self, store_root: str) -> None:
        self._file = JsonFile(f"{store_root}/{FILE_NAME}")

    def load(self) -> Epochs:
        raw = self._file.load()
        return [] if raw is None else [(int(e), int(s)) for e, s in raw.get("epochs", [])]

    def save(self, epochs: Sequence[tuple[int, int]]) -> None:
        self._file.save(orjson.dumps({"epochs": [list(e) for e in epochs]}))
