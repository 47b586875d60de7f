"""A full disk: appends fail with a clear status, reads keep working, and nothing dies of SIGBUS.

As root the store lives on a 2 MiB tmpfs (where even reading an unallocated
page of a mapping raises SIGBUS). Otherwise the child caps file sizes with
RLIMIT_FSIZE once it has started, so creating the next CommitLog file fails
as it would on a full disk.
"""

import contextlib
import os
import shutil
import subprocess

from skiff.store import PutStatus
from tests.crash.conftest import Child, check_survivors, open_child_store
from tests.crash.store_child import make

FILE = 65536


@contextlib.contextmanager
def small_disk(path):
    """Mount a 2 MiB tmpfs at ``path`` when we may; yield whether it is mounted."""
    path.mkdir()
    mounted = False
    if os.geteuid() == 0 and shutil.which("mount"):
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path)],
                                 capture_output=True, check=False).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], check=True)


def test_full_disk_refuses_appends_and_serves_reads(tmp_path):
    with small_disk(tmp_path / "disk") as tmpfs:
        store_dir = tmp_path / "disk" / "store"
        limit = [] if tmpfs else ["--fsize-limit", str(FILE // 2)]
        child = Child(store_dir, "--fill", "--commitlog-bytes", str(FILE), *limit)
        code = child.finish(120)
        assert code == 0, f"the child died with {code} (SIGBUS is -7): {child.stderr()}"
        report = child.wait_for("refused")[0]
        acked = report["acked"]
        assert len(acked) > 20
        for status, reason in report["refused"]:
            assert status == "DISK_FULL" and "no room on disk" in reason
        assert child.wait_for("verified")[0]["verified"] == len(acked)

        store, _ = open_child_store(store_dir, commitlog_bytes=FILE, sync=False)
        try:
            check_survivors(store, {row[0]: row for row in acked}, f"tmpfs={tmpfs}")
            if tmpfs:
                again = store.put_message(make(10**6, 0, b"y" * 1024, 1))
                assert again.status is PutStatus.DISK_FULL
        finally:
            store.shutdown()
