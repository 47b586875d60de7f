"""A store writer that tests kill: ``python -m tests.crash.store_child --dir D --seed S [...]``.

It opens a SYNC_FLUSH store with small files and appends random messages and
batches (seeded), printing one JSON line per append after its fsync is
acknowledged: ``{"ack": [[phys, queue_offset, queue_id, size, sha1, body_hex], ...]}``.
The first line is ``{"ready": ...}`` once the store has started.

``--count N`` stops after N appends, prints ``{"done": true}`` and waits to be
killed (``--hold``) or shuts down. ``--fill`` appends 1 KiB messages until the
disk refuses one, then reads every acknowledged message back and reports.
``--fsize-limit B`` caps file sizes with RLIMIT_FSIZE after the start (a full
disk without root).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import signal
import sys
import time

from skiff.common.config import build_config
from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host
from skiff.store import MessageInput, MessageStore, PutResult, PutStatus, StoreConfig

STORE_HOST = pack_host("127.0.0.1", 10911)
BORN_HOST = pack_host("10.1.1.1", 6000)
TOPIC = "CrashTopic"
QUEUES = 4


def emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def make(seq: int, queue_id: int, body: bytes, seed: int) -> MessageInput:
    keys, uniq = f"k{seq}", f"U{seed}-{seq}"
    props = encode_properties({Prop.KEYS: keys, Prop.UNIQ_KEY: uniq, Prop.TAGS: f"t{seq % 3}"})
    return MessageInput(topic=TOPIC, queue_id=queue_id, body=body, properties=props, flag=0, sys_flag=0,
                        born_timestamp=1_000 + seq, born_host=BORN_HOST, tags=f"t{seq % 3}", keys=keys, uniq_key=uniq)


def ack_rows(store: MessageStore, result: PutResult, msgs: list[MessageInput]) -> list[list]:
    rows = []
    phys = result.physical_offset
    for k, m in enumerate(msgs):
        raw = store.read_record(phys)
        assert raw is not None
        rows.append([phys, result.queue_offset + k, m.queue_id, len(raw), hashlib.sha1(raw).hexdigest(), m.body.hex()])
        phys += len(raw)
    return rows


def append_random(store: MessageStore, rng: random.Random, seq: int, seed: int) -> tuple[PutResult, list[MessageInput]]:
    queue_id = rng.randrange(QUEUES)
    count = 1 if rng.random() < 0.6 else rng.randint(2, 6)
    msgs = [make(seq + k, queue_id, rng.randbytes(rng.randint(0, 300)), seed) for k in range(count)]
    return store.put_messages(msgs), msgs


def run_random(store: MessageStore, args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    seq = args.seed % 1_000_000 * 1000
    appends = 0
    while not args.count or appends < args.count:
        result, msgs = append_random(store, rng, seq, args.seed)
        seq += len(msgs)
        if result.status is not PutStatus.PUT_OK or result.flushed.result(30) is not PutStatus.PUT_OK:
            emit({"failed": result.status.name, "reason": result.reason})
            continue
        emit({"ack": ack_rows(store, result, msgs)})
        appends += 1
    emit({"done": True})


def run_fill(store: MessageStore, args: argparse.Namespace) -> None:
    """Append until the disk refuses; then check that the refusal is clean and reads work."""
    rng = random.Random(args.seed)
    acked: list[list] = []
    seq = 0
    while True:
        msg = make(seq, seq % QUEUES, rng.randbytes(1024), args.seed)
        result = store.put_message(msg)
        seq += 1
        if result.status is not PutStatus.PUT_OK:
            break
        acked += ack_rows(store, result, [msg])
        if seq == 1 and args.fsize_limit:
            limit_file_size(args.fsize_limit)
    refusals = [result] + [store.put_message(make(seq + k, 0, b"x" * 1024, args.seed)) for k in range(5)]
    emit({"refused": [[r.status.name, r.reason] for r in refusals], "acked": acked})
    emit({"verified": verify_reads(store, acked)})


def limit_file_size(limit: int) -> None:
    """No file may grow past ``limit`` bytes from now on: creating the next CommitLog file
    fails with EFBIG, as a full disk fails with ENOSPC."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def verify_reads(store: MessageStore, acked: list[list]) -> int:
    """Read every acknowledged record through a pull and by offset; count the good ones."""
    pulled: dict[int, bytes] = {}
    for q in range(QUEUES):
        offset = 0
        while offset < store.get_max_offset(TOPIC, q):
            result = store.get_messages(TOPIC, q, offset, 32)
            data = b"".join(bytes(b) for b in result.buffers)
            pos = 0
            for qo in result.queue_offsets:
                size = int.from_bytes(data[pos : pos + 4], "big")
                pulled[(q << 48) | qo] = data[pos : pos + size]
                pos += size
            offset = result.next_begin_offset
    good = 0
    for phys, qo, q, _size, sha, _body in acked:
        raw = store.read_record(phys)
        if raw and hashlib.sha1(raw).hexdigest() == sha == hashlib.sha1(pulled.get((q << 48) | qo, b"")).hexdigest():
            good += 1
    return good


def child_config(root: str, *, commitlog_bytes: int = 8192, checkpoint_ms: int = 100, sync: bool = True) -> StoreConfig:
    """The child's store settings; tests reopen its files with the same ones."""
    return build_config(StoreConfig, {
        "storePathRootDir": root, "mappedFileSizeCommitLog": commitlog_bytes,
        "mappedFileSizeConsumeQueue": 20 * 64, "maxHashSlotNum": 64, "maxIndexNum": 512,
        "flushDiskType": "SYNC_FLUSH" if sync else "ASYNC_FLUSH",
        "flushIntervalConsumeQueue": checkpoint_ms, "flushIntervalCommitLog": 50,
        "diskMaxUsedSpaceRatio": 100, "diskSpaceCleanForciblyRatio": 100, "diskSpaceWarningLevelRatio": 100,
    })


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--fill", action="store_true")
    parser.add_argument("--fsize-limit", type=int, default=0)
    parser.add_argument("--commitlog-bytes", type=int, default=8192)
    parser.add_argument("--checkpoint-ms", type=int, default=100)
    args = parser.parse_args()
    config = child_config(args.dir, commitlog_bytes=args.commitlog_bytes, checkpoint_ms=args.checkpoint_ms,
                          sync=not args.fill)
    store = MessageStore(config, store_host=STORE_HOST)
    report = store.start()
    emit({"ready": True, "max_physical_offset": report.max_physical_offset, "clean": report.clean_shutdown})
    (run_fill if args.fill else run_random)(store, args)
    if args.hold:
        while True:
            time.sleep(3600)
    store.shutdown()
    emit({"closed": True})


if __name__ == "__main__":
    main()
