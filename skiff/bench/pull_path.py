"""The broker's CPU per pull, in process: ``skiff bench pull_path [--batch 32]``.

A real `BrokerServer` (its own store in a temporary directory, no NameServer, no
listener used) holds one queue of ``--messages`` records of ``--size`` bytes. The
workload is that queue read from its first offset by PULL_MESSAGE requests of
``--batch`` messages each, as a push consumer sends them (COMMIT_OFFSET, SUSPEND and
SUBSCRIPTION flags, ``*``), each handed to the pull processor and its answer encoded:
header decode, the gate, the subscription, the store's read, the offset commit, the
response and its frame. The request's frame decode and the socket syscalls are not in
it (the transport's, measured by ``skiff bench transport``).

It prints process-CPU µs per pull and per message, the best of ``--repeat`` rounds
(the least disturbed on a shared machine), and fails unless every pull answered
SUCCESS with ``--batch`` messages: a benchmark that measures failures measures nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Sequence

from skiff.broker import BrokerServer, load_configs
from skiff.broker.processors.pull import PullProcessor
from skiff.common.record import pack_host
from skiff.common.sysflag import PullSysFlag
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import encode_frame
from skiff.store.results import MessageInput

TOPIC = "BenchPullPath"
GROUP = "BenchPullPathGroup"
FILL_BATCH = 256
_FLAGS = str(int(PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION))


def pull_command(offset: int, batch: int) -> RemotingCommand:
    """A push consumer's PULL_MESSAGE at ``offset`` (RocketMQ's header fields)."""
    return RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=offset + 1, ext_fields={
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": str(batch), "sysFlag": _FLAGS, "commitOffset": str(offset),
        "suspendTimeoutMillis": "15000", "subVersion": "0", "subscription": "*", "expressionType": "TAG"})


def fill(server: BrokerServer, messages: int, size: int) -> None:
    server.topics.find_or_create(TOPIC, 1)
    row = MessageInput(topic=TOPIC, queue_id=0, body=b"x" * size, properties=b"TAGS\x01a\x02", flag=0,
                       sys_flag=0, born_timestamp=1, born_host=pack_host("127.0.0.1", 1), tags="a")
    for start in range(0, messages, FILL_BATCH):
        server.store.put_messages([row] * min(FILL_BATCH, messages - start))


def workload(processor: PullProcessor, messages: int, batch: int) -> Callable[[], int]:
    """One round: the whole queue pulled; returns the messages answered."""
    requests = [pull_command(offset, batch) for offset in range(0, messages - messages % batch, batch)]

    def measured() -> int:
        got = 0
        for req in requests:
            resp = processor.pull(None, req)  # type: ignore[arg-type]  # the processor never reads the connection
            assert isinstance(resp, RemotingCommand) and resp.code == ResponseCode.SUCCESS, resp
            encode_frame(resp)
            got += batch
        return got
    return measured


async def measure(messages: int, batch: int, size: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="skiff-pull-path-") as root:
        config, store_config = load_configs({
            "storePathRootDir": root, "listenPort": "0", "namesrvAddr": "", "grpcServerPort": "0",
            "metricsPort": "0", "flushDiskType": "ASYNC_FLUSH", "maxTransferCountOnMessageInMemory": str(batch)})
        server = BrokerServer(config, store_config)
        await server.start()
        try:
            fill(server, messages, size)
            processor = PullProcessor(config, server.role, server.operations.pull, server.store, server.groups,
                                      server.hold)
            measured = workload(processor, messages, batch)
            pulled = measured()  # warm-up, and the check that every message is answered
            if pulled != messages - messages % batch:
                raise SystemExit(f"pulled {pulled} of {messages} messages")
            best = float("inf")
            for _ in range(repeat):
                started = time.process_time()
                measured()
                best = min(best, time.process_time() - started)
        finally:
            await server.stop()
    pulls = pulled // batch
    return {"batch": batch, "pulls": pulls, "us_per_pull": best / pulls * 1e6, "us_per_message": best / pulled * 1e6}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench pull_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="messages per pull (RocketMQ's pullBatchSize: 32)")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (the best is reported)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.messages, args.batch, args.size, args.repeat))
    print(json.dumps(figures) if args.json else
          f"batch {args.batch}: {figures['us_per_pull']:.1f} us per pull, {figures['us_per_message']:.2f} us per message")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
