"""``skiff broker`` and ``skiff up``: run a broker, or a NameServer and a broker in one process.

    skiff broker [-c broker.conf] [-n host:port;host:port] [--<key>=<value> ...]
    skiff up [--dir PATH] [--host 127.0.0.1] [--namesrv-port 9876] [--broker-port 10911] [--<key>=<value> ...]
             [--dashboard-port 8080 | --no-dashboard]
    skiff up --ha ...   (etcd and two brokers as child processes: skiff.cli.up_ha, docs/replication.md)
    skiff up --brokers N ...   (N brokers as child processes, one per core: skiff.cli.up_brokers)

Keys are RocketMQ's broker.conf names, for the broker or its store
(``--listenPort=10911 --storePathRootDir=/data --brokerName=broker-a
--flushDiskType=SYNC_FLUSH``); overrides win over the file, flags over both.
Both commands log where they listen and store, stop cleanly on SIGTERM or SIGINT
(unregister, drain, persist offsets, flush the store), and exit with status 1
and the reason on a bad config or a port in use. ``skiff up`` also serves the web
dashboard (its start line gives the address) and Prometheus metrics (broker 5557,
NameServer 5558; docs/metrics.md); a dashboard or metrics port in use is logged
and the server runs without it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import resource
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skiff.cli import up_brokers, up_ha
from skiff.cli.namesrv import metrics_note
from skiff.common import kernels
from skiff.cli.up_tls import log_tls_note, up_tls_keys, up_tls_pair
from skiff.common.config import build_config, parse_overrides, read_properties_file
from skiff.dashboard import DEFAULT_PORT
from skiff.transport.errors import ListenError
from skiff.transport.loop import run

if TYPE_CHECKING:
    from skiff.broker import BrokerConfig, BrokerServer
    from skiff.dashboard.server import DashboardServer
    from skiff.namesrv import NamesrvConfig
    from skiff.store import StoreConfig

log = logging.getLogger("skiff.broker")

UP_STORE_DIR = "./store"
UP_METRICS_PORT = 5557
"""`skiff up`'s broker metrics port: RocketMQ 5's metricsPromExporterPort default (the NameServer's is the next)."""
UP_KAFKA_PORT = 9092
"""Kafka's own default port: a Kafka client's bootstrap.servers default finds `skiff up`."""
TRY_OUT_STORE = {
    "mappedFileSizeCommitLog": str(64 << 20),
    "mappedFileSizeConsumeQueue": str(30_000 * 20),
    "maxHashSlotNum": "100000",
    "maxIndexNum": "400000",
}
"""`skiff up`'s file sizes: a try-out takes ~70 MB of disk (a 64 MiB CommitLog file, reserved
whole; an 8 MB sparse index; 600 KB ConsumeQueue files) instead of the 1.1 GB RocketMQ's sizes take.
`skiff broker` keeps RocketMQ's sizes; flags given to `skiff up` override these."""


def register(sub: Any) -> None:
    broker = sub.add_parser(
        "broker", help="run a broker",
        description="Run a broker. Extra --key=value arguments set any broker.conf key (broker or store).",
    )
    broker.add_argument("-c", "--config-file", metavar="broker.conf", help="Java properties file of settings")
    broker.add_argument("-n", "--namesrv-addr", metavar="HOST:PORT;...", help="NameServers (namesrvAddr)")
    broker.set_defaults(handler=run_broker, accepts_extra=True)

    up = sub.add_parser(
        "up", help="run a NameServer and a broker in one process",
        description="Run a NameServer and one broker in one process (the README's `make run`). "
                    "Extra --key=value arguments set broker.conf keys.",
    )
    up.add_argument("--dir", help=f"store directory (default {UP_STORE_DIR}; with --ha {up_ha.HA_STORE_DIR})")
    up.add_argument("--namesrv-port", type=int, default=9876, help="NameServer port (default 9876)")
    up.add_argument("--broker-port", type=int, default=10911, help="broker port (default 10911)")
    up.add_argument("--metrics-port", type=int, default=UP_METRICS_PORT,
                    help=f"broker's Prometheus port (default {UP_METRICS_PORT}; 0 turns metrics off)")
    up.add_argument("--namesrv-metrics-port", type=int, default=UP_METRICS_PORT + 1,
                    help=f"NameServer's Prometheus port (default {UP_METRICS_PORT + 1}; 0 turns it off)")
    up.add_argument("--host", default="127.0.0.1",
                    help="address both servers listen on and the broker advertises (default 127.0.0.1: "
                         "a local try-out is not reachable from other machines)")
    up.add_argument("--dashboard-port", type=int, default=DEFAULT_PORT,
                    help=f"web dashboard port on --host (default {DEFAULT_PORT}; 0 picks one)")
    up.add_argument("--no-dashboard", action="store_true", help="do not run the web dashboard")
    up.add_argument("--kafka-port", type=int, default=UP_KAFKA_PORT,
                    help=f"port of the broker's Kafka listener, for Kafka clients (default {UP_KAFKA_PORT}; 0 turns "
                         f"it off; skipped with a warning when taken; over TLS with --tls; with --brokers and --ha "
                         f"broker i's is 10·i above; docs/kafka.md)")
    up.add_argument("--tls", action="store_true",
                    help="serve both doors over TLS only, with a self-signed pair made in the store directory "
                         "(docs/tls.md); with --brokers and --ha every broker's, with one pair")
    up_ha.add_arguments(up)
    up_brokers.add_arguments(up)
    up.set_defaults(handler=run_up, accepts_extra=True)


def broker_configs(args: argparse.Namespace, extra: list[str]) -> tuple[BrokerConfig, StoreConfig]:
    from skiff.broker import load_configs  # imported here: `skiff --help` and `skiff namesrv` need none of it

    sources: list[Mapping[str, str]] = [read_properties_file(args.config_file)] if args.config_file else []
    sources.append(parse_overrides(extra))
    if args.namesrv_addr:
        sources.append({"namesrvAddr": args.namesrv_addr})
    return load_configs(*sources)


def run_broker(args: argparse.Namespace, extra: list[str]) -> int:
    broker_config, store_config = broker_configs(args, extra)
    return run(lambda stop: serve_broker(broker_config, store_config, stop))


def run_up(args: argparse.Namespace, extra: list[str]) -> int:
    from skiff.broker import load_configs
    from skiff.broker.config import default_broker_ip
    from skiff.namesrv import NamesrvConfig

    if args.ha:
        from skiff.cli.up_ha import run_up_ha
        return run_up_ha(args, extra)
    if args.brokers != 1:
        return up_brokers.run_up_brokers(args, extra)

    store_dir = args.dir or UP_STORE_DIR
    pair = up_tls_pair(store_dir, args.host, default_broker_ip(args.host)) if args.tls else None
    tls_keys = up_tls_keys(pair) if pair is not None else {}
    namesrv_config = build_config(NamesrvConfig, {"listenHost": args.host, "listenPort": str(args.namesrv_port),
                                                  "metricsPort": str(args.namesrv_metrics_port)}, tls_keys)
    broker_config, store_config = load_configs(
        {**TRY_OUT_STORE, "storePathRootDir": store_dir, "listenPort": str(args.broker_port),
         "listenHost": args.host, "metricsPort": str(args.metrics_port), **tls_keys},
        parse_overrides(extra),
    )
    dashboard = None if args.no_dashboard else (args.host, args.dashboard_port)
    if pair is not None:
        log_tls_note(pair)
    try:
        return run(lambda stop: serve_up(namesrv_config, broker_config, store_config, stop, dashboard,
                                         args.kafka_port))
    except ListenError as exc:
        # Each server binds its own ports (testing a port first and binding later races with
        # other processes): one that is taken stops `skiff up` with the option that moves it.
        raise ListenError(f"{exc}; skiff up moves its ports with --namesrv-port and --broker-port (0: a free "
                          f"one) and --metrics-port and --namesrv-metrics-port (0: no metrics)") from exc


def raise_open_file_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit; return the new soft limit.

    Every ConsumeQueue file holds a descriptor (as in RocketMQ, whose docs ask for
    ``ulimit -n 655350``), and Debian's default soft limit of 1,024 would stop a
    broker at about a thousand queues with "Too many open files"; the hard limit
    (often 524,288 or more) is the operator's choice, so it is left alone.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft


async def serve_broker(config: BrokerConfig, store_config: StoreConfig, stop: asyncio.Event,
                       dashboard: DashboardServer | None = None, kafka_port: int = 0) -> int:
    """``kafka_port``: `skiff up`'s Kafka listener, started if that port is free."""
    from skiff.broker import BrokerServer

    raise_open_file_limit()  # the broker warns if its queues come near the limit (skiff.broker.open_files)
    server = BrokerServer(config, store_config)
    await server.start()
    try:
        if kafka_port and server.kafka is None:
            try:
                await server.start_kafka(kafka_port)
            except ListenError as exc:
                log.warning("%s; the broker runs without it (--kafka-port picks another port)", exc)
        _log_listening(server)
        if dashboard is not None:
            await _start_dashboard(dashboard)
        await stop.wait()
    finally:
        if dashboard is not None:
            await dashboard.stop()
        await server.stop()
    log.info("skiff broker stopped")
    return 0


async def serve_up(namesrv_config: NamesrvConfig, config: BrokerConfig, store_config: StoreConfig,
                   stop: asyncio.Event, dashboard_at: tuple[str, int] | None = None, kafka_port: int = 0) -> int:
    from skiff.dashboard.server import DashboardServer
    from skiff.dashboard.service import DashboardConfig
    from skiff.namesrv import NamesrvServer

    namesrv = NamesrvServer(namesrv_config)
    await namesrv.start()
    try:
        log.info("skiff namesrv listening on %s:%d (kv config in memory)%s", namesrv_config.listen_host,
                 namesrv.port, metrics_note(namesrv))
        local = f"127.0.0.1:{namesrv.port}"
        namesrvs = ";".join(dict.fromkeys([local, *config.namesrv_addrs]))
        dashboard = None if dashboard_at is None else DashboardServer(
            DashboardConfig(local, tls=config.client_tls()), *dashboard_at)
        await serve_broker(dataclasses.replace(config, namesrv_addr=namesrvs), store_config, stop, dashboard,
                           kafka_port)
    finally:
        await namesrv.stop()
    return 0


async def _start_dashboard(dashboard: DashboardServer) -> None:
    """A dashboard that cannot start leaves the broker running: it is a convenience of the try-out."""
    from skiff.dashboard.server import DashboardError

    try:
        await dashboard.start()
    except DashboardError as exc:
        log.warning("%s; the broker runs without it (--dashboard-port picks another port)", exc)


def _log_listening(server: BrokerServer) -> None:
    c = server.config
    names = ";".join(c.namesrv_addrs) or "no NameServer"
    metrics = f", metrics at {server.metrics.url(c.advertised_ip)}" if server.metrics is not None else ""
    if server.kafka is not None:
        metrics += f", Kafka clients at {c.advertised_ip}:{server.kafka.port}"
    log.info("skiff broker listening on %s:%d, store %s (broker %s of cluster %s, advertised as %s, %s, "
             "registered with %s; %s)%s", c.listen_host, server.port, server.store_config.root, c.broker_name,
             c.broker_cluster_name, server.addr, server.store_config.flush_disk_type.name, names,
             kernels.IMPLEMENTATION, metrics)
