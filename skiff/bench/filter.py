"""Micro-benchmark of filter evaluation: `python -m skiff.bench.filter`.

Measures what the broker pays per candidate message at pull time: a tag
filter and SQL92 filters on raw stored properties (`matches_raw`), the same
SQL on an already decoded mapping (`matches`, the client's re-check), and the
full `decode_properties` that `matches_raw` avoids. Messages carry six
properties, as a typical producer's do (UNIQ_KEY, WAIT, TAGS, KEYS and two
user properties). Also reports the one-off parse-and-compile cost.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence

from skiff.common.properties import decode_properties, encode_properties
from skiff.filter import SqlFilter, build_filter, parse_tags

SELECTIVE_SQL = "a > 90 AND region IN ('eu', 'us')"
"""Matches about 6% of the generated messages."""

BROAD_SQL = "(a BETWEEN 10 AND 60 OR TAGS = 'TagB') AND region <> 'ap' AND price IS NULL"

REPEATED_SQL = "a IS NOT NULL AND a > 50"
"""Names a property twice, so matches_raw decodes all properties instead of searching."""


def make_messages(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        props = {
            "UNIQ_KEY": f"{rng.getrandbits(128):032X}",
            "WAIT": "true",
            "TAGS": rng.choice(["TagA", "TagB", "TagC", "TagD"]),
            "KEYS": f"order-{i}",
            "a": str(rng.randrange(100)),
            "region": rng.choice(["eu", "us", "ap", "sa", "af", "me"]),
        }
        out.append(encode_properties(props))
    return out


def rate(fn: Callable[[bytes], object], items: Sequence, rounds: int) -> tuple[float, int]:
    """Best-of-rounds evaluations per second, and how many items matched."""
    best = float("inf")
    hits = 0
    for _ in range(rounds):
        start = time.perf_counter()
        hits = sum(1 for item in items if fn(item))
        best = min(best, time.perf_counter() - start)
    return len(items) / best, hits


def compile_cost_us(expression: str, repeat: int = 200) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        SqlFilter.compile(expression)
    return (time.perf_counter() - start) / repeat * 1e6


def main(argv: Sequence[str] | None = None) -> None:
    args = _arguments(argv)
    raws = make_messages(args.messages)
    decoded = [decode_properties(r) for r in raws]
    tag = parse_tags("TagA || TagC")
    selective = build_filter(SELECTIVE_SQL, "SQL92")
    broad = build_filter(BROAD_SQL, "SQL92")
    repeated = build_filter(REPEATED_SQL, "SQL92")
    cases: list[tuple[str, Callable, Sequence]] = [
        ("tag filter, matches_raw", tag.matches_raw, raws),
        ("selective SQL, matches_raw", selective.matches_raw, raws),
        ("broad SQL, matches_raw", broad.matches_raw, raws),
        ("repeated-name SQL, matches_raw", repeated.matches_raw, raws),
        ("selective SQL, matches (decoded dict)", selective.matches, decoded),
        ("decode_properties alone (for scale)", decode_properties, raws),
        (
            "selective SQL, decode_properties + matches",
            lambda r: selective.matches(decode_properties(r)),
            raws,
        ),
    ]
    print(f"{args.messages} messages of 6 properties, best of {args.rounds} rounds")
    print(f"  selective SQL: {SELECTIVE_SQL}")
    print(f"  broad SQL:     {BROAD_SQL}")
    print(f"  repeated-name: {REPEATED_SQL}")
    for name, fn, items in cases:
        per_s, hits = rate(fn, items, args.rounds)
        matched = f"{hits / len(items):6.1%} matched" if fn is not decode_properties else ""
        print(f"{name:45s} {per_s / 1e6:6.2f} M/s  {1e6 / per_s:6.2f} µs/msg  {matched}")
    cost_us = compile_cost_us(SELECTIVE_SQL)
    print(f"{'parse + compile, selective SQL (uncached)':45s} {cost_us:8.0f} µs")


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.filter", description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000, help="messages per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best one counts")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
