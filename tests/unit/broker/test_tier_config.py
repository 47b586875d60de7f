"""A broker's tier keys: no tierStorageUrl is no tier (nothing of it loaded); a URL of neither
kind is a configuration error naming the key and what to write."""

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
