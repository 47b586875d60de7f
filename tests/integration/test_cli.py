"""The `skiff` admin and try-out commands as subprocesses against a real cluster:
exit codes, parsed ``--json`` output, tables, and the reasons errors print."""

from __future__ import annotations

import json
import subprocess

import pytest

from skiff.testing.cluster import Cluster
from skiff.testing.processes import skiff_command

TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("cli")) as c:
        yield c


def skiff(cluster: Cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(skiff_command([*args, "-n", cluster.namesrv_addr]), input=stdin, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


def ok_json(cluster: Cluster, *args: str, stdin: str | None = None):
    done = skiff(cluster, *args, "--json", stdin=stdin)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_cluster_and_topic_commands(cluster: Cluster):
    brokers = ok_json(cluster, "cluster", "list")
    assert [(b["broker_name"], b["addr"], b["version"]) for b in brokers] == [
        ("broker-a", cluster.broker_addr(0), "V4_9_7")]
    created = ok_json(cluster, "topic", "create", "-t", "C-topic", "-q", "2")
    assert created == {"topic": "C-topic", "brokers": [cluster.broker_addr(0)]}
    assert "C-topic" in ok_json(cluster, "topic", "list")
    route = ok_json(cluster, "topic", "route", "-t", "C-topic")
    assert [(q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]] == [("broker-a", 2)]
    table = skiff(cluster, "topic", "status", "-t", "C-topic")
    assert table.returncode == 0 and table.stdout.splitlines()[0].split()[:3] == ["BROKER", "QUEUE", "MIN"]
    assert len(table.stdout.splitlines()) == 3
    assert ok_json(cluster, "topic", "delete", "-t", "C-topic")["brokers"] == [cluster.broker_addr(0)]
    gone = skiff(cluster, "topic", "route", "-t", "C-topic")
    assert gone.returncode == 1 and "no route for topic 'C-topic'" in gone.stderr


def test_send_consume_progress_query_and_reset(cluster: Cluster):
    ok_json(cluster, "topic", "create", "-t", "C-flow", "-q", "2")
    sent = ok_json(cluster, "send", "-t", "C-flow", "--tags", "T1", "--keys", "k1", "--keys", "k2",
                   "-p", "region=eu", "--count", "3", "hello")
    assert [s["send_status"] for s in sent] == ["SEND_OK"] * 3
    piped = ok_json(cluster, "send", "-t", "C-flow", "--tags", "T2", "-", stdin="from stdin")
    consumed = skiff(cluster, "consume", "-t", "C-flow", "-g", "CG-cli", "--from-beginning", "--count", "4",
                     "--timeout-s", "20", "--json")
    assert consumed.returncode == 0, consumed.stderr
    lines = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert sorted(m["msg_id"] for m in lines) == sorted(s["msg_id"] for s in sent + piped)
    hello = [m for m in lines if m["body"] == "hello"]
    assert len(hello) == 3 and all(m["tags"] == "T1" and m["keys"] == ["k1", "k2"] and
                                   m["properties"]["region"] == "eu" for m in hello)

    progress = ok_json(cluster, "consumer", "progress", "-g", "CG-cli")
    assert progress["total_lag"] == 0 and sum(q["consumer_offset"] for q in progress["queues"]) == 4
    again = skiff(cluster, "consume", "-t", "C-flow", "-g", "CG-cli", "--count", "1", "--timeout-s", "1")
    assert again.returncode == 1 and "received 0 of 1" in again.stderr  # the group already consumed everything

    tagged = skiff(cluster, "consume", "-t", "C-flow", "--from-beginning", "--tags", "T2", "--count", "1",
                   "--timeout-s", "20")
    assert tagged.returncode == 0 and "from stdin" in tagged.stdout and "hello" not in tagged.stdout

    found = ok_json(cluster, "message", "query", "--id", sent[0]["offset_msg_id"])
    assert found[0]["body"] == "hello" and found[0]["msg_id"] == sent[0]["msg_id"]
    by_uniq = ok_json(cluster, "message", "query", "--id", sent[1]["msg_id"], "-t", "C-flow")
    assert by_uniq[0]["offset_msg_id"] == sent[1]["offset_msg_id"]
    by_key = ok_json(cluster, "message", "query", "--key", "k2", "-t", "C-flow")
    assert sorted(m["msg_id"] for m in by_key) == sorted(s["msg_id"] for s in sent)
    q = piped[0]["message_queue"]
    at = ok_json(cluster, "message", "query", "-t", "C-flow", "-b", q["broker_name"], "-q", str(q["queue_id"]),
                 "--offset", str(piped[0]["queue_offset"]))
    assert at[0]["body"] == "from stdin"
    detail = skiff(cluster, "message", "query", "--id", sent[0]["offset_msg_id"])
    assert detail.returncode == 0 and "region=eu" in detail.stdout

    reset = ok_json(cluster, "consumer", "reset-offset", "-g", "CG-cli", "-t", "C-flow", "--timestamp", "0")
    assert sorted(r["offset"] for r in reset) == [0, 0]
    assert ok_json(cluster, "consumer", "progress", "-g", "CG-cli")["total_lag"] == 4


def test_consumer_group_commands_and_errors(cluster: Cluster):
    created = ok_json(cluster, "consumer", "create", "-g", "CG-made", "--retry-max-times", "5")
    assert created["brokers"] == [cluster.broker_addr(0)]
    offline = skiff(cluster, "consumer", "connections", "-g", "CG-made")
    assert offline.returncode == 1 and "CONSUMER_NOT_ONLINE" in offline.stderr
    assert ok_json(cluster, "consumer", "delete", "-g", "CG-made")["group"] == "CG-made"
    bad = skiff(cluster, "send", "-t", "bad topic", "x")
    assert bad.returncode == 2 and "characters other than" in bad.stderr
    refused = skiff(cluster, "send", "-t", "TBW102", "x")
    assert refused.returncode == 2 and "system topic" in refused.stderr
    no_topic = skiff(cluster, "message", "query", "--key", "k")
    assert no_topic.returncode == 2 and "give the topic" in no_topic.stderr
    bad_time = skiff(cluster, "consumer", "reset-offset", "-g", "G", "-t", "T", "--timestamp", "yesterday")
    assert bad_time.returncode == 2 and "not ms since the epoch" in bad_time.stderr
    nobody = subprocess.run(skiff_command(["topic", "list", "-n", "127.0.0.1:1"]), capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    assert nobody.returncode == 1 and "no NameServer answered" in nobody.stderr
