"""``skiff dashboard``: the web dashboard over the admin API.

    skiff dashboard -n 127.0.0.1:9876 [--host 127.0.0.1] [--port 8080] [--tls [--tls-trust PEM] ...]

It runs until SIGTERM or SIGINT. ``skiff up`` runs one too (``--no-dashboard``
turns it off); docs/dashboard.md has the pages and the JSON API.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from skiff.cli.admin import default_namesrv, tls_args, tls_config
from skiff.dashboard import DEFAULT_PORT
from skiff.transport.loop import run

if TYPE_CHECKING:
    from skiff.dashboard.server import DashboardServer


def register(sub: Any) -> None:
    cmd = sub.add_parser("dashboard", help="run the web dashboard",
                         description="Serve the web dashboard for the cluster the NameServers know.")
    cmd.add_argument("-n", "--namesrv", default=default_namesrv(), metavar="HOST:PORT;...",
                     help="NameServer addresses (default $SKIFF_NAMESRV or 127.0.0.1:9876)")
    cmd.add_argument("--host", default="127.0.0.1",
                     help="address to listen on (default 127.0.0.1: only this machine can open it)")
    cmd.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks one)")
    tls_args(cmd)
    cmd.set_defaults(handler=lambda args, extra: run_dashboard(args))


def run_dashboard(args: argparse.Namespace) -> int:
    from skiff.dashboard.server import DashboardServer  # imported here: other commands need no web stack
    from skiff.dashboard.service import DashboardConfig

    server = DashboardServer(DashboardConfig(args.namesrv, tls=tls_config(args)), args.host, args.port)
    return run(lambda stop: serve_dashboard(server, stop))


async def serve_dashboard(server: DashboardServer, stop: asyncio.Event) -> int:
    await server.start()
    try:
        await stop.wait()
    finally:
        await server.stop()
    return 0
