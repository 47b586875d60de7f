"""``skiff version``: the package version, the Python running it, and whether the compiled
kernels are in use (`skiff.common.kernels`), so a speed figure can be told apart from
a pure-Python one."""

from __future__ import annotations

import argparse
import platform
from typing import Any

import skiff
from skiff.common import kernels


def register(sub: Any) -> None:
    version = sub.add_parser("version", help="the version, the Python and the kernels in use",
                             description="Print Skiff's version, the Python running it and which kernels run.")
    version.set_defaults(handler=run_version)


def version_line() -> str:
    return f"skiff {skiff.__version__} (Python {platform.python_version()}; {kernels.IMPLEMENTATION})"


def run_version(args: argparse.Namespace, extra: list[str]) -> int:
    print(version_line())
    return 0
