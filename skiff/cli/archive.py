"""``skiff export`` and ``skiff replay``: a topic range to Parquet partitioned by date, and an
archive back into a topic (docs/spark.md, "Export and replay"). Both run a local Spark job
(``--master``, default local[2]); they need the ``spark`` extra (pyspark, pyarrow).

    skiff export -t Orders -o /data/orders --from 2026-11-01T00:00:00Z --to 2026-11-02T00:00:00Z
    skiff replay -i /data/orders -t OrdersBackfill --write-id backfill-2026-11-01 --from-date 2026-11-01
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from skiff.cli.admin import default_namesrv, with_admin
from skiff.cli.consumer import parse_timestamp_ms
from skiff.common.errors import ConfigError

WRITE_MODES = ("error", "append", "overwrite")
T = TypeVar("T")


def register(sub: Any) -> None:
    export = _spark_command(sub, "export", "write a topic range to Parquet, partitioned by store date (UTC)",
                            run_export)
    export.add_argument("-t", "--topic", required=True)
    export.add_argument("-o", "--output", required=True, help="the Parquet directory (local path or URI)")
    export.add_argument("--from", dest="start", type=parse_timestamp_ms, metavar="TIME",
                        help="first store time (ms since the epoch or an ISO time; default: the earliest)")
    export.add_argument("--to", dest="end", type=parse_timestamp_ms, metavar="TIME",
                        help="store time to stop before (default: the latest now)")
    export.add_argument("--mode", choices=WRITE_MODES, default="error",
                        help="when the output exists: fail (default), add to it, or replace it")
    export.add_argument("--tier-url", metavar="URL",
                        help="the brokers' tier (file:///dir or s3://bucket/prefix; default: the one the brokers "
                             "report for a tiered topic): its files in the range are copied, not read")
    export.add_argument("--tier-s3-endpoint", metavar="URL", help="an S3-compatible server's URL for an s3:// tier")
    export.add_argument("--through-broker", action="store_true",
                        help="read everything through the brokers, even what the tier has")
    replay = _spark_command(sub, "replay", "send the rows of a skiff export to a topic (idempotent msg ids)",
                            run_replay)
    replay.add_argument("-i", "--input", required=True, help="the directory skiff export wrote")
    replay.add_argument("-t", "--topic", required=True, help="the topic to send the rows to")
    replay.add_argument("--write-id", required=True,
                        help="names this replay; the same id on a re-run sends the same msg ids")
    replay.add_argument("--from-date", metavar="YYYY-MM-DD", help="first store date to replay (UTC)")
    replay.add_argument("--to-date", metavar="YYYY-MM-DD", help="last store date to replay (UTC)")


def _spark_command(sub: Any, name: str, help_text: str, handler: Any) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("-n", "--namesrv", default=default_namesrv(), metavar="HOST:PORT;...",
                        help="NameServer addresses (default $SKIFF_NAMESRV or 127.0.0.1:9876)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.set_defaults(handler=lambda args, extra: handler(args))
    return parser


@contextlib.contextmanager
def _session(args: argparse.Namespace) -> Iterator[Any]:
    """A local Spark session for the command, stopped after it; one already running in this
    process (a notebook, a test) is used as it is and left running."""
    try:
        from pyspark.sql import SparkSession

        from skiff.spark.local import local_session
    except ImportError as exc:
        raise ConfigError(f"skiff {args.command} runs Spark: install the spark extra (pip install "
                          f"'skiffmq[spark]'): {exc}") from None
    running = SparkSession.getActiveSession()
    spark = local_session(f"skiff-{args.command}", args.master) if running is None else running
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()


def _spark_errors(job: Callable[[], T]) -> T:
    """``job()``, a failed Spark job raised as a `SparkJobError` with Spark's first line (no JVM trace)."""
    from pyspark.errors import PySparkException

    from skiff.spark.errors import SparkJobError

    try:
        return job()
    except PySparkException as exc:
        raise SparkJobError(str(exc).strip().splitlines()[0]) from None


def run_export(args: argparse.Namespace) -> int:
    if args.start is not None and args.end is not None and args.end <= args.start:
        raise ConfigError(f"--to ({args.end}) must be after --from ({args.start})")
    if args.through_broker and args.tier_url:
        raise ConfigError("--through-broker reads nothing from the tier: give it or --tier-url, not both")
    tier_url = None if args.through_broker else args.tier_url or _brokers_tier(args)
    tier = {"tierUrl": tier_url, "tierS3Endpoint": args.tier_s3_endpoint} if tier_url else None
    with _session(args) as spark:
        from skiff.spark.archive import export

        where = {"startingTimestamp": args.start, "endingTimestamp": args.end}
        done = _spark_errors(lambda: export(spark, args.namesrv, args.topic, args.output,
                                            {k: str(v) for k, v in where.items() if v is not None},
                                            "errorifexists" if args.mode == "error" else args.mode,
                                            {k: v for k, v in (tier or {}).items() if v}))
    copied = f" ({done.copied_rows} rows copied in {done.copied_files} files from the tier {tier_url})" if tier else ""
    print(f"exported {args.topic} to {args.output}: the archive holds {done.rows} rows{copied}", file=sys.stderr)
    return 0


def _brokers_tier(args: argparse.Namespace) -> str | None:
    """The tier every broker of the topic reports for it, when the topic is tiered on each of
    them and they name one tier; else None (everything is read through the brokers)."""
    answers = with_admin(args, lambda admin: admin.tier(args.topic))
    urls = {a.state.url for a in answers if a.state is not None and a.state.tiered}
    everywhere = bool(answers) and all(a.state is not None and a.state.tiered for a in answers)
    return urls.pop() if everywhere and len(urls) == 1 else None


def run_replay(args: argparse.Namespace) -> int:
    with _session(args) as spark:
        from skiff.spark.archive import replay

        rows = _spark_errors(lambda: replay(spark, args.namesrv, args.input, args.topic, args.write_id,
                                            args.from_date, args.to_date))
    print(f"replayed {rows} rows of {args.input} to {args.topic} (write id {args.write_id})", file=sys.stderr)
    return 0
