"""``skiff chaos [options]``: the OpenChaos-style run (docs/reliability.md). Its options are
parsed by skiff.bench._chaos, which runs it with the test harness (reached through
skiff.bench, as `skiff bench` reaches it: the CLI itself imports no harness)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    parser = sub.add_parser("chaos", add_help=False, help="chaos run: faults under load, checked (needs root, etcd)",
                            description="See skiff chaos --help.")
    parser.set_defaults(handler=run_chaos, accepts_extra=True)


def run_chaos(args: argparse.Namespace, extra: list[str]) -> int:
    from skiff.bench._chaos import main  # the harness and matplotlib load only for this command
    return main(extra)
