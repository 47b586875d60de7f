"""docs/kafka.md's version table is what ApiVersions advertises, API by API."""

from __future__ import annotations

import re
from pathlib import Path

from skiff.protocol.kafka.apis import APIS

DOC = (Path(__file__).resolve().parents[4] / "docs" / "kafka.md").read_text()


def test_the_version_table_is_what_is_advertised() -> None:
    documented: dict[int, tuple[int, int]] = {}
    for line in DOC.split("## Versions", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = line.split("|")
        if len(cells) < 3 or not re.search(r"\(\d+\)", cells[1]):
            continue
        keys = [int(k) for k in re.findall(r"\((\d+)\)", cells[1])]
        ranges = [(int(a), int(b)) for a, b in re.findall(r"(\d+)–(\d+)", cells[2])]
        assert len(keys) == len(ranges), line
        documented.update(zip(keys, ranges))
    assert documented == {int(key): (api.min_version, api.max_version) for key, api in APIS.items()}
