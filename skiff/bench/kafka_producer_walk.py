"""What a controller-mode slave pays to keep the Kafka producer state: the CPU of one
`ProducerSnapshots.follow` over a CommitLog it replicated (docs/kafka.md, "Producer state
across failovers"), in process.

A store in a temporary directory gets ``--messages`` messages of 100 bytes, every
``--batch``-th carrying `KAFKA_PRODUCER` as an idempotent batch's last message does (0: none,
RocketMQ-only traffic); one walk then reads them all back. It prints the process-CPU of the
walk, per message, and the batches found (checked against the count written).

    python -m skiff.bench.kafka_producer_walk --messages 200000 --batch 64
"""

from __future__ import annotations

import argparse
import tempfile
import time

from skiff.broker.kafka.idempotence import PRODUCER_PROPERTY, ProducerStates
from skiff.broker.kafka.producer_snapshot import ProducerSnapshots
from skiff.common.config import build_config
from skiff.common.properties import encode_properties
from skiff.common.record import pack_host
from skiff.store import MessageInput, MessageStore, StoreConfig

_BODY = b"x" * 100
_BORN = pack_host("127.0.0.1", 40000)
_APPEND = 256
"""Messages per store append (the walk's cost does not depend on it)."""


def walk(messages: int, batch: int) -> tuple[int, float]:
    """(batches found, CPU seconds of the walk)."""
    with tempfile.TemporaryDirectory() as root:
        config = build_config(StoreConfig, {"storePathRootDir": root, "mappedFileSizeCommitLog": str(64 << 20)})
        store = MessageStore(config, store_host=pack_host("127.0.0.1", 10911))
        store.start()
        try:
            pending: list[MessageInput] = []
            for i in range(messages):
                last = batch and (i + 1) % batch == 0
                props = {PRODUCER_PROPERTY: f"7 0 {i - batch + 1} {i}"} if last else {}
                pending.append(MessageInput(topic="Walk", queue_id=0, body=_BODY, properties=encode_properties(props),
                                            flag=0, sys_flag=0, born_timestamp=1_000 + i, born_host=_BORN))
                if len(pending) == _APPEND:
                    store.put_messages(pending)
                    pending = []
            if pending:
                store.put_messages(pending)
            snapshots = ProducerSnapshots(ProducerStates(), store, root)
            started = time.process_time()
            found = snapshots.follow()
            return found, time.process_time() - started
        finally:
            store.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.kafka_producer_walk", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=64, help="a batch's last message every N (0: none)")
    args = parser.parse_args(argv)
    found, cpu_s = walk(args.messages, args.batch)
    expected = args.messages // args.batch if args.batch else 0
    print(f"{args.messages} messages, a batch every {args.batch or '-'}: {found} batches found, "
          f"{cpu_s * 1000:.1f} ms CPU, {cpu_s / args.messages * 1e6:.2f} us per message")
    if found != expected:
        print(f"expected {expected} batches")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
