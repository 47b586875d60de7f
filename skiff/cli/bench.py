"""``skiff bench <name> [options]``: run the benchmark module ``skiff.bench.<name>``.

Every module in `skiff.bench` with a ``main(argv)`` function is a subcommand, named
after the module less a ``_load`` suffix (``broker_load`` is ``skiff bench broker``);
a package counts as a module, with its ``main`` in its ``__init__`` (``skiff bench
compare`` is `skiff.bench.compare`); names starting with ``_`` are not subcommands.
The options after the name go to that function (``skiff bench store --quick --json``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from typing import Any

import skiff.bench


LOAD_SUFFIX = "_load"


def bench_modules() -> dict[str, str]:
    """Subcommand name -> module (or package) name, for every one directly under `skiff.bench`."""
    names = [m.name for m in pkgutil.iter_modules(skiff.bench.__path__) if not m.name.startswith("_")]
    return {name.removesuffix(LOAD_SUFFIX): name for name in sorted(names)}


def bench_names() -> list[str]:
    return sorted(bench_modules())


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "bench", help="run a benchmark",
        description="Run a benchmark; options after its name go to it (try: skiff bench store --help).",
    )
    parser.add_argument("name", choices=bench_names(), help="which benchmark")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own options")
    parser.set_defaults(handler=run_bench, accepts_extra=True)


def run_bench(args: argparse.Namespace, extra: list[str]) -> int:
    module = importlib.import_module(f"skiff.bench.{bench_modules()[args.name]}")
    return int(module.main([*args.options, *extra]) or 0)
