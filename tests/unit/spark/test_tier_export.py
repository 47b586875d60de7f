"""skiff export's copies of tiered files: what is refused before anything is read."""

import pytest

from skiff.cli.main import main
from skiff.spark.errors import SparkOptionError
from skiff.spark.tier_export import TierCopy, plan, utc_day
from skiff.tier.manifest import Segment

pytestmark = pytest.mark.spark


def test_an_output_pyarrow_cannot_write_is_refused_before_the_plan():
    with pytest.raises(SparkOptionError, match="s3a://b/x: the tier's files are copied there with pyarrow.*"
                                               "--through-broker"):
        plan({"namesrvAddr": "127.0.0.1:1", "topic": "T", "tierUrl": "file:///nowhere"}, "s3a://b/x")


def test_through_broker_and_a_tier_url_are_refused_together(capsys):
    assert main(["export", "-t", "T", "-o", "out", "--through-broker", "--tier-url", "file:///t"]) == 2
    assert "give it or --tier-url, not both" in capsys.readouterr().err


def test_a_copy_is_named_by_its_day_broker_queue_and_range():
    seg = Segment(3, 40, 79, 1_764_201_600_000, 1_764_201_600_500, "T/b/3/x.parquet", 40, 1, "s")
    assert utc_day(seg.first_store_ms) == "2025-11-27" and utc_day(seg.first_store_ms - 1) == "2025-11-26"
    assert TierCopy("broker-a", seg, "2025-11-27").name() == \
        "date=2025-11-27/tier-broker-a-3-00000000000000000040-00000000000000000079.parquet"
