"""`skiff consume -g GROUP` is the group the brokers see: its pulls (the metrics'
consumer_group label), its heartbeats (`skiff consumer connections`, the group list), the
trace and an admin's offset reset; `skiff message trace` prints a table per message; and
`-n` pointed at a broker says it is a broker. Real processes on free 127.0.0.1 ports."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from skiff.client import Admin
from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port, skiff_command
from skiff.testing.waits import wait_for

TIMEOUT_S = 60
GROUP = "my-group"


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("cli-group"), broker_args=[f"--metricsPort={metrics_port}"]) as c:
        yield c


def skiff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(skiff_command(list(args)), capture_output=True, text=True, timeout=TIMEOUT_S)


def start_consume(cluster: Cluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(skiff_command(["consume", *args, "-n", cluster.namesrv_addr]), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], failed: bool = False) -> tuple[int, str, str]:
    """Wait for ``proc`` to end (kill it at once when the test already ``failed``)."""
    if failed:
        proc.kill()
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err


def connections(cluster: Cluster, group: str) -> dict | None:
    done = skiff("consumer", "connections", "-g", group, "--json", "-n", cluster.namesrv_addr)
    return json.loads(done.stdout) if done.returncode == 0 else None


def messages_out(port: int, topic: str) -> dict[str, float]:
    """rocketmq_messages_out_total of ``topic`` by consumer_group."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {s.labels["consumer_group"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "rocketmq_messages_out_total" and s.labels.get("topic") == topic}


def traced_groups(cluster: Cluster, msg_id: str) -> list[tuple[str, str]]:
    done = skiff("message", "trace", msg_id, "--json", "-n", cluster.namesrv_addr)
    return [(e["kind"], e["group"]) for e in json.loads(done.stdout)] if done.returncode == 0 else []


def test_the_named_group_is_what_the_broker_sees(cluster: Cluster, metrics_port: int) -> None:
    ns = cluster.namesrv_addr
    assert skiff("topic", "create", "-t", "G-topic", "-q", "2", "-n", ns).returncode == 0
    proc = start_consume(cluster, "-t", "G-topic", "-g", GROUP, "--tags", "a || b", "--count", "1",
                         "--timeout-s", str(TIMEOUT_S))
    try:
        live = wait_for(lambda: connections(cluster, GROUP), 30, f"{GROUP} among the broker's consumers")
        assert len(live["connections"]) == 1
        assert live["consume_type"] == "CONSUME_ACTIVELY" and live["message_model"] == "CLUSTERING"
        assert live["subscriptions"]["G-topic"]["subString"] == "a || b"
        with Admin(ns) as admin:
            assert GROUP in admin.consumer_groups()
        sent = json.loads(skiff("send", "-t", "G-topic", "--tags", "a", "--keys", "gk", "hello", "--json",
                                "-n", ns).stdout)
    except BaseException:
        finish(proc, failed=True)
        raise
    code, out, err = finish(proc)
    assert code == 0, err
    assert sent[0]["msg_id"] in out and "hello" in out

    pulled = messages_out(metrics_port, "G-topic")
    assert pulled.get(GROUP, 0) >= 1 and "SKIFF_PULL_CLIENT" not in pulled, pulled
    assert wait_for(lambda: ("consume", GROUP) in traced_groups(cluster, sent[0]["msg_id"]), 30,
                    "the consumption traced under the group")
    assert wait_for(lambda: connections(cluster, GROUP) is None, 30, "the group left when skiff consume ended")


def test_without_a_group_nothing_joins_and_nothing_is_traced(cluster: Cluster, metrics_port: int) -> None:
    ns = cluster.namesrv_addr
    assert skiff("topic", "create", "-t", "G-anon", "-q", "1", "-n", ns).returncode == 0
    sent = json.loads(skiff("send", "-t", "G-anon", "anon", "--json", "-n", ns).stdout)
    code, out, err = finish(start_consume(cluster, "-t", "G-anon", "--from-beginning", "--count", "1",
                                          "--timeout-s", str(TIMEOUT_S)))
    assert code == 0 and "anon" in out, err
    assert set(messages_out(metrics_port, "G-anon")) == {"SKIFF_PULL_CLIENT"}
    assert traced_groups(cluster, sent[0]["msg_id"]) == [("send", "SKIFF_CLI_PRODUCER")]


def test_an_offset_reset_reaches_a_running_consume(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    assert skiff("topic", "create", "-t", "G-reset", "-q", "1", "-n", ns).returncode == 0
    assert skiff("send", "-t", "G-reset", "first", "-n", ns).returncode == 0
    code, out, err = finish(start_consume(cluster, "-t", "G-reset", "-g", "reset-group", "--from-beginning",
                                          "--count", "1", "--timeout-s", str(TIMEOUT_S)))
    assert code == 0 and "first" in out, err  # committed past it
    proc = start_consume(cluster, "-t", "G-reset", "-g", "reset-group", "--count", "1", "--timeout-s",
                         str(TIMEOUT_S))
    try:
        wait_for(lambda: connections(cluster, "reset-group"), 30, "the second consume running")
        reset = skiff("consumer", "reset-offset", "-g", "reset-group", "-t", "G-reset", "--timestamp", "0",
                      "-n", ns)
        assert reset.returncode == 0, reset.stderr
    except BaseException:
        finish(proc, failed=True)
        raise
    code, out, err = finish(proc)
    assert code == 0 and "first" in out, err  # read again from where the reset put the group
    progress = json.loads(skiff("consumer", "progress", "-g", "reset-group", "--json", "-n", ns).stdout)
    assert progress["queues"][0]["consumer_offset"] == 1


def test_trace_of_a_shared_key_has_a_table_per_message(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    assert skiff("topic", "create", "-t", "G-keys", "-q", "2", "-n", ns).returncode == 0
    sent = json.loads(skiff("send", "-t", "G-keys", "--keys", "shared-key", "--count", "2", "x", "--json",
                            "-n", ns).stdout)
    ids = [s["msg_id"] for s in sent]

    def sections() -> list[str] | None:
        done = skiff("message", "trace", "shared-key", "-n", ns)
        parts = done.stdout.strip().split("\n\n") if done.returncode == 0 else []
        return parts if len(parts) == 2 else None

    parts = wait_for(sections, 30, "both messages traced")
    assert sorted(p.splitlines()[0] for p in parts) == sorted(
        f"{i}: topic G-keys, tags -, keys shared-key" for i in ids)
    for part in parts:
        lines = part.splitlines()
        assert lines[1].split()[:2] == ["TIME", "EVENT"] and len(lines) == 3 and " send " in lines[2]


def test_a_broker_address_as_nameserver_says_so(cluster: Cluster) -> None:
    broker = cluster.broker_addr(0)
    for args, code in ((["topic", "route", "-t", "G-topic"], 105), (["cluster", "list"], 106),
                       (["topic", "list"], 206), (["consume", "-t", "G-topic", "--timeout-s", "1"], 105)):
        done = skiff(*args, "-n", broker)
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip() == (
            f"skiff: {broker} is not a NameServer (it answered request code {code} as unsupported, as a broker "
            f"does): -n takes the NameServer's address, e.g. 127.0.0.1:9876"), done.stderr
    # a topic of this test's own: the module's tests may run on other workers, each with its cluster
    assert skiff("topic", "create", "-t", "G-route", "-q", "1", "-n", cluster.namesrv_addr).returncode == 0
    mixed = skiff("topic", "route", "-t", "G-route", "--json", "-n", f"{broker};{cluster.namesrv_addr}")
    assert mixed.returncode == 0, mixed.stderr  # the list's real NameServer answers
