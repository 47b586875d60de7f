"""What the micro-benchmarks (`skiff bench acl`, `skiff bench metrics`) share: best-of-N timing
and the command line (``--calls``, ``--repeat``, ``--json``)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def best_us(fn: Callable[[], object], calls: int, repeat: int) -> float:
    """µs per call of ``fn``: the fastest of ``repeat`` rounds of ``calls`` calls (the least disturbed
    by other work on a shared machine)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - started) / calls)
    return best * 1e6


def micro_main(argv: Sequence[str] | None, prog: str, doc: str, default_calls: int,
               measure: Callable[[int, int], Mapping[str, Any]], line: Callable[[str, Any], str]) -> int:
    """Parse the options, run ``measure(calls, repeat)``, print JSON or one ``line(name, figure)`` each."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=default_calls, help="calls per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the best is reported)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.calls, args.repeat)
    print(json.dumps(figures, indent=2) if args.json else "\n".join(line(k, v) for k, v in figures.items()))
    return 0
