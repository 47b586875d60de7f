"""`skiff up --brokers N`: N brokers on one host behind one NameServer, one per core.

One Python process uses one core. A bigger host runs more brokers, each its own
process, store and ports, each a master of its own broker group (``broker-a``,
``broker-b``, ...) in the same cluster, registered with one NameServer. A topic
created on the cluster gets queues on every broker; producers spread their sends
over all of its queues and consumers share them by the normal routes and
rebalancing, so nothing in a client changes.

This command runs the NameServer and the dashboard in its own process (as plain
`skiff up` does) and the brokers as ``skiff broker`` child processes, supervised as
`skiff up --ha`'s are (`skiff.cli.up_ha.UpHa` without etcd: their log lines forwarded
with a ``[broker N]`` prefix, SIGTERM passed on, killed with this process). A broker
that exits is reported and left down. Broker ``i`` (from 0) stores in ``DIR/broker-<letter>``
and listens on ``--broker-port + 10·i`` (HA one above), gRPC ``--grpc-port + 10·i``,
metrics ``--metrics-port + 10·i``, Kafka clients ``--kafka-port + 10·i`` (9092, 9102, ...;
each broker advertises its listener in the NameServer's KV config, so any one of them
bootstraps a Kafka client to all). The try-out's small files apply
(`skiff.cli.broker.TRY_OUT_STORE`). With ``--tls`` every broker serves its doors over TLS
only with the one pair of `skiff.cli.up_tls` (as `skiff up --ha` does). docs/cli.md and
docs/performance.md ("Two brokers on two cores") have the measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import string
from collections.abc import Mapping
from typing import TYPE_CHECKING

from skiff.cli.up_ha import BROKER_PORT_STEP, Broker, BrokerSpec, UpHa, check_own_ports, kafka_port, namesrv_config
from skiff.cli.up_tls import try_out_tls
from skiff.common.config import parse_overrides
from skiff.common.errors import ConfigError

if TYPE_CHECKING:
    from skiff.dashboard.server import DashboardServer
    from skiff.namesrv import NamesrvConfig
    from skiff.transport.certificates import CertificatePair


MAX_BROKERS = 26
"""Broker names run broker-a to broker-z."""
PER_BROKER_KEYS = ("brokerName", "brokerId", "brokerRole", "listenPort", "haListenPort", "grpcServerPort",
                   "metricsPort", "kafkaListenPort", "storePathRootDir")
"""Keys `skiff up --brokers` sets for each broker; as --key=value they would give every one the same."""


def add_arguments(up: argparse.ArgumentParser) -> None:
    up.add_argument("--brokers", type=int, default=1, metavar="N",
                    help="run N brokers (broker-a, broker-b, ...: one per core, each its own store under --dir "
                         "and ports 10 apart) as child processes behind the NameServer (default 1: one broker "
                         "in this process)")


@dataclasses.dataclass
class NamedSpec(BrokerSpec):
    """A broker of `skiff up --brokers`: a master of its own group, named by its group."""

    @property
    def name(self) -> str:
        return self.keys["brokerName"]


def broker_name(index: int) -> str:
    return f"broker-{string.ascii_lowercase[index]}"


def broker_specs(args: argparse.Namespace, extra: list[str], store_dir: str,
                 tls_keys: Mapping[str, str]) -> list[NamedSpec]:
    """Each broker's keys: the try-out's file sizes (and `try_out_tls`'s keys), then the flags
    given, then its own name, store and ports."""
    from skiff.broker import load_configs
    from skiff.cli.broker import TRY_OUT_STORE

    count = args.brokers
    if not 1 <= count <= MAX_BROKERS:
        raise ConfigError(f"--brokers {count}: from 1 to {MAX_BROKERS}")
    overrides = parse_overrides(extra)
    check_own_ports(args, overrides, PER_BROKER_KEYS, f"--brokers {count}", count)
    specs = []
    for i in range(count):
        step = BROKER_PORT_STEP * i
        port = args.broker_port + step
        grpc = args.grpc_port + step if args.grpc_port else 0
        kafka = kafka_port(args, i)
        store = os.path.join(store_dir, broker_name(i))
        keys = {
            **TRY_OUT_STORE, "listenHost": args.host, **tls_keys, **overrides,
            "brokerName": broker_name(i), "brokerId": "0", "brokerRole": overrides.get("brokerRole", "ASYNC_MASTER"),
            "storePathRootDir": store, "listenPort": str(port), "haListenPort": str(port + 1),
            "grpcServerPort": str(grpc), "metricsPort": str(args.metrics_port + step if args.metrics_port else 0),
            "kafkaListenPort": str(kafka),
        }
        config, _ = load_configs(keys)  # a bad key or value stops everything before anything starts
        specs.append(NamedSpec(i + 1, args.host, port, port + 1, grpc, store, keys, config, kafka))
    return specs


def run_up_brokers(args: argparse.Namespace, extra: list[str]) -> int:
    from skiff.cli.broker import UP_STORE_DIR
    from skiff.transport.errors import ListenError
    from skiff.transport.loop import run

    store_dir = args.dir or UP_STORE_DIR
    pair, tls_keys = try_out_tls(args, store_dir)
    config = namesrv_config(args, tls_keys)
    specs = broker_specs(args, extra, store_dir, tls_keys)
    dashboard_at = None if args.no_dashboard else (args.host, args.dashboard_port)
    up = UpBrokers(config, specs, store_dir, dashboard_at, log_level=str(args.log_level), tls=pair)
    try:
        return run(up.serve)
    except ListenError as exc:
        raise ListenError(f"{exc}; skiff up --brokers moves its ports with --namesrv-port, --broker-port, "
                          f"--grpc-port (0: no gRPC), --kafka-port (0: no Kafka listeners), --metrics-port and "
                          f"--namesrv-metrics-port (0: no metrics)") from exc


class UpBrokers(UpHa):
    """`UpHa`'s NameServer, dashboard and broker processes, without etcd and elections: each
    broker is the master of its own group from the start."""

    def __init__(self, namesrv_config: NamesrvConfig, specs: list[NamedSpec], store_dir: str,
                 dashboard_at: tuple[str, int] | None, *, log_level: str, tls: CertificatePair | None = None) -> None:
        super().__init__(namesrv_config, list(specs), None, store_dir, dashboard_at,  # type: ignore[arg-type]
                         log_level=log_level, restart_delay_s=None, tls=tls)

    async def _end_previous_term(self) -> None:
        """No controller, no lease to end."""

    async def _report(self, namesrv_port: int, dashboard: DashboardServer | None) -> None:
        shown = dashboard.url if dashboard is not None and dashboard._runner is not None else "off"
        lines = [f"skiff up --brokers {len(self.brokers)}: NameServer 127.0.0.1:{namesrv_port}, dashboard {shown}, "
                 f"store {self.store_dir}"]
        for broker in self.brokers:
            lines.append(f"  {broker.spec.name}: pid {broker.pid}, {broker.spec.addr}, {broker.spec.ports_text()}, "
                         f"store {broker.spec.store}")
        lines.extend(self.tls_lines())
        lines.append(f"  try: skiff topic create -n 127.0.0.1:{namesrv_port} -t T (queues on every broker)")
        print("\n".join(lines), flush=True)
        self.reported = True

    async def _supervise(self, broker: Broker, stop: asyncio.Event) -> None:
        """Say when a broker exits: it is left down (the others go on serving their queues)."""
        pid = broker.pid
        code = await broker.exited()
        if not self.stopping:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            print(f"skiff up --brokers: {broker.spec.name} (pid {pid}) {how}; left down", flush=True)
