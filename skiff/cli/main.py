"""Entry point of the `skiff` command.

Each command family lives in its own module with a ``register(subparsers)``
function; this module only assembles them. A command's handler returns the
process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from skiff.client.errors import MessageValidationError
from skiff.common.errors import ConfigError, SkiffError

COMMAND_MODULES: tuple[str, ...] = (
    "skiff.cli.namesrv", "skiff.cli.broker", "skiff.cli.admin", "skiff.cli.topic", "skiff.cli.consumer",
    "skiff.cli.message", "skiff.cli.timer", "skiff.cli.bench",
    "skiff.cli.dashboard", "skiff.cli.archive", "skiff.cli.version",
)
"""Modules that register subcommands, in the order `skiff --help` lists them."""
BAD_ARGUMENT = (ConfigError, MessageValidationError)
"""Bad input refused before any work: a configuration key or value (servers and clients alike,
an address among them), a name, an expression, a message. Like argparse's own refusals these
exit 2; every other failure (servers' answers, the network, timeouts, a port in use) exits 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skiff", description="Skiff: a RocketMQ-compatible message queue.")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.handler(args, extra) or 0)
    except BAD_ARGUMENT as exc:
        print(f"skiff: {exc}", file=sys.stderr)
        return 2
    except SkiffError as exc:
        print(f"skiff: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
