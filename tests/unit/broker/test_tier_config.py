"""A broker's tier keys: no tierStorageUrl is no tier (nothing of it loaded); a URL of neither
kind is a configuration error naming the key and what to write; tierFileDeleteDelayMs is 60 s by
default, 0 allowed, negative refused; tierCompactedMergeMaxBytes is 16 MiB by default, reaches the
tier, and is refused outside 1..TIER_COMPACTED_MERGE_LIMIT_BYTES with a message naming the key."""

from __future__ import annotations

import pytest

from pathlib import Path
from types import SimpleNamespace

from skiff.broker.config import BrokerConfig, load_configs
from skiff.broker.tier.setup import tier_service
from skiff.common.clock import SYSTEM_CLOCK
from skiff.common.errors import ConfigError


def test_no_url_is_no_tier() -> None:
    assert tier_service(BrokerConfig(), None, None, SYSTEM_CLOCK) is None  # type: ignore[arg-type]


def test_a_bad_url_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"tierStorageUrl=ftp://x/y: .*write file:///a/directory or s3://"):
        tier_service(BrokerConfig(tier_storage_url="ftp://x/y"), None, None, SYSTEM_CLOCK)  # type: ignore[arg-type]


def test_the_file_delete_delay_is_60_s_may_be_0_and_not_negative() -> None:
    assert BrokerConfig().tier_file_delete_delay_ms == 60_000  # Kafka's file.delete.delay.ms
    BrokerConfig(tier_file_delete_delay_ms=0).validate()  # 0: deleted right after the manifest, as before
    with pytest.raises(ConfigError, match="tierFileDeleteDelayMs: -1 must not be negative"):
        BrokerConfig(tier_file_delete_delay_ms=-1).validate()


def test_the_compacted_merge_size_is_16_mib_by_default_a_key_that_reaches_the_tier_and_is_bounded(
        tmp_path: Path) -> None:
    assert BrokerConfig().tier_compacted_merge_max_bytes == 16 * 1024 * 1024
    broker, _ = load_configs({"storePathRootDir": str(tmp_path / "store"), "tierCompactedMergeMaxBytes": "4096",
                              "tierStorageUrl": (tmp_path / "tier").as_uri()})
    assert broker.tier_compacted_merge_max_bytes == 4096
    store = SimpleNamespace(retention=SimpleNamespace(add_hold=lambda hold: None))
    service = tier_service(broker, store, None, SYSTEM_CLOCK)  # type: ignore[arg-type]
    assert service is not None
    try:
        assert service.tier.merge_max_bytes == 4096  # what the uploader's merges use
    finally:
        service.close()
    BrokerConfig(tier_compacted_merge_max_bytes=1).validate()  # 1: never merges
    for bad in ("0", "-1", str(64 * 1024 * 1024 + 1)):
        with pytest.raises(ConfigError, match=rf"tierCompactedMergeMaxBytes: {bad} must be from 1 to 67108864"):
            load_configs({"storePathRootDir": str(tmp_path / "store"), "tierCompactedMergeMaxBytes": bad})
    with pytest.raises(ConfigError, match="tierCompactedMergeMaxBytes"):
        load_configs({"storePathRootDir": str(tmp_path / "store"), "tierCompactedMergeMaxBytes": "16MiB"})
