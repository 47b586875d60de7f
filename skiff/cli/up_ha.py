"""`skiff up --ha`: a try-out of automatic failover on one machine.

It runs a single-member etcd (Debian's ``etcd-server``) as a child process, a NameServer
and the web dashboard in its own process (as plain `skiff up` does), and brokers 1 and 2
of ``broker-ha`` in controller mode (SYNC_MASTER while master) as two `skiff broker`
child processes, which elect their master through etcd. It prints each broker's pid,
role and ports, forwards their log lines (prefixed ``[broker N]``), says when one
exits or is elected, and restarts a broker that died (after ``--restart-delay``
seconds, so the election is seen first): it rejoins as a slave. SIGTERM or SIGINT
stops the brokers (cleanly: unregister, revoke the lease, flush), then the dashboard,
the NameServer and etcd.

The store is ``./store-ha`` unless ``--dir`` says otherwise (``broker-1/``,
``broker-2/``, ``etcd/``), apart from plain `skiff up`'s ``./store``; the brokers use
the try-out's small files (`skiff.cli.broker.TRY_OUT_STORE`), so it takes about 270 MB
while it runs (two 64 MiB CommitLog files, and etcd's 64 MB write-ahead log with the next
one reserved) instead of 2.2 GB.
Broker 2's ports are broker 1's plus 10: listen 10911/10921, HA 10912/10922,
gRPC 8081/8091, metrics 5557/5567. With ``--tls`` every broker serves its doors (remoting,
gRPC, Kafka) and its HA port over TLS only with the one pair of `skiff.cli.up_tls` (the slave
replicates over TLS; the report says "HA port 10912 (TLS)"), and this process talks to them
(and the dashboard to everything) over TLS. docs/replication.md has the walk-through.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import shlex
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from skiff.cli.up_tls import tls_note, try_out_tls
from skiff.common.config import build_config, parse_overrides
from skiff.common.errors import ConfigError, SkiffError

if TYPE_CHECKING:
    from skiff.broker import BrokerConfig
    from skiff.broker.ha.etcd_process import EtcdProcess
    from skiff.dashboard.server import DashboardServer
    from skiff.namesrv import NamesrvConfig
    from skiff.transport import RemotingClient
    from skiff.transport.certificates import CertificatePair

log = logging.getLogger("skiff.up")

GROUP = "broker-ha"
BROKER_IDS = (1, 2)
BROKER_PORT_STEP = 10
"""Broker 2's ports (listen, HA, gRPC, metrics) are broker 1's plus 10."""
HA_STORE_DIR = "./store-ha"
"""The default store of `skiff up --ha`: apart from plain `skiff up`'s ./store."""
GRPC_PORT = 8081
"""Broker 1's gRPC port (BrokerConfig's default grpcServerPort, plain `skiff up`'s)."""
RESTART_DELAY_S = 5.0
START_TIMEOUT_S = 60.0
"""How long a broker may take to listen (a store recovering after a kill -9 included)."""
STOP_TIMEOUT_S = 30.0
"""How long a broker may take to stop after SIGTERM (it drains for up to 5 s) before it is killed."""
ROLE_TIMEOUT_S = 30.0
QUICK_EXIT_S = 10.0
QUICK_EXITS_MAX = 3
"""A broker that exits this many times in a row within QUICK_EXIT_S of its start is left down."""
PER_BROKER_KEYS = ("brokerId", "listenPort", "haListenPort", "grpcServerPort", "metricsPort", "kafkaListenPort",
                   "storePathRootDir")
"""Keys `skiff up --ha` sets for each broker; as --key=value they would give both the same one."""

LISTENING = re.compile(r"skiff broker listening on ")
ELECTED = re.compile(r"elected master of \S+, epoch (\d+)")


def add_arguments(up: argparse.ArgumentParser) -> None:
    """`skiff up`'s --ha options (skiff.cli.broker registers the rest)."""
    up.add_argument("--ha", action="store_true",
                    help="instead: an etcd, a NameServer, the dashboard and two brokers in controller mode as "
                         "child processes, to try a failover (docs/replication.md); needs Debian's etcd-server")
    up.add_argument("--etcd-port", type=int, default=2379,
                    help="with --ha: etcd's client port (default 2379)")
    up.add_argument("--etcd-peer-port", type=int, default=None,
                    help="with --ha: etcd's peer port (default: the client port + 1, i.e. 2380)")
    up.add_argument("--grpc-port", type=int, default=GRPC_PORT,
                    help=f"with --ha: broker 1's gRPC port (default {GRPC_PORT}; broker 2's is 10 above; "
                         f"0 turns gRPC off)")
    up.add_argument("--restart-delay", type=float, default=RESTART_DELAY_S, metavar="SECONDS",
                    help=f"with --ha: restart a broker that died after this long (default {RESTART_DELAY_S:g})")
    up.add_argument("--no-restart", action="store_true",
                    help="with --ha: leave a broker that died down (its command line is printed)")


@dataclasses.dataclass
class BrokerSpec:
    """One broker of the pair: its ports and the keys its `skiff broker` gets."""

    broker_id: int
    host: str
    port: int
    ha_port: int
    grpc_port: int
    store: str
    keys: dict[str, str]
    config: BrokerConfig
    kafka_port: int = 0
    """Its Kafka listener's port (0: none), `kafka_port`."""

    @property
    def name(self) -> str:
        return f"{GROUP} id {self.broker_id}"

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def broker_args(self) -> list[str]:
        return ["broker", *(f"--{k}={v}" for k, v in self.keys.items())]

    def ports_text(self) -> str:
        grpc = f"gRPC {self.grpc_port}" if self.grpc_port else "no gRPC"
        kafka = f"Kafka clients at {self.host}:{self.kafka_port}" if self.kafka_port else "no Kafka listener"
        return f"HA port {self.ha_port}{self.ha_tls_text()}, {grpc}, {kafka}"

    def ha_tls_text(self) -> str:
        """With --tls the replication stream between the brokers is TLS too (docs/tls.md)."""
        from skiff.transport.tls import TlsMode

        return "" if self.config.tls_server_mode is TlsMode.DISABLED else " (TLS)"


def kafka_port(args: argparse.Namespace, index: int) -> int:
    """Broker ``index``'s (from 0) Kafka listener port: ``--kafka-port`` + 10·index, as its other
    ports (0: none). Each broker advertises its own in the NameServer's KV config, so the
    Metadata of any of them lists every broker group's master (docs/kafka.md). A port taken
    now is skipped with a warning, as plain `skiff up` skips its own: the Kafka port is a
    try-out's convenience (9092 is often a local Kafka's)."""
    if not args.kafka_port:
        return 0
    port = args.kafka_port + BROKER_PORT_STEP * index
    with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the listener binds
        try:
            probe.bind((args.host, port))
        except OSError as exc:
            log.warning("the Kafka listener of broker %d cannot listen on %s:%d (%s); it runs without it "
                        "(--kafka-port picks other ports)", index + 1, args.host, port, exc.strerror)
            return 0
    return port



def check_own_ports(args: argparse.Namespace, overrides: dict[str, str], own_keys: tuple[str, ...], mode: str,
                    count: int) -> None:
    """Refuse what would give ``count`` brokers on one host the same port or store: one of
    ``own_keys`` (set per broker) among the flags, or base ports without room for broker i's,
    ``BROKER_PORT_STEP``·i above."""
    for key in own_keys:
        if key in overrides:
            raise ConfigError(f"--{key} cannot be given to skiff up {mode}: each broker gets its own (use --dir, "
                              f"--broker-port, --grpc-port, --metrics-port and --kafka-port; broker i's ports are "
                              f"{BROKER_PORT_STEP}·i above)")
    top = BROKER_PORT_STEP * (count - 1)
    if not 0 < args.broker_port <= 65535 - top - 1:
        raise ConfigError(f"--broker-port {args.broker_port}: skiff up {mode} needs a port number (not 0) with "
                          f"room for {top + 1} above it")
    for flag, value in (("--grpc-port", args.grpc_port), ("--metrics-port", args.metrics_port),
                        ("--kafka-port", args.kafka_port)):
        if not 0 <= value <= 65535 - top:
            raise ConfigError(f"{flag} {value} is not a port with room for {top} above it")

def namesrv_config(args: argparse.Namespace, tls_keys: Mapping[str, str]) -> NamesrvConfig:
    """The NameServer this process runs for `skiff up --ha` and `--brokers` (``tls_keys``: `try_out_tls`'s)."""
    from skiff.namesrv import NamesrvConfig

    config = build_config(NamesrvConfig, {"listenHost": args.host, "listenPort": str(args.namesrv_port),
                                          "metricsPort": str(args.namesrv_metrics_port)}, tls_keys)
    config.validate()
    return config


def broker_specs(args: argparse.Namespace, extra: list[str], store_dir: str,
                 tls_keys: Mapping[str, str]) -> list[BrokerSpec]:
    """Both brokers' keys: the try-out's file sizes (and `try_out_tls`'s keys), then the flags
    given, then each one's own ports."""
    from skiff.broker import load_configs
    from skiff.cli.broker import TRY_OUT_STORE

    overrides = parse_overrides(extra)
    check_own_ports(args, overrides, PER_BROKER_KEYS, "--ha", len(BROKER_IDS))
    specs = []
    for broker_id in BROKER_IDS:
        step = BROKER_PORT_STEP * (broker_id - 1)
        port = args.broker_port + step
        grpc = args.grpc_port + step if args.grpc_port else 0
        kafka = kafka_port(args, broker_id - 1)
        store = os.path.join(store_dir, f"broker-{broker_id}")
        keys = {
            **TRY_OUT_STORE, "listenHost": args.host, "brokerName": GROUP, "brokerRole": "SYNC_MASTER",
            "enableControllerMode": "true", "controllerEtcdEndpoints": f"127.0.0.1:{args.etcd_port}",
            **tls_keys, **overrides,
            "brokerId": str(broker_id), "storePathRootDir": store, "listenPort": str(port),
            "haListenPort": str(port + 1), "grpcServerPort": str(grpc),
            "metricsPort": str(args.metrics_port + step if args.metrics_port else 0), "kafkaListenPort": str(kafka),
        }
        config, _ = load_configs(keys)  # a bad key or value stops `skiff up --ha` before anything starts
        specs.append(BrokerSpec(broker_id, args.host, port, port + 1, grpc, store, keys, config, kafka))
    return specs


def run_up_ha(args: argparse.Namespace, extra: list[str]) -> int:
    from skiff.broker.ha.etcd_process import EtcdProcess, etcd_binary
    from skiff.transport.errors import ListenError
    from skiff.transport.loop import run

    if etcd_binary() is None:
        raise SkiffError("skiff up --ha needs etcd: install Debian's etcd-server (apt-get install etcd-server, "
                         "or `make etcd`), then run it again")
    store_dir = args.dir or HA_STORE_DIR
    pair, tls_keys = try_out_tls(args, store_dir)
    config = namesrv_config(args, tls_keys)
    specs = broker_specs(args, extra, store_dir, tls_keys)
    dashboard_at = None if args.no_dashboard else (args.host, args.dashboard_port)
    etcd = EtcdProcess(os.path.join(store_dir, "etcd"), client_port=args.etcd_port,
                       peer_port=args.etcd_peer_port or args.etcd_port + 1)
    etcd.start()
    try:
        up = UpHa(config, specs, etcd, store_dir, dashboard_at, log_level=str(args.log_level),
                  restart_delay_s=None if args.no_restart else max(0.0, args.restart_delay), tls=pair)
        return run(up.serve)
    except ListenError as exc:
        raise ListenError(f"{exc}; skiff up --ha moves its ports with --namesrv-port, --broker-port, --grpc-port "
                          f"(0: no gRPC), --kafka-port (0: no Kafka listener), --etcd-port, and --metrics-port and "
                          f"--namesrv-metrics-port (0: no metrics)") from exc
    finally:
        etcd.stop()


class Broker:
    """One broker child process, started (and restarted) by `UpHa`."""

    def __init__(self, spec: BrokerSpec, up: UpHa) -> None:
        self.spec = spec
        self.up = up
        self.proc: asyncio.subprocess.Process | None = None
        self.started_at = 0.0
        self.listening = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "skiff", "--log-level", self.up.log_level, *self.spec.broker_args()]

    async def start(self) -> None:
        self.listening = asyncio.Event()
        self.proc = await asyncio.create_subprocess_exec(
            *self.command(), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # its own session: a Ctrl+C in the terminal reaches `skiff up --ha` alone, which
            # stops the brokers in order; and it dies with `skiff up --ha` if that is killed
            start_new_session=True, preexec_fn=_death_signal(), limit=1 << 20)
        self.started_at = time.monotonic()
        self._reader = asyncio.create_task(self._forward(self.proc))

    async def _forward(self, proc: asyncio.subprocess.Process) -> None:
        """Its output on this process's stderr, each line prefixed; what it says acted on."""
        assert proc.stdout is not None
        prefix = f"[broker {self.spec.broker_id}] "
        while True:
            try:
                raw = await proc.stdout.readline()
            except ValueError:  # a line over the limit: pass on what there is
                raw = await proc.stdout.read(1 << 20)
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\n")
            sys.stderr.write(prefix + line + "\n")
            sys.stderr.flush()
            if not self.listening.is_set() and LISTENING.search(line):
                self.listening.set()
            m = ELECTED.search(line)
            if m is not None:
                self.up.elected(self, int(m[1]))

    async def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> bool:
        """True once it listens; False if it exited first or took longer than ``timeout_s``."""
        assert self.proc is not None
        listening = asyncio.ensure_future(self.listening.wait())
        exited = asyncio.ensure_future(self.proc.wait())
        try:
            await asyncio.wait({listening, exited}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            listening.cancel()
            exited.cancel()
        return self.listening.is_set() and self.running

    async def exited(self) -> int:
        assert self.proc is not None
        code = await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):  # its last lines first
                await asyncio.wait_for(asyncio.shield(self._reader), 2)
        return code

    async def stop(self) -> None:
        """SIGTERM (a clean stop), SIGKILL after STOP_TIMEOUT_S."""
        if not self.running:
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            log.warning("%s (pid %d) did not stop within %g s: killing it", self.spec.name, self.pid,
                        STOP_TIMEOUT_S)
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reader, 2)


def _death_signal() -> Callable[[], None] | None:
    """For the child before exec (resolved here, in the parent: nothing is imported after the
    fork): SIGTERM it when `skiff up --ha` dies, even by kill -9 (Linux's PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: Ctrl+C and SIGTERM still stop the brokers
        return None
    return lambda: prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class UpHa:
    """The NameServer, the dashboard and the supervision of the broker processes."""

    def __init__(self, namesrv_config: NamesrvConfig, specs: list[BrokerSpec], etcd: EtcdProcess, store_dir: str,
                 dashboard_at: tuple[str, int] | None, *, log_level: str, restart_delay_s: float | None,
                 tls: CertificatePair | None = None) -> None:
        """``tls``: `skiff up --tls`'s pair, which every server here serves (the brokers' keys name it)."""
        self.namesrv_config = namesrv_config
        self.etcd = etcd
        self.store_dir = store_dir
        self.dashboard_at = dashboard_at
        self.log_level = log_level
        self.restart_delay_s = restart_delay_s
        self.tls = tls
        self.brokers = [Broker(spec, self) for spec in specs]
        self.reported = False
        self.stopping = False
        self._client: RemotingClient | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @staticmethod
    def say(text: str) -> None:
        print(f"skiff up --ha: {text}", flush=True)

    async def serve(self, stop: asyncio.Event) -> int:
        from skiff.cli.broker import _start_dashboard
        from skiff.cli.namesrv import metrics_note
        from skiff.dashboard.server import DashboardServer
        from skiff.dashboard.service import DashboardConfig
        from skiff.namesrv import NamesrvServer
        from skiff.transport import RemotingClient

        namesrv = NamesrvServer(self.namesrv_config)
        await namesrv.start()
        dashboard: DashboardServer | None = None
        client_tls = self.brokers[0].spec.config.client_tls()  # as the brokers dial: over TLS with --tls
        self._client = RemotingClient(tls=client_tls)
        try:
            log.info("skiff namesrv listening on %s:%d (kv config in memory)%s", self.namesrv_config.listen_host,
                     namesrv.port, metrics_note(namesrv))
            local = f"127.0.0.1:{namesrv.port}"
            for broker in self.brokers:
                names = broker.spec.keys.get("namesrvAddr", "").split(";")
                broker.spec.keys["namesrvAddr"] = ";".join(dict.fromkeys(a for a in [local, *names] if a.strip()))
            if self.dashboard_at is not None:
                dashboard = DashboardServer(DashboardConfig(local, tls=client_tls), *self.dashboard_at)
                await _start_dashboard(dashboard)
            await self._end_previous_term()
            await self._start_brokers()
            await self._report(namesrv.port, dashboard)
            for broker in self.brokers:
                self._spawn(self._supervise(broker, stop))
            await stop.wait()
        finally:
            self.stopping = True
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*(b.stop() for b in self.brokers))
            await self._client.close()
            if dashboard is not None:
                await dashboard.stop()
            await namesrv.stop()
        return 0

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _end_previous_term(self) -> None:
        """Revoke the lease of a previous run's master: that run's brokers are gone (they die with
        it), but after a Ctrl+C its etcd (in the terminal's process group) stopped before they could
        revoke it, and the brokers would wait out the lease before electing."""
        from skiff.broker.ha.controller import ControllerError, EtcdGroup

        config = self.brokers[0].spec.config
        group = EtcdGroup(config.etcd_endpoints, config.broker_cluster_name, config.broker_name,
                          max(1, config.controller_lease_ttl_ms // 1000))
        try:
            await group.connect()
            seen = await group.read()
            if seen.master_lease:
                await group.revoke(seen.master_lease)
                log.info("revoked the lease of the previous run's master of %s", config.broker_name)
            await group.resign()
        except ControllerError as exc:
            log.warning("could not look for a previous run's master lease: %s", exc)
        finally:
            await group.close()

    async def _start_brokers(self) -> None:
        for broker in self.brokers:
            await broker.start()
        for broker in self.brokers:
            if not await broker.wait_listening():
                raise SkiffError(f"{broker.spec.name} (pid {broker.pid}) did not start: see its [broker "
                                 f"{broker.spec.broker_id}] lines above")

    async def runtime(self, broker: Broker) -> dict[str, str]:
        """Its runtime table (role, epoch, ...), or {} when it does not answer."""
        from skiff.protocol.bodies.admin import KVTable
        from skiff.protocol.codes import RequestCode, ResponseCode
        from skiff.protocol.command import RemotingCommand

        assert self._client is not None
        try:
            resp = await self._client.invoke(broker.spec.addr, RemotingCommand.request(
                RequestCode.GET_BROKER_RUNTIME_INFO), 2000)
        except Exception:  # noqa: BLE001 - not listening (yet, or any more)
            return {}
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            return {}
        return dict(KVTable.from_json(resp.body).table)

    async def _roles(self) -> list[dict[str, str]]:
        """Each broker's runtime table once one is master, every one is in its epoch and in its
        SyncStateSet (so a kill -9 of the master now is followed by an election), or at the deadline."""
        deadline = time.monotonic() + ROLE_TIMEOUT_S
        everyone = {str(b.spec.broker_id) for b in self.brokers}
        while True:
            tables = await asyncio.gather(*(self.runtime(b) for b in self.brokers))
            masters = [t for t in tables if t.get("brokerRole", "SLAVE") != "SLAVE"]
            epoch = masters[0].get("controllerEpoch") if len(masters) == 1 else None
            if epoch and all(t.get("controllerEpoch") == epoch and _in_sync(t) == everyone for t in tables) \
                    or time.monotonic() > deadline:
                return tables
            await asyncio.sleep(0.1)

    async def _report(self, namesrv_port: int, dashboard: DashboardServer | None) -> None:
        tables = await self._roles()
        etcd_pid = self.etcd.proc.pid if self.etcd.proc is not None else 0
        shown = dashboard.url if dashboard is not None and dashboard._runner is not None else "off"
        lines = [f"skiff up --ha: NameServer 127.0.0.1:{namesrv_port}, etcd {self.etcd.endpoint} (pid {etcd_pid}), "
                 f"dashboard {shown}, store {self.store_dir}"]
        master = None
        for broker, table in zip(self.brokers, tables):
            role = _role(table)
            if role == "MASTER":
                master = broker
            lines.append(f"  {broker.spec.name}: pid {broker.pid}, {broker.spec.addr} "
                         f"({role}, epoch {table.get('controllerEpoch', '?')}), {broker.spec.ports_text()}, "
                         f"store {broker.spec.store}")
        lines.extend(self.tls_lines())
        lines.append(f"  try: skiff cluster list -n 127.0.0.1:{namesrv_port}")
        after = ("this command restarts a broker that died after %g s; it comes back as a slave"
                 % self.restart_delay_s if self.restart_delay_s is not None else "a broker that dies is left down")
        if master is not None:
            lines.append(f"  failover: kill -9 {master.pid} (the master); {after}")
        print("\n".join(lines), flush=True)
        self.reported = True

    def tls_lines(self) -> list[str]:
        """The report's line on what a client needs with --tls (none without)."""
        return [] if self.tls is None else [f"  {tls_note(self.tls)}"]

    def elected(self, broker: Broker, epoch: int) -> None:
        if self.reported and not self.stopping:
            self.say(f"{broker.spec.name} (pid {broker.pid}) is MASTER now, epoch {epoch}")

    async def _supervise(self, broker: Broker, stop: asyncio.Event) -> None:
        """Report each exit of ``broker``; restart it after the delay, or say how to."""
        quick_exits = 0
        while True:
            pid = broker.pid
            code = await broker.exited()
            if self.stopping:
                return
            ran_s = time.monotonic() - broker.started_at
            quick_exits = quick_exits + 1 if ran_s < QUICK_EXIT_S else 0
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
            if self.restart_delay_s is None or quick_exits >= QUICK_EXITS_MAX:
                why = "--no-restart" if self.restart_delay_s is None else \
                    f"it exited {quick_exits} times within {QUICK_EXIT_S:g} s of starting"
                self.say(f"{broker.spec.name} (pid {pid}) {how}; left down ({why}). To start it again by hand "
                         f"(not supervised: stop it yourself): skiff {shlex.join(broker.command()[5:])}")
                return
            self.say(f"{broker.spec.name} (pid {pid}) {how}; restarting it in {self.restart_delay_s:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.restart_delay_s)
            if stop.is_set():
                return
            await broker.start()
            if await broker.wait_listening():
                self.say(f"{broker.spec.name} restarted: pid {broker.pid}, {broker.spec.addr}")
                self._spawn(self._rejoined(broker))

    async def _rejoined(self, broker: Broker) -> None:
        """Say what a restarted broker became: a slave following the master (or the master)."""
        deadline = time.monotonic() + ROLE_TIMEOUT_S
        while broker.running and time.monotonic() < deadline:
            table = await self.runtime(broker)
            role = _role(table)
            if role == "MASTER":
                return  # elected: its log line said so
            if role == "slave" and table.get("haConnected") == "true" and table.get("controllerMasterId") \
                    and str(broker.spec.broker_id) in _in_sync(table):
                self.say(f"{broker.spec.name} (pid {broker.pid}) is a slave of id {table['controllerMasterId']}, "
                         f"epoch {table.get('controllerEpoch', '?')}, in sync")
                return
            await asyncio.sleep(0.2)


def _role(table: Mapping[str, str]) -> str:
    role = table.get("brokerRole")
    return "?" if role is None else "slave" if role == "SLAVE" else "MASTER"


def _in_sync(table: Mapping[str, str]) -> set[str]:
    """The broker ids of the SyncStateSet a runtime table shows."""
    return {i for i in table.get("controllerSyncStateSet", "").split(",") if i}
