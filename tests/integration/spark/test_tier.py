"""The skiff source over a tiered topic: old offsets read by the executors straight from the
tier's Parquet files, recent ones pulled from the broker, and the whole equal row for row to
what a read through the broker alone gave while everything was still local; the tier's
directory also reads with plain ``spark.read.parquet``.

The broker keeps 64 KiB CommitLog files and deletes what retention allows at once; the
topic's retention.local.ms keeps its files until the reference read is done, then is set to
0, and the uploaded part goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql.datasource import InputPartition

from skiff.client import Admin, Message
from skiff.spark.options import SourceOptions
from skiff.spark.source import SkiffBatchReader
from skiff.spark.tier_plan import TierRange
from skiff.testing.cluster import Cluster
from skiff.testing.processes import run_skiff
from skiff.testing.waits import wait_for
from tests.integration.spark.kit import reader, send, topic_name

pytestmark = pytest.mark.spark

EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
ORDER = ["queue_id", "queue_offset"]


@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[tuple[Cluster, Path]]:
    tier = tmp_path / "tier"
    args = [f"--tierStorageUrl=file://{tier}", "--tierSealMs=1", "--tierUploadIntervalMs=3600000",
            "--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}", "--cleanResourceInterval=100",
            "--mappedFileSizeCommitLog=65536"]
    with Cluster(tmp_path / "cluster", broker_args=args) as running:
        yield running, tier


def skiff_ok(*args: str) -> None:
    done = run_skiff(list(args))
    assert done.returncode == 0, done.stdout


def test_a_read_spanning_tier_and_broker_equals_the_broker_read_row_for_row(spark, tiered) -> None:
    cluster, tier = tiered
    ns = cluster.namesrv_addr
    topic = topic_name("tiered")
    skiff_ok("topic", "create", "-t", topic, "-q", "2", "-n", ns, "--attr", "tiered.storage=true",
             "--attr", "retention.local.ms=3600000")
    old = [Message.of(topic, f"old-{i}-".encode() * 60, keys=f"k{i}", tags=f"t{i % 3}", properties={"n": str(i)})
           for i in range(240)]
    send(ns, old)
    with Admin(ns) as admin:
        # the uploader's pass now, not at its interval; a pass uploads what is flushed, so the last
        # sends may need the next one
        wait_for(lambda: sum(q.uploaded_to for q in admin.tier(topic, upload=True)[0].state.queues) == 240,
                 60, "the upload of every old message (once flushed)")
        send(ns, [Message.of(topic, f"new-{i}", keys=f"n{i}") for i in range(30)])  # only on the broker
        through_broker = reader(spark, ns, topic).orderBy(*ORDER).collect()
        assert len(through_broker) == 270

        skiff_ok("topic", "update", "-t", topic, "-q", "2", "-n", ns, "--attr", "retention.local.ms=0")
        mins = wait_for(lambda: (lambda m: m if all(m) else None)(
            [q.local_min_offset for q in admin.tier(topic)[0].state.queues]), 60,
            "retention to delete the uploaded files")
        assert [q.min_offset for q in admin.topic_status(topic)] == [0, 0]  # the queues start in the tier

    options = {"namesrvAddr": ns, "topic": topic, "tierUrl": f"file://{tier}"}
    plan: list[InputPartition] = list(SkiffBatchReader(SourceOptions.parse(options)).partitions())
    tier_ends = {}
    for p in sorted((p for p in plan if isinstance(p, TierRange)), key=lambda p: (p.queue_id, p.start)):
        assert p.start == tier_ends.get(p.queue_id, 0), plan  # each queue's tier ranges follow on from 0
        tier_ends[p.queue_id] = p.end
    assert sorted(tier_ends) == [0, 1] and [tier_ends[q] >= low for q, low in enumerate(mins)] == [True, True], plan

    spanning = reader(spark, ns, topic, tierUrl=f"file://{tier}").orderBy(*ORDER).collect()
    assert spanning == through_broker
    # without tierUrl the broker serves the same offsets, the old ones through its tier reads
    assert reader(spark, ns, topic).orderBy(*ORDER).collect() == through_broker

    plain = spark.read.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet")
    history = plain.parquet(str(tier / topic)).select(*through_broker[0].__fields__).orderBy(*ORDER).collect()
    assert history == [r for r in through_broker if r.body.startswith(b"old-")]


def test_a_compacted_tiered_topic_reads_as_the_broker_served_it_row_for_row(spark, tiered) -> None:
    """A compacted topic whose history is partly in the tier: two compactions uploaded (the
    second's keys taken out of the first's files), the uploaded part of the compacted segments
    then trimmed from the disk, and dirty records only on the broker. The source with ``tierUrl``
    (the tier's files, then the broker) and without (the broker, through its tier reads) equal the
    read made through the broker while everything was local, row for row, gaps and all."""
    cluster, tier = tiered
    ns = cluster.namesrv_addr
    topic = topic_name("compacted-tiered")
    skiff_ok("topic", "create", "-t", topic, "-q", "2", "-n", ns, "--cleanup-policy", "compaction",
             "--attr", "tiered.storage=true", "--attr", "retention.local.ms=3600000")
    with Admin(ns) as admin:

        def compacted_and_uploaded() -> bool:  # compaction and upload take what is flushed by then
            (c,) = admin.compaction(topic, run=True)
            (t,) = admin.tier(topic, upload=True)
            return all(q.cleaned_offset == q.max_offset for q in c.state.queues) and all(
                q.uploaded_to == q.local_max_offset for q in t.state.queues)

        for batch, keys in ((0, 10), (1, 5)):
            send(ns, [Message.of(topic, f"b{batch}-{i}".encode() * 20, keys=f"k{i % keys}", tags=f"t{i % 3}",
                                 properties={"n": str(i)}) for i in range(60)])
            wait_for(compacted_and_uploaded, 60, f"batch {batch} compacted and uploaded")
        send(ns, [Message.of(topic, f"dirty-{i}", keys=f"k{i % 5}") for i in range(10)])  # only on the broker
        through_broker = reader(spark, ns, topic).orderBy(*ORDER).collect()
        assert 10 < len(through_broker) < 130  # compaction left gaps

        skiff_ok("topic", "update", "-t", topic, "-q", "2", "-n", ns, "--attr", "retention.local.ms=0")
        queues = wait_for(lambda: (lambda qs: qs if all(q.local_min_offset == q.uploaded_to > 0 for q in qs) else None)(
            admin.tier(topic, upload=True)[0].state.queues), 60, "the uploaded part of the compacted segments to leave the disk")
        # the queues start in the tier, at its first kept record
        assert [q.min_offset for q in admin.topic_status(topic)] == [q.first_remote_offset for q in queues]
        assert all(0 <= q.first_remote_offset < q.local_min_offset for q in queues), queues

    replaced = [f for f in (tier / topic).rglob("*.parquet") if f.name.count(".") == 2]
    assert replaced, "no tiered file was rewritten without the keys the second batch superseded"
    options = {"namesrvAddr": ns, "topic": topic, "tierUrl": f"file://{tier}"}
    plan = list(SkiffBatchReader(SourceOptions.parse(options)).partitions())
    assert {p.queue_id for p in plan if isinstance(p, TierRange)} == {0, 1}, plan
    assert reader(spark, ns, topic, tierUrl=f"file://{tier}").orderBy(*ORDER).collect() == through_broker
    assert reader(spark, ns, topic).orderBy(*ORDER).collect() == through_broker


def test_export_copies_the_tiered_files_and_equals_the_export_through_the_broker(spark, tiered, tmp_path,
                                                                                 capsys) -> None:
    """``skiff export`` of a tiered topic copies the tier's files that lie wholly in one day of
    the range byte for byte and reads only the rest; read back, it is the export made through the
    broker alone, row for row."""
    from skiff.cli.main import main

    cluster, tier = tiered
    ns = cluster.namesrv_addr
    topic = topic_name("exported")
    skiff_ok("topic", "create", "-t", topic, "-q", "2", "-n", ns, "--attr", "tiered.storage=true",
             "--attr", "retention.local.ms=3600000")
    with Admin(ns) as admin:
        for batch in range(2):  # two uploads at least: two files per queue or more
            send(ns, [Message.of(topic, f"b{batch}-{i}", keys=f"k{batch}-{i}", properties={"n": str(i)})
                      for i in range(40)])
            wait_for(lambda: sum(q.uploaded_to for q in admin.tier(topic, upload=True)[0].state.queues) == 40 * (batch + 1),
                     60, "the uploads of what was sent (once flushed)")
    send(ns, [Message.of(topic, f"new-{i}") for i in range(10)])  # only on the broker

    broker_out, tier_out = tmp_path / "through-broker", tmp_path / "from-tier"
    assert main(["export", "-n", ns, "-t", topic, "-o", str(broker_out), "--through-broker"]) == 0
    assert "the archive holds 90 rows" in capsys.readouterr().err
    assert main(["export", "-n", ns, "-t", topic, "-o", str(tier_out)]) == 0  # the tier the broker reports
    told = capsys.readouterr().err
    files = len(list((tier / topic).rglob("*.parquet")))
    assert f"the archive holds 90 rows (80 rows copied in {files} files from the tier file://" in told, told

    copies = sorted(tier_out.glob("date=*/tier-*.parquet"))
    assert len(copies) == files >= 4
    for c in copies:  # tier-<broker>-<queue>-<first>-<last>.parquet, the tier's file byte for byte
        _, queue, first, last = c.name.rsplit("-", 3)
        assert c.read_bytes() == (tier / topic / "broker-a" / queue / f"{first}-{last}").read_bytes()
    order = ["queue_id", "queue_offset"]
    columns = [*reader(spark, ns, topic).columns, "date"]
    exported = spark.read.parquet(str(tier_out)).select(*columns).orderBy(*order).collect()
    assert exported == spark.read.parquet(str(broker_out)).select(*columns).orderBy(*order).collect()
    assert len(exported) == 90 and spark.read.parquet(str(tier_out)).columns == columns
