"""SIGKILL a SYNC_FLUSH writer at random moments; every acknowledged message must survive.

The seed is random per run and printed in every failure; rerun one with
SKIFF_CRASH_SEED=<seed>.
"""

import os
import random

from skiff.common.stored_message import decode_record
from skiff.store import PutStatus
from tests.crash.conftest import Child, check_survivors, open_child_store
from tests.crash.store_child import make

ROUNDS = 24


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path):
    seed = int(os.environ.get("SKIFF_CRASH_SEED") or random.SystemRandom().randrange(2**32))
    rng = random.Random(seed)
    store_dir = tmp_path / "store"
    acked: dict[int, list] = {}
    crashes_seen = truncations = 0
    for round_no in range(ROUNDS):
        where = f"round {round_no}, seed {seed} (rerun with SKIFF_CRASH_SEED={seed})"
        checkpoint_ms = rng.choice(["20", "100", "60000"])
        child = Child(store_dir, "--seed", str(rng.randrange(2**31)), "--checkpoint-ms", checkpoint_ms)
        child.wait_for("ready")
        child.wait_for("ack", count=rng.randint(0, 40))
        child.kill()
        for row in child.acks():
            acked[row[0]] = row
        store, report = open_child_store(store_dir, checkpoint_ms=int(checkpoint_ms))
        try:
            crashes_seen += not report.clean_shutdown
            truncations += report.truncated_from is not None
            check_survivors(store, acked, where)
        finally:
            store.shutdown()
    assert crashes_seen == ROUNDS, f"every round should recover from a crash; seed {seed}"
    assert len(acked) > ROUNDS, f"too little was written to mean anything; seed {seed}"
    print(f"seed {seed}: {len(acked)} acknowledged records, {truncations} recoveries truncated a torn tail")


def test_store_takes_writes_after_a_crash(tmp_path):
    store_dir = tmp_path / "store"
    child = Child(store_dir, "--seed", "3", "--count", "20", "--hold")
    child.wait_for("done")
    child.kill()
    acked = {row[0]: row for row in child.acks()}
    store, report = open_child_store(store_dir)
    try:
        assert not report.clean_shutdown
        before = store.get_max_offset("CrashTopic", 1)
        result = store.put_message(make(10**6, 1, b"after the crash", 3))
        assert result.status is PutStatus.PUT_OK and result.queue_offset == before
        assert result.flushed.result(10) is PutStatus.PUT_OK
        check_survivors(store, acked, "after one write")
        assert decode_record(store.read_record(result.physical_offset)).body == b"after the crash"
    finally:
        store.shutdown()
