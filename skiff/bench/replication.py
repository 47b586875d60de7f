"""Replication benchmark: ``skiff bench replication``.

For each mode — a master alone, ASYNC_MASTER with one slave, SYNC_MASTER with one
slave — starts a fresh NameServer, master (and slave) as ``skiff broker``
processes with ASYNC_FLUSH, and drives the master with `skiff.bench.broker_load`'s
produce phase: ``--producers`` connections each sending one message at a time
(``--inflight`` 1: 16 producers, as the seeds' comparison) for ``--seconds``,
with 100 B and 1 KiB bodies. Prints msg/s and the master's (and the slave's) CPU
per message. ``--json`` prints the rows as JSON.

``--rate N`` offers the same load to every mode instead: N single-message sends per
second in total, on a fixed schedule (open loop) over the ``--producers`` connections
in turn, for ``--seconds``. It reports the rate achieved (SUCCESS answers per second),
the send latency p50/p99 from each send's due time, and the master's and the slave's
CPU per message: SYNC_MASTER's cost against no replication at the same offered load.

``--pin`` makes the comparison the seeds' one on a small box (there the slave has a machine
of its own): the master's threads run on the first CPU this process may use, the slave,
the NameServer and the producers (this process) on the others. Without it all share every
CPU, and the slave's work is taken from the master's.

``--tls`` replicates over TLS: the NameServer and the master serve ``tls.server.mode=permissive``
(the producers stay plaintext, so only the HA stream and the slave's metadata sync differ) and
the slave dials with TLS (``tls.enable``), with a self-signed pair made for the run.

``--tls-layer N`` measures the TLS layer of the stream alone, in this process: N frames of each
size encrypted by a master's ssl object and decrypted by a slave's (the contexts the brokers
make, memory BIOs, no sockets), each answered by an 8-byte report the other way; it prints the
CPU per frame. (Count it with CPU time, not valgrind: OpenSSL picks its AES-GCM code by the
features the CPU reports, and valgrind, which has no AVX-512, reports fewer, so the count under
it is not of the code that runs natively.)

``--slave-path N`` measures the slave's receive path alone, in this process: N
messages (batches of 32 over 8 queues, a tag, a key and a unique key each, as the
producers send) are put into a master store, streamed as 32 KiB frames cut into
64 KiB reads, and fed through `HASlave`'s read handling into a second store; it
prints the CPU per message. No sockets and no event loop: what the slave itself costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from skiff.bench.broker_load import Broker, Plan, create_topic, latency, produce
from skiff.broker.config import BrokerConfig
from skiff.broker.ha.slave import HASlave
from skiff.common.config import build_config
from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host
from skiff.protocol.ha import FrameReader, encode_frame_head
from skiff.store import MessageInput, MessageStore, StoreConfig
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode
from skiff.testing.ha import HAGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

MODES = {"none": ("ASYNC_MASTER", 0), "async": ("ASYNC_MASTER", 1), "sync": ("SYNC_MASTER", 1)}


def run_mode(root: Path, mode: str, plan: Plan, batched: bool, offered: float = 0.0,
             pin: bool = False, tls: bool = False) -> dict[str, object]:
    """One mode's row: closed loop (``offered`` 0) or ``offered`` msg/s on a fixed schedule;
    ``pin``: the master on a CPU of its own (`pin_cpus`); ``tls``: the slave replicates over TLS."""
    role, slaves = MODES[mode]
    cpus = os.sched_getaffinity(0)
    try:
        return _run_mode(root, mode, plan, batched, offered, pin, role, slaves, tls)
    finally:
        _set_affinity(os.getpid(), cpus)  # the next mode's processes start from every CPU


def tls_keys(root: Path) -> tuple[list[str], list[str]]:
    """``--tls``: the NameServer's and the master's keys (permissive: plaintext producers are
    served) and the slave's (it dials its master with TLS, verifying the pair made here)."""
    from skiff.transport.certificates import write_self_signed  # cryptography: only with --tls

    pair = write_self_signed(root / "tls", "bench")
    serve = ["--tls.server.mode=permissive", f"--tls.server.certPath={pair.cert_path}",
             f"--tls.server.keyPath={pair.key_path}"]
    return serve, [*serve, "--tls.enable=true", "--tls.client.authServer=true",
                   f"--tls.client.trustCertPath={pair.cert_path}"]


def _run_mode(root: Path, mode: str, plan: Plan, batched: bool, offered: float, pin: bool, role: str,
              slaves: int, tls: bool) -> dict[str, object]:
    serve, dial = tls_keys(root) if tls else ([], [])
    with HAGroup(root, role=role, slaves=slaves, broker_args=["--flushDiskType=ASYNC_FLUSH"], namesrv_args=serve,
                 master_args=serve, slave_args=dial) as group:
        broker = Broker(group.master_addr, group.proc(0).pid)
        slave = Broker(group.slave_addr(), group.proc(1).pid) if slaves else None
        if pin:
            others = [os.getpid(), group.namesrv.pid if group.namesrv else 0, group.proc(1).pid if slaves else 0]
            pin_cpus(group.proc(0).pid, [p for p in others if p])

        async def main() -> dict[str, object]:
            await create_topic(broker)
            if slave is not None:
                await eventually(lambda: _slave_connected(broker.addr), 30, "the slave connecting")
            row: dict[str, object] = {"mode": mode, "body_bytes": plan.body_bytes,
                                      "batch": plan.batch if batched else 1, "pinned": pin, "tls": tls}
            cpu0 = (broker.cpu_s()[0], slave.cpu_s()[0] if slave else 0.0)
            if offered:
                t0 = time.monotonic()
                lat = await latency(broker, plan, False, offered, plan.connections)
                messages, seconds = lat.requests, time.monotonic() - t0
                row.update(offered_per_s=round(offered), p50_ms=round(lat.p50_ms, 2), p99_ms=round(lat.p99_ms, 2),
                           not_ok=lat.failed)
            else:
                rate = await produce(broker, plan, batched)
                messages, seconds = rate.messages, rate.seconds
            if slave is not None:
                await eventually(lambda: _slave_caught_up(broker.addr), 60, "the slave catching up")
            cpu = (broker.cpu_s()[0] - cpu0[0], (slave.cpu_s()[0] - cpu0[1]) if slave else 0.0)
            row.update(messages=messages, messages_per_s=round(messages / seconds),
                       master_cpu_us_per_message=_per_message(cpu[0], messages),
                       slave_cpu_us_per_message=_per_message(cpu[1], messages))
            return row
        return asyncio.run(main())


def pin_cpus(master_pid: int, other_pids: Sequence[int]) -> None:
    """Every thread of ``master_pid`` onto the first CPU this process may use, every thread of
    ``other_pids`` onto the rest (threads started later inherit their creator's CPUs)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit(f"--pin needs at least 2 CPUs; this process may use {len(cpus)}")
    for pid, allowed in [(master_pid, {cpus[0]}), *((p, set(cpus[1:])) for p in other_pids)]:
        _set_affinity(pid, allowed)


def _set_affinity(pid: int, cpus: set[int]) -> None:
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), cpus)


def _per_message(cpu_s: float, messages: int) -> float:
    return round(cpu_s / messages * 1e6, 1) if messages else 0.0


async def _runtime(addr: str) -> Mapping[str, str]:
    wire = BrokerWire(addr)
    try:
        return KVTable.from_json((await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
    finally:
        await wire.close()


async def _slave_connected(addr: str) -> bool:
    return (await _runtime(addr)).get("haSlaveCount") == "1"


async def _slave_caught_up(addr: str) -> bool:
    """The slave has acknowledged everything (its CPU then covers every message)."""
    table = await _runtime(addr)
    return table.get("haSlaveAckOffset") == table.get("commitLogMaxOffset")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench replication", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--producers", type=int, default=16)
    parser.add_argument("--inflight", type=int, default=1, help="requests in flight per producer")
    parser.add_argument("--sizes", default="100,1024", help="body sizes, comma-separated")
    parser.add_argument("--modes", default="none,async,sync")
    parser.add_argument("--batch", type=int, default=0, help="send batches of this many (0: single messages)")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="offer this many single-message sends per second in total, open loop (0: closed loop)")
    parser.add_argument("--pin", action="store_true",
                        help="the master alone on one CPU; the slave, NameServer and producers on the others")
    parser.add_argument("--tls", action="store_true",
                        help="the slave replicates over TLS (NameServer and master permissive: plaintext producers)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--slave-path", type=int, default=0, metavar="N",
                        help="measure the slave's receive path in this process over N messages instead")
    parser.add_argument("--tls-layer", type=int, default=0, metavar="N",
                        help="measure the stream's TLS layer in this process over N frames of each size instead")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="skiff-bench-ha-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            if args.slave_path or args.tls_layer:
                rows.append(slave_path(Path(tmp) / f"path-{size}", args.slave_path, size) if args.slave_path
                            else tls_layer(Path(tmp) / f"tls-{size}", args.tls_layer, size))
                if not args.json:
                    print(_line(rows[-1]), flush=True)
                continue
            for mode in args.modes.split(","):
                plan = Plan(args.seconds, args.producers, max(1, args.batch), args.inflight, size)
                row = run_mode(Path(tmp) / f"{mode}-{size}", mode, plan, args.batch > 0 and not args.rate, args.rate,
                               args.pin, args.tls)
                rows.append(row)
                if not args.json:
                    print(_line(row), flush=True)
    if args.json:
        print(json.dumps(rows))
    return 0


def slave_path(root: Path, messages: int, body_bytes: int) -> dict[str, object]:
    """CPU µs per message of the slave's receive path (frames in, records appended and dispatched)."""
    host = pack_host("127.0.0.1", 10911)
    master, slave_store = (_bench_store(root / name, host) for name in ("master", "slave"))
    try:
        for b in range(max(1, messages // 32)):
            master.put_messages([_bench_message(b, i, body_bytes, host) for i in range(32)])
        data = b"".join(bytes(v) for v in master.commitlog.views(0, master.max_physical_offset))
        stream = b"".join(encode_frame_head(pos, len(data[pos : pos + 32768])) + data[pos : pos + 32768]
                          for pos in range(0, len(data), 32768))
        reads = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
        slave = HASlave(build_config(BrokerConfig, {"brokerRole": "SLAVE", "brokerId": "1"}, {}), slave_store)
        frames, received = FrameReader(), None
        cpu0 = time.process_time()
        for chunk in reads:
            received = slave._apply(frames, received, chunk)
        cpu = time.process_time() - cpu0
        if slave_store.max_physical_offset != master.max_physical_offset:
            raise RuntimeError("the slave did not append everything the master streamed")
        count = max(1, messages // 32) * 32
        return {"mode": "slave-path", "body_bytes": body_bytes, "messages": count,
                "slave_cpu_us_per_message": _per_message(cpu, count)}
    finally:
        master.shutdown()
        slave_store.shutdown()


def tls_layer(root: Path, frames: int, body_bytes: int) -> dict[str, object]:
    """CPU µs per frame of the HA stream's TLS layer: a frame (12-byte head and body, written as
    the master writes them) encrypted and decrypted, and an 8-byte report the other way."""
    import ssl

    from skiff.broker.ha.tls import slave_tls_config
    from skiff.transport.certificates import write_self_signed
    from skiff.transport.tls import TlsMode, TlsSettings, client_context, server_context

    pair = write_self_signed(root, "bench")
    settings = TlsSettings(tls_server_mode=TlsMode.ENFORCING, tls_server_cert_path=str(pair.cert_path),
                           tls_server_key_path=str(pair.key_path))
    to_slave, to_master = ssl.MemoryBIO(), ssl.MemoryBIO()
    master_in, slave_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    master = server_context(settings).wrap_bio(master_in, to_slave, server_side=True)
    slave = client_context(slave_tls_config(settings)).wrap_bio(to_master, slave_out)
    for _ in range(4):  # the handshake (TLS 1.3 takes two flights each way), not counted
        for side in (slave, master):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        master_in.write(slave_out.read())
        to_master.write(to_slave.read())
    if not (slave.version() and master.version()):
        raise RuntimeError("the TLS handshake did not complete")
    head, body, report = encode_frame_head(0, body_bytes), memoryview(b"x" * body_bytes), bytes(8)
    received = 0

    def round_trip() -> None:
        nonlocal received
        master.write(head)
        master.write(body)
        to_master.write(to_slave.read())
        while True:
            try:
                received += len(slave.read(1 << 16))
            except ssl.SSLWantReadError:
                break
        slave.write(report)
        master_in.write(slave_out.read())
        master.read(64)

    for _ in range(100):
        round_trip()
    cpu0, received = time.process_time(), 0
    for _ in range(frames):
        round_trip()
    cpu = time.process_time() - cpu0
    if received != frames * (len(head) + body_bytes):
        raise RuntimeError(f"the slave decrypted {received} bytes of {frames * (len(head) + body_bytes)}")
    return {"mode": "tls-layer", "body_bytes": body_bytes, "frames": frames,
            "cpu_us_per_frame": round(cpu / frames * 1e6, 2)}


def _bench_store(root: Path, host: bytes) -> MessageStore:
    config = build_config(StoreConfig, {"storePathRootDir": str(root), "mappedFileSizeCommitLog": 256 << 20}, {})
    store = MessageStore(config, store_host=host)
    store.start()
    return store


def _bench_message(batch: int, i: int, body_bytes: int, host: bytes) -> MessageInput:
    keys, uniq = f"k{batch}-{i}", f"7F0000010000{batch:012X}{i:04X}"
    props = encode_properties({Prop.TAGS: "bench", Prop.KEYS: keys, Prop.UNIQ_KEY: uniq, Prop.WAIT: "true"})
    return MessageInput(topic="BenchTopic", queue_id=batch % 8, body=b"x" * body_bytes, properties=props, flag=0,
                        sys_flag=0, born_timestamp=0, born_host=host, tags="bench", keys=keys, uniq_key=uniq)


def _line(row: dict[str, object]) -> str:
    if row["mode"] == "tls-layer":
        return (f"TLS layer {row['body_bytes']:>5} B frames: {row['cpu_us_per_frame']} us CPU per frame "
                f"(encrypted, decrypted, and its report back; in process)")
    if row["mode"] == "slave-path":
        return f"slave path {row['body_bytes']:>5} B: {row['slave_cpu_us_per_message']} us/msg slave CPU (in process)"
    pinned = (" pinned" if row.get("pinned") else "") + (" HA over TLS" if row.get("tls") else "")
    paced = (f" (offered {row['offered_per_s']:,}, {row['not_ok']} not SUCCESS) p50 {row['p50_ms']} ms "
             f"p99 {row['p99_ms']} ms" if "offered_per_s" in row else "")
    return (f"{row['mode']:6} {row['body_bytes']:>5} B batch {row['batch']:>3}: {row['messages_per_s']:>8,} msg/s"
            f"{paced}  master CPU {row['master_cpu_us_per_message']} us/msg"
            f"  slave CPU {row['slave_cpu_us_per_message']} us/msg{pinned}")


if __name__ == "__main__":
    raise SystemExit(main())
