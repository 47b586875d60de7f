"""`skiff up --ha`: a try-out of automatic failover on one machine.

One process runs a NameServer and two brokers of one brokerName in controller
mode (ids 1 and 2, SYNC_MASTER while master); a child process runs a
single-member etcd (Debian's ``etcd-server``) they elect their master through.
It prints what runs where. Both brokers live in this process, so it shows the
election, the roles and replication; to watch a failover, run the brokers as
two `skiff broker` processes with the same keys and kill one (docs/replication.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
from collections.abc import Mapping

from skiff.common.config import parse_overrides
from skiff.common.errors import SkiffError
from skiff.cli.etcd_process import EtcdProcess, etcd_binary
from skiff.transport.loop import run

log = logging.getLogger(__name__)

GROUP = "broker-ha"
BROKER_PORT_STEP = 10
"""The second broker listens 10 ports above the first (HA ports are each listen port + 1)."""


def run_up_ha(args: argparse.Namespace, extra: list[str]) -> int:
    from skiff.broker import load_configs
    from skiff.namesrv import NamesrvConfig

    if etcd_binary() is None:
        raise SkiffError("skiff up --ha needs etcd: install Debian's etcd-server (apt-get install etcd-server, "
                         "or `make etcd`), then run it again")
    namesrv_config = NamesrvConfig(listen_host=args.host, listen_port=args.namesrv_port, metrics_port=0)
    namesrv_config.validate()
    overrides = parse_overrides(extra)
    configs = []
    for broker_id in (1, 2):
        keys: Mapping[str, str] = {
            "storePathRootDir": os.path.join(args.dir, f"broker-{broker_id}"), "listenHost": args.host,
            "listenPort": str(args.broker_port + BROKER_PORT_STEP * (broker_id - 1)), "brokerName": GROUP,
            "brokerId": str(broker_id), "brokerRole": "SYNC_MASTER", "enableControllerMode": "true",
            "controllerEtcdEndpoints": f"127.0.0.1:{args.etcd_port}", "metricsPort": "0",
            "grpcServerPort": "0",  # two brokers in one process: one port each would be needed
        }
        configs.append(load_configs(keys, overrides))
    etcd = EtcdProcess(os.path.join(args.dir, "etcd"), client_port=args.etcd_port,
                       peer_port=args.etcd_peer_port or args.etcd_port + 1)
    etcd.start()
    try:
        return run(lambda stop: _serve(namesrv_config, configs, etcd, stop))
    finally:
        etcd.stop()


async def _serve(namesrv_config, configs, etcd: EtcdProcess, stop: asyncio.Event) -> int:  # type: ignore[no-untyped-def]
    from skiff.broker import BrokerServer
    from skiff.namesrv import NamesrvServer

    namesrv = NamesrvServer(namesrv_config)
    await namesrv.start()
    servers: list[BrokerServer] = []
    try:
        local = f"127.0.0.1:{namesrv.port}"
        for broker, store in configs:
            server = BrokerServer(dataclasses.replace(broker, namesrv_addr=local), store)
            await server.start()
            servers.append(server)
        await _report(namesrv.port, etcd, servers)
        await stop.wait()
    finally:
        for server in servers:
            await server.stop()
        await namesrv.stop()
    return 0


async def _report(namesrv_port: int, etcd: EtcdProcess, servers: list) -> None:  # type: ignore[type-arg]
    """Wait (briefly) for the election, then say what runs where."""
    for _ in range(100):
        if any(not s.role.is_slave for s in servers):
            break
        await asyncio.sleep(0.1)
    lines = [f"skiff up --ha: NameServer 127.0.0.1:{namesrv_port}, etcd {etcd.endpoint} (data {etcd.data_dir})"]
    for s in servers:
        role = "MASTER" if not s.role.is_slave else "slave"
        lines.append(f"  {s.config.broker_name} id {s.config.broker_id}: {s.addr} ({role}, epoch {s.role.epoch}), "
                     f"store {s.store_config.root}")
    lines.append("  try: skiff cluster list -n 127.0.0.1:%d" % namesrv_port)
    print("\n".join(lines), flush=True)
    log.info("skiff up listening on 127.0.0.1:%d", namesrv_port)
