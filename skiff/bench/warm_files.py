"""Do SYNC_FLUSH appends sync faster into CommitLog files written through with zeros first?

CommitLog files reserve their blocks with ``posix_fallocate`` (`skiff.store.mapped_file`).
On ext4 those blocks are *unwritten* extents (``filefrag -v`` says so), and the first write
into each block converts it, a metadata change that the next fdatasync commits to the
journal. RocketMQ writes each new file through once (``warmMapedFileEnable``) so that later
syncs flush data only. This module measures whether that pays on a given disk, before
anyone builds it (issue 26; docs/performance.md, "SYNC_FLUSH: warmed CommitLog files"):

``syncs``: one process appends ``--record`` bytes and syncs (``msync`` of the new range as
the CommitLog does, or ``fdatasync``) into three files open at once: fallocated, written
through with zeros, sparse, in turns of ``--block`` syncs, so the machine's noise falls on
all three alike. It prints syncs/s per kind and the block device's write requests per sync
(``/sys/dev/block/M:m/stat``: machine-wide, so other processes' writes count too).

    python -m skiff.bench.warm_files syncs --dir DIR --record 128 --syncs 2000

``broker``: ``skiff bench broker --phases produce_single`` against a SYNC_FLUSH broker whose
first CommitLog file the broker made (fallocated) or that was written with zeros before it
started (the broker maps an existing file as it is), alternated ``--rounds`` times.

    python -m skiff.bench.warm_files broker --rounds 3 -- --seconds 8 --connections 1 --inflight 1 --size 128
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from skiff.store import pages
from skiff.store.mapped_file import file_name
from skiff.testing.processes import SkiffProcess, broker_args

KINDS = ("fallocated", "zeros", "sparse")
ZERO_CHUNK = bytes(1 << 20)


def make_file(path: str, size: int, kind: str) -> int:
    """A ``size``-byte file at ``path`` reserved as ``kind`` says, synced; its descriptor."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.ftruncate(fd, size)
    if kind == "fallocated":
        os.posix_fallocate(fd, 0, size)
    elif kind == "zeros":
        for off in range(0, size, len(ZERO_CHUNK)):
            os.pwrite(fd, ZERO_CHUNK[: size - off], off)
    os.fsync(fd)
    return fd


def device_writes(fd: int) -> int:
    """Write requests completed by the block device holding ``fd`` (0 where unknown)."""
    dev = os.fstat(fd).st_dev
    try:
        with open(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat", encoding="ascii") as f:
            return int(f.read().split()[4])
    except (OSError, IndexError, ValueError):
        return 0


def syncs(directory: str, count: int, block: int, record: int, how: str, size: int) -> dict[str, dict[str, float]]:
    """The paired loop of the module docstring; per kind: syncs/s and device writes per sync."""
    if count <= 0 or block <= 0 or record <= 0 or count % block or record * count > size:
        raise ValueError(f"{count} syncs of {record} bytes in turns of {block} do not fit a {size}-byte file")
    fds = {k: make_file(os.path.join(directory, f"warm-files-{k}-{os.getpid()}"), size, k) for k in KINDS}
    maps = {k: mmap.mmap(fd, size) for k, fd in fds.items()}
    try:
        seconds, writes = dict.fromkeys(KINDS, 0.0), dict.fromkeys(KINDS, 0)
        data, pos = b"x" * record, 0
        for _ in range(count // block):
            for kind in KINDS:
                fd, address = fds[kind], pages.address_of(maps[kind])
                w0, t0 = device_writes(fd), time.perf_counter()
                for i in range(block):
                    at = pos + i * record
                    os.pwrite(fd, data, at)
                    if how == "fdatasync":
                        os.fdatasync(fd)
                    else:
                        pages.sync(address, at, at + record)
                seconds[kind] += time.perf_counter() - t0
                writes[kind] += device_writes(fd) - w0
            pos += block * record
        return {k: {"syncs_per_s": round(count / seconds[k]), "device_writes_per_sync": round(writes[k] / count, 2)}
                for k in KINDS}
    finally:
        for kind, fd in fds.items():
            maps[kind].close()
            os.close(fd)
            os.unlink(os.path.join(directory, f"warm-files-{kind}-{os.getpid()}"))


def broker_round(kind: str, file_bytes: int, bench_args: Sequence[str]) -> dict[str, float]:
    """One ``skiff bench broker`` run against a fresh SYNC_FLUSH broker; its produce_single figures."""
    root = tempfile.mkdtemp(prefix="skiff-warm-files-")
    try:
        if kind == "zeros":
            os.makedirs(os.path.join(root, "commitlog"))
            os.close(make_file(os.path.join(root, "commitlog", file_name(0)), file_bytes, "zeros"))
        proc = SkiffProcess(broker_args(root, "", "--flushDiskType=SYNC_FLUSH",
                                        f"--mappedFileSizeCommitLog={file_bytes}", sizes=())).wait_listening()
        try:
            out = subprocess.run([sys.executable, "-m", "skiff", "bench", "broker", "--addr", proc.addr,
                                  "--phases", "produce_single", "--json", *bench_args],
                                 capture_output=True, text=True, check=True).stdout
        finally:
            proc.stop(timeout_s=60)
        figures: dict[str, float] = json.loads(out)["produce_single"]
        return figures
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.warm_files", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("syncs", help="append + sync into fallocated, zero-written and sparse files, paired")
    s.add_argument("--dir", default=tempfile.gettempdir(), help="where the files go (a store's file system)")
    s.add_argument("--syncs", type=int, default=2000)
    s.add_argument("--block", type=int, default=50, help="syncs per kind per turn")
    s.add_argument("--record", type=int, default=128, help="bytes appended per sync")
    s.add_argument("--how", choices=("msync", "fdatasync"), default="msync")
    s.add_argument("--file-mib", type=int, default=64)
    b = sub.add_parser("broker", help="skiff bench broker produce_single, broker-made against zero-written file")
    b.add_argument("--rounds", type=int, default=3)
    b.add_argument("--file-mib", type=int, default=256, help="mappedFileSizeCommitLog of the broker")
    b.add_argument("bench_args", nargs="*", help="after --: skiff bench broker arguments")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    if args.what == "syncs":
        if args.syncs <= 0 or args.block <= 0 or args.record <= 0 or args.syncs % args.block \
                or args.syncs * args.record > args.file_mib << 20:
            parser.error("--syncs, --block and --record must be positive, --syncs a multiple of --block, "
                         "and --syncs x --record must fit in --file-mib")
        result = syncs(args.dir, args.syncs, args.block, args.record, args.how, args.file_mib << 20)
        print(json.dumps({"load": load, "how": args.how, "record": args.record, **result}))
        return 0
    for rnd in range(args.rounds):
        for kind in ("fallocated", "zeros"):
            load = os.getloadavg()[0]
            figures = broker_round(kind, args.file_mib << 20, args.bench_args)
            print(json.dumps({"round": rnd, "kind": kind, "load": load, "messages_per_s": figures["messages_per_s"]}),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
