"""``skiff namesrv``: run a NameServer until SIGTERM or SIGINT.

    skiff namesrv [--listen-port 9876] [--host 0.0.0.0] [-c namesrv.conf] [--<key>=<value> ...]

Keys are NamesrvConfig's RocketMQ names (``--scanNotActiveBrokerInterval=1000``);
options given as flags win over overrides, which win over the file.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from skiff.common.config import build_config, parse_overrides, read_properties_file
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.transport.loop import run

log = logging.getLogger("skiff.namesrv")


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "namesrv", help="run a NameServer",
        description="Run a NameServer. Extra --key=value arguments set any namesrv.conf key.",
    )
    parser.add_argument("-c", "--config-file", metavar="namesrv.conf", help="Java properties file of settings")
    parser.add_argument("--listen-port", type=int, help="port to listen on (listenPort, default 9876; 0 picks one)")
    parser.add_argument("--host", help="address to listen on (listenHost, default 0.0.0.0)")
    parser.set_defaults(handler=run_namesrv, accepts_extra=True)


def namesrv_config(args: argparse.Namespace, extra: list[str]) -> NamesrvConfig:
    """The config from the file, then ``--key=value`` overrides, then the flags."""
    sources = [read_properties_file(args.config_file)] if args.config_file else []
    sources.append(parse_overrides(extra))
    flags = {"listenPort": args.listen_port, "listenHost": args.host}
    sources.append({k: v for k, v in flags.items() if v is not None})
    return build_config(NamesrvConfig, *sources)


def run_namesrv(args: argparse.Namespace, extra: list[str]) -> int:
    return run(lambda stop: serve(namesrv_config(args, extra), stop))


async def serve(config: NamesrvConfig, stop: asyncio.Event) -> int:
    server = NamesrvServer(config)
    await server.start()
    kv = f"kv config in {server.kv.path}" if server.kv.path else "kv config in memory"
    log.info("skiff namesrv listening on %s:%d (%s)%s", config.listen_host, server.port, kv, metrics_note(server))
    try:
        await stop.wait()
    finally:
        await server.stop()
    log.info("skiff namesrv stopped")
    return 0


def metrics_note(server: NamesrvServer) -> str:
    """", metrics at http://host:port/metrics" when the server exports metrics, else ""."""
    if server.metrics is None:
        return ""
    return f", metrics at {server.metrics.url(server.config.listen_host)}"
