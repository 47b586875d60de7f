"""Skiff driven by RocketMQ's own clients: ``skiff bench clients [--client cpp rmq5]``.

The figures of `skiff bench producer` are our client's; RocketMQ applications send with
RocketMQ's. This starts a NameServer and a broker (child processes, a temporary store,
ASYNC_FLUSH, the gRPC endpoint on a free port), creates a topic of 8 queues, and runs
``--threads`` threads of synchronous single sends for ``--seconds`` with:

- ``cpp``: the RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4, ``send_sync``: SEND_MESSAGE
  over remoting), under SKIFF_CPP_PYTHON or the checkout's build/venv-rocketmq-cpp;
- ``rmq5``: the official 5.x Python client (``Producer.send``: one gRPC SendMessage per
  message), under SKIFF_RMQ5_PYTHON or build/venv-rocketmq5.

The senders are `skiff.bench._rocketmq_senders`, run by path under those interpreters.
It prints msg/s, errors, and the broker's CPU per message (psutil, user+system of the
broker process over the sending run only: the senders warm up first, then the CPU is
marked and they are told to go).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from skiff.bench import _rocketmq_senders
from skiff.client.admin import AsyncAdmin
from skiff.testing.chaos.foreign import INTERPRETERS, ForeignClientMissing, interpreter as client_interpreter
from skiff.testing.processes import SkiffProcess, broker_args, free_port, start_namesrv, start_skiff

TOPIC = "BenchRocketMQClients"
GROUP = "BenchRocketMQClientsProducer"
QUEUES = 8
WHAT = {"cpp": "RocketMQ C++ client 0.4.4, send_sync (SEND_MESSAGE)",
        "rmq5": "RocketMQ 5.x Python client, Producer.send (gRPC SendMessage)"}
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Run:
    client: str
    threads: int
    size: int
    sent: int
    errors: int
    seconds: float
    msg_per_s: float
    broker_cpu_us_per_msg: float
    first_error: str | None


def interpreter(client: str) -> str:
    """The client's interpreter, found as the chaos runs find it; a missing one ends the bench."""
    try:
        return client_interpreter(client)
    except ForeignClientMissing as exc:
        raise SystemExit(f"{WHAT[client]}: {exc}") from None


async def create_topic(namesrv: str) -> None:
    async with AsyncAdmin(namesrv, instance_name="bench-clients-admin") as admin:
        await admin.create_topic(TOPIC, queue_nums=QUEUES)


def send_with(client: str, spec: dict[str, object], broker: psutil.Process, home: str) -> Run:
    """Run one sender; the broker's CPU counts from its GO to its end."""
    proc = subprocess.Popen([interpreter(client), _rocketmq_senders.__file__, json.dumps(spec)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "HOME": home})  # the C++ client logs under $HOME/logs
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if line.strip() != "READY":
            raise SystemExit(f"the {client} sender did not start: {line!r}")
        cpu0 = sum(broker.cpu_times()[:2])
        proc.stdin.write("GO\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=float(str(spec["seconds"])) + READY_TIMEOUT_S)
        cpu_s = sum(broker.cpu_times()[:2]) - cpu0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    res = json.loads(out.strip().splitlines()[-1])
    sent = res["sent"]
    return Run(client, int(str(spec["threads"])), int(str(spec["size"])), sent, res["errors"],
               round(res["seconds"], 2), round(sent / res["seconds"]) if res["seconds"] else 0,
               round(cpu_s / sent * 1e6, 1) if sent else 0.0, res["first_error"])


def measure(args: argparse.Namespace) -> list[Run]:
    with tempfile.TemporaryDirectory(prefix="skiff-bench-clients-") as root:
        grpc_port = free_port()
        namesrv: SkiffProcess = start_namesrv()
        try:
            broker = start_skiff(broker_args(Path(root) / "store", namesrv.addr, f"--grpcServerPort={grpc_port}",
                                             "--flushDiskType=ASYNC_FLUSH", sizes=()))  # RocketMQ's file sizes
            try:
                asyncio.run(create_topic(namesrv.addr))
                runs = []
                for client in args.client:
                    spec = {"client": client, "namesrv": namesrv.addr, "endpoint": f"127.0.0.1:{grpc_port}",
                            "topic": TOPIC, "group": GROUP, "threads": args.threads, "seconds": args.seconds,
                            "size": args.size}
                    runs.append(send_with(client, spec, psutil.Process(broker.pid), root))
                    if not args.json:
                        print(line(runs[-1]), flush=True)
                return runs
            finally:
                broker.stop()
        finally:
            namesrv.stop()


def line(r: Run) -> str:
    error = f", first error: {r.first_error}" if r.first_error else ""
    return (f"{WHAT[r.client]}, {r.threads} threads, {r.size} B: {r.msg_per_s:,.0f} msg/s, broker CPU "
            f"{r.broker_cpu_us_per_msg} us/msg ({r.sent:,} sent in {r.seconds} s, {r.errors} errors{error}; "
            f"load {' '.join(f'{x:.1f}' for x in psutil.getloadavg())})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench clients", description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", nargs="+", choices=sorted(INTERPRETERS), default=["cpp", "rmq5"])
    parser.add_argument("--threads", type=int, default=16, help="sending threads (default 16)")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each run (default 8)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs = measure(args)
    if args.json:
        print(json.dumps([asdict(r) for r in runs]))
    return 0 if all(r.sent and not r.errors for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
