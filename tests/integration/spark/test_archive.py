"""skiff export and skiff replay, run as commands in the test's Spark session: a topic range
to Parquet partitioned by store date, and back into another topic with idempotent ids, so a
second replay sends every row again with the same id (each row once, after dropping seen ids)."""

from __future__ import annotations

import datetime
from collections import Counter

import pytest

from skiff.cli.main import main
from skiff.client import Message
from skiff.columnar.schema import HIDDEN_PROPERTIES
from tests.integration.spark.kit import create_topic, pull_all, send

pytestmark = pytest.mark.spark


def content(messages) -> Counter:
    return Counter((m.body, m.tags, m.get_property("KEYS"),
                    tuple(sorted((k, v) for k, v in m.properties.items() if k not in HIDDEN_PROPERTIES)))
                   for m in messages)


def test_export_then_replay_keeps_every_row_once(spark, cluster, tmp_path, capsys):
    ns = cluster.namesrv_addr
    source, target = create_topic(ns, "export", queues=2), create_topic(ns, "replayed", queues=2)
    send(ns, [Message.of(source, f"order-{i}", tags="paid" if i % 3 else None, keys=f"o{i}",
                         properties={"amount": str(i * 10)}) for i in range(30)])
    stored = [m for _, m in pull_all(ns, source)]
    out = tmp_path / "archive"
    assert main(["export", "-n", ns, "-t", source, "-o", str(out)]) == 0
    assert "the archive holds 30 rows" in capsys.readouterr().err
    days = {datetime.datetime.fromtimestamp(m.store_timestamp / 1000, datetime.timezone.utc).date() for m in stored}
    assert sorted(p.name for p in out.glob("date=*")) == sorted(f"date={d.isoformat()}" for d in days)
    archived = spark.read.parquet(str(out)).collect()
    assert sorted(r.msg_id for r in archived) == sorted(m.msg_id for m in stored)

    assert main(["export", "-n", ns, "-t", source, "-o", str(out)]) == 1
    assert "already exists" in capsys.readouterr().err

    assert main(["replay", "-n", ns, "-i", str(out), "-t", target, "--write-id", "backfill-1"]) == 0
    first = [m for _, m in pull_all(ns, target)]
    assert content(first) == content(stored)
    assert len({m.msg_id for m in first}) == 30
    assert main(["replay", "-n", ns, "-i", str(out), "-t", target, "--write-id", "backfill-1"]) == 0
    again = [m for _, m in pull_all(ns, target)]
    assert len(again) == 60 and {m.msg_id for m in again} == {m.msg_id for m in first}
    tomorrow = (max(days) + datetime.timedelta(days=1)).isoformat()
    assert main(["replay", "-n", ns, "-i", str(out), "-t", target, "--write-id", "x", "--from-date", tomorrow]) == 0
    assert "replayed 0 rows" in capsys.readouterr().err
    assert main(["replay", "-n", ns, "-i", str(tmp_path / "missing"), "-t", target, "--write-id", "x"]) == 1
    assert "skiff: [PATH_NOT_FOUND]" in capsys.readouterr().err
