"""A broker's tier keys: no tierStorageUrl is no tier (nothing of it loaded); a URL of neither
kind is a configuration error naming the key and what to write; tierFileDeleteDelayMs is 60 s by
default, 0 allowed, negative refused."""

from __future__ import annotations

import pytest

from skiff.broker.config import BrokerConfig
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
