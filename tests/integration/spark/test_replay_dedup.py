"""`skiff replay` run twice into a topic with a duplicate window (``dedup.window.ms``): replay's
ids are the same on a re-run (its write id), so the broker stores each row once and the second
run's sends are answered with the first run's messages (skiff/broker/dedup.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from skiff.cli.main import main
from skiff.client import Admin, Message
from skiff.protocol.bodies.topic_attributes import DEDUP_WINDOW_MS
from tests.integration.spark.kit import create_topic, pull_all, send, topic_name

pytestmark = pytest.mark.spark


def test_replay_run_twice_into_a_dedup_topic_stores_each_row_once(spark, cluster, tmp_path, capsys):
    ns = cluster.namesrv_addr
    source, target = create_topic(ns, "dedup-export", queues=2), topic_name("dedup-replayed")
    with Admin(ns) as admin:  # one broker group: the window is a broker's (docs/kafka.md, deduplication)
        admin.create_topic(target, queue_nums=2, broker_addr=cluster.broker_addr(0),
                           attributes={DEDUP_WINDOW_MS: "600000"})
    send(ns, [Message.of(source, f"row-{i}", keys=f"r{i}") for i in range(40)])
    out = tmp_path / "archive"
    assert main(["export", "-n", ns, "-t", source, "-o", str(out)]) == 0
    for _ in range(2):
        assert main(["replay", "-n", ns, "-i", str(out), "-t", target, "--write-id", "dedup-1"]) == 0
        assert "replayed 40 rows" in capsys.readouterr().err
    stored = [m for _, m in pull_all(ns, target)]
    assert Counter(m.body for m in stored) == Counter(f"row-{i}".encode() for i in range(40))
    assert len({m.msg_id for m in stored}) == 40
    assert main(["replay", "-n", ns, "-i", str(out), "-t", target, "--write-id", "dedup-2"]) == 0  # new ids
    assert len(pull_all(ns, target)) == 80
