import pytest

from skiff.common.config import build_config, parse_properties
from skiff.common.errors import ConfigError
from skiff.store import FlushDiskType, StoreConfig


def test_defaults_follow_rocketmq():
    cfg = StoreConfig()
    assert cfg.mapped_file_size_commit_log == 1 << 30
    assert cfg.mapped_file_size_consume_queue == 6_000_000
    assert cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert (cfg.flush_interval_commit_log, cfg.flush_interval_consume_queue) == (500, 1000)
    assert cfg.delete_hours == frozenset({4})
    assert cfg.store_path_root_dir.endswith("store")


def test_rocketmq_keys_and_old_spellings():
    props = parse_properties(
        "storePathRootDir=/data/s\nmapedFileSizeCommitLog=65536\nmapedFileSizeConsumeQueue=2000\n"
        "flushDiskType=SYNC_FLUSH\ndeleteWhen=04;16\ndiskMaxUsedSpaceRatio=60\nmessageIndexEnable=false\n"
    )
    cfg = build_config(StoreConfig, props)
    assert cfg.store_path_root_dir == "/data/s"
    assert cfg.mapped_file_size_commit_log == 65536
    assert cfg.mapped_file_size_consume_queue == 2000
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert cfg.delete_hours == frozenset({4, 16})
    assert cfg.disk_max_used_space_ratio == 60
    assert cfg.message_index_enable is False


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("mappedFileSizeCommitLog", "0", "mappedFileSizeCommitLog"),
        ("mapedFileSizeCommitLog", "-5", "mappedFileSizeCommitLog"),
        ("mappedFileSizeConsumeQueue", "1001", "mappedFileSizeConsumeQueue"),
        ("flushIntervalCommitLog", "0", "flushIntervalCommitLog"),
        ("syncFlushTimeout", "-1", "syncFlushTimeout"),
        ("maxIndexNum", "1", "maxIndexNum"),
        ("maxHashSlotNum", "0", "maxHashSlotNum"),
        ("fileReservedTime", "-1", "fileReservedTime"),
        ("flushConsumeQueueLeastPages", "-1", "flushConsumeQueueLeastPages"),
        ("flushConsumeQueueThoroughInterval", "0", "flushConsumeQueueThoroughInterval"),
        ("diskMaxUsedSpaceRatio", "101", "diskMaxUsedSpaceRatio"),
        ("diskSpaceWarningLevelRatio", "-1", "diskSpaceWarningLevelRatio"),
        ("deleteWhen", "04;25", "deleteWhen"),
        ("deleteWhen", "four", "deleteWhen"),
        ("flushDiskType", "SOMETIMES", "flushDiskType"),
        ("maxMessageSize", "lots", "maxMessageSize"),
        ("storePathRootDir", "", "storePathRootDir"),
    ],
)
def test_bad_values_name_the_key(key, value, named):
    with pytest.raises(ConfigError, match=named):
        build_config(StoreConfig, {key: value})


def test_unknown_key_is_refused():
    with pytest.raises(ConfigError, match="mappedFileSizeCommitLogg"):
        build_config(StoreConfig, {"mappedFileSizeCommitLogg": "1"})
