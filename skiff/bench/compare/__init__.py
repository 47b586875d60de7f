"""The side-by-side benchmark: Skiff against RabbitMQ, Redis and NATS on one machine.

``skiff bench compare [options]`` runs it (`main` below, which is `run.main`);
`worker.py` is the client process each workload starts; the other modules hold
one concern each (child processes, servers, client drivers, ceilings, the report).
It needs the ``bench`` extra (``pip install skiffmq[bench]``): `run` is imported
only when the benchmark runs, so listing ``skiff bench`` does not.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``skiff bench compare``: see `skiff.bench.compare.run`."""
    from skiff.bench.compare.run import main as run_main

    return run_main(argv)
