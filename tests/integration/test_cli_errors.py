"""How `skiff` commands refuse bad input, against a real cluster: a bad argument exits 2 with
argparse's or the client's reason, a runtime failure exits 1, and neither waits for a
timeout it does not need (docs/cli.md, "Exit status")."""

from __future__ import annotations

import subprocess
import time

import pytest

from skiff.testing.cluster import Cluster
from skiff.testing.processes import skiff_command

TIMEOUT_S = 60
CONSUME_TIMEOUT_S = "60"
PROMPT_S = 20.0
"""A refusal arrives within this, process start included, on a loaded machine; well below
CONSUME_TIMEOUT_S, which a refusal reported only at the deadline would take."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("cli-errors")) as c:  # enablePropertyFilter off, as by default
        yield c


def skiff(cluster: Cluster | None, *args: str) -> subprocess.CompletedProcess[str]:
    namesrv = ["-n", cluster.namesrv_addr] if cluster is not None else []
    return subprocess.run(skiff_command([*args, *namesrv]), capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize("perm", ["0", "1", "7"])
def test_perm_is_2_4_or_6(cluster: Cluster, perm: str):
    done = skiff(cluster, "topic", "create", "-t", "E-perm", "-p", perm)
    assert done.returncode == 2 and "invalid choice" in done.stderr and "choose from 2, 4, 6" in done.stderr


@pytest.mark.parametrize("flag,value", [("-q", "0"), ("-q", "1025"), ("-r", "0"), ("-w", "2000")])
def test_queue_counts_say_their_true_range(cluster: Cluster, flag: str, value: str):
    done = skiff(cluster, "topic", "create", "-t", "E-queues", flag, value)
    assert done.returncode == 2 and f"{value} is out of range: 1 to 1024" in done.stderr, done.stderr


@pytest.mark.parametrize("args,why", [
    (["consume", "-t", "T", "--count", "0"], "argument --count: 0 is out of range: at least 1"),
    (["consume", "-t", "T", "--count", "abc"], "argument --count: 'abc' is not a number"),
    (["consume", "-t", "T", "--timeout-s", "-1"], "argument --timeout-s: -1 is out of range: at least 0"),
    (["send", "-t", "T", "x", "--count", "0"], "argument --count: 0 is out of range: at least 1"),
    (["send", "-t", "T", "x", "--delay-level", "-3"], "argument --delay-level: -3 is out of range: at least 0"),
    (["message", "query", "--key", "k", "-t", "T", "--max", "0"], "argument --max: 0 is out of range: at least 1"),
    (["consumer", "create", "-g", "G", "--retry-max-times", "-5"], "-5 is out of range: at least 0"),
])
def test_numbers_out_of_range_are_bad_arguments(args: list[str], why: str):
    """Refused by argparse before anything is contacted (here nothing listens at all)."""
    done = skiff(None, *args, "-n", "127.0.0.1:1")
    assert done.returncode == 2 and why in done.stderr, done.stderr


def test_bad_namesrv_address_is_a_bad_argument():
    done = skiff(None, "topic", "list", "-n", "nonsense")
    assert done.returncode == 2 and "'nonsense' is not a host:port address" in done.stderr


def test_bad_topic_name_is_refused_without_suggesting_to_create_it(cluster: Cluster):
    for cmd in (["consume", "-t", "bad topic!"], ["send", "-t", "bad topic!", "x"]):
        done = skiff(cluster, *cmd)
        assert done.returncode == 2 and "characters other than" in done.stderr, done.stderr
        assert "create" not in done.stderr


@pytest.mark.parametrize("expr", ["a ||", "|| a", "a || || b", "||"])
def test_tag_expression_with_an_empty_tag_is_refused(cluster: Cluster, expr: str):
    done = skiff(cluster, "consume", "-t", "E-tags", "--tags", expr, "--timeout-s", CONSUME_TIMEOUT_S)
    assert done.returncode == 2 and "tag" in done.stderr and repr(expr) in done.stderr, done.stderr


def test_sql_syntax_error_is_refused_at_once(cluster: Cluster):
    started = time.monotonic()
    done = skiff(cluster, "consume", "-t", "E-sql", "--sql", "a > ", "--timeout-s", CONSUME_TIMEOUT_S)
    assert done.returncode == 2 and "SQL92 syntax error at column 5" in done.stderr, done.stderr
    assert time.monotonic() - started < PROMPT_S


def test_broker_without_property_filter_is_reported_at_once(cluster: Cluster):
    assert skiff(cluster, "topic", "create", "-t", "E-nosql", "-q", "2").returncode == 0
    started = time.monotonic()
    done = skiff(cluster, "consume", "-t", "E-nosql", "--sql", "a > 1", "--timeout-s", CONSUME_TIMEOUT_S)
    took = time.monotonic() - started
    assert done.returncode == 1 and "set enablePropertyFilter=true" in done.stderr, done.stderr
    assert took < PROMPT_S, f"reported after {took:.1f} s, not at once"


def test_progress_of_a_missing_group_fails(cluster: Cluster):
    done = skiff(cluster, "consumer", "progress", "-g", "E-nobody")
    assert done.returncode == 1 and "consumer group E-nobody has no offsets" in done.stderr, done.stderr
    assert done.stdout == ""


def test_runtime_failure_exits_1():
    done = skiff(None, "topic", "list", "-n", "127.0.0.1:1")
    assert done.returncode == 1 and "no NameServer answered" in done.stderr
