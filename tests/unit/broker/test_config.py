"""BrokerConfig and loading one broker.conf into the broker's and the store's configs."""

from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig, BrokerRole, default_broker_ip, load_configs
from skiff.common.config import build_config, parse_properties
from skiff.common.errors import ConfigError
from skiff.store import FlushDiskType


def test_one_file_feeds_broker_and_store(tmp_path: Path):
    conf = parse_properties(
        "brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = 0\ndeleteWhen = 04\n"
        "fileReservedTime = 48\nbrokerRole = ASYNC_MASTER\nflushDiskType = SYNC_FLUSH\n"
        f"storePathRootDir = {tmp_path / 'store'}\nmapedFileSizeCommitLog = 1048576\n"
    )
    broker, store = load_configs(conf, {"listenPort": "10999", "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877"})
    assert (broker.broker_name, broker.listen_port, broker.broker_role) == ("broker-a", 10999, BrokerRole.ASYNC_MASTER)
    assert broker.namesrv_addrs == ("127.0.0.1:9876", "127.0.0.1:9877")
    assert (store.flush_disk_type, store.file_reserved_time, store.mapped_file_size_commit_log) == (
        FlushDiskType.SYNC_FLUSH, 48, 1048576)
    assert (tmp_path / "store").is_dir()


def test_defaults_follow_rocketmq():
    c = BrokerConfig()
    assert (c.broker_cluster_name, c.broker_id, c.listen_port, c.default_topic_queue_nums, c.broker_permission) == (
        "DefaultCluster", 0, 10911, 8, 6)
    assert c.delay_levels_ms[:3] == (1000, 5000, 10_000) and c.delay_levels_ms[-1] == 7_200_000
    assert len(c.delay_levels_ms) == 18
    assert (c.client_channel_expired_time_ms, c.max_reconsume_times, c.enable_property_filter) == (120_000, 16, False)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("listenPort", "70000", "listenPort: 70000 is not a port"),
    ("brokerIP1", "my-host", "brokerIP1: 'my-host' is not an IP address"),
    ("namesrvAddr", "127.0.0.1", "namesrvAddr: '127.0.0.1' has '127.0.0.1', which is not host:port"),
    ("messageDelayLevel", "1s 5x", "messageDelayLevel: '1s 5x' has '5x' at level 2"),
    ("brokerName", "bad name", "brokerName: 'bad name' is not a valid name"),
    ("defaultTopicQueueNums", "0", "defaultTopicQueueNums: 0 must be from 1 to 1024"),
    ("registerNameServerPeriod", "0", "registerNameServerPeriod: 0 must be more than 0"),
    ("brokerRole", "SLAVE", "brokerId: 0 does not fit brokerRole=SLAVE"),
    ("brokerId", "2", "brokerId: 2 does not fit brokerRole=ASYNC_MASTER"),
    ("haMasterAddress", "nohost", "haMasterAddress: 'nohost' is not host:port"),
    ("haTransferBatchSize", "10", "haTransferBatchSize: 10 must be at least 1024"),
    ("slaveTimeout", "0", "slaveTimeout: 0 must be more than 0"),
    ("autoCreateTopicEnable", "maybe", "autoCreateTopicEnable: 'maybe' is not a boolean"),
])
def test_bad_values_name_the_key(tmp_path: Path, key: str, value: str, words: str):
    with pytest.raises(ConfigError) as err:
        load_configs({"storePathRootDir": str(tmp_path), key: value})
    assert words in str(err.value)


def test_replication_keys_have_rocketmqs_names_and_defaults(tmp_path: Path):
    broker, _ = load_configs({"storePathRootDir": str(tmp_path), "brokerRole": "SLAVE", "brokerId": "1",
                              "haMasterAddress": "10.0.0.1:10912"})
    assert broker.is_slave and broker.ha_master_address == "10.0.0.1:10912"
    assert (broker.ha_send_heartbeat_interval_ms, broker.ha_housekeeping_interval_ms) == (5000, 20000)
    assert (broker.ha_transfer_batch_size, broker.ha_slave_fallbehind_max) == (32768, 256 << 20)
    assert broker.ha_addr(10911) == f"{broker.advertised_ip}:10912" and not broker.slave_read_enable


def test_unknown_key_is_named(tmp_path: Path):
    with pytest.raises(ConfigError, match="unknown configuration key 'brokerNmae'"):
        load_configs({"storePathRootDir": str(tmp_path), "brokerNmae": "x"})


def test_store_dir_must_be_writable(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="storePathRootDir: cannot create"):
        load_configs({"storePathRootDir": str(blocker / "store")})


def test_advertised_address():
    assert default_broker_ip("127.0.0.1") == "127.0.0.1"
    assert default_broker_ip("10.1.2.3") == "10.1.2.3"
    assert not default_broker_ip("0.0.0.0").startswith("0.")
    c = build_config(BrokerConfig, {"brokerIP1": "10.0.0.5", "listenHost": "0.0.0.0"})
    assert (c.broker_addr(10911), c.ha_addr(10911)) == ("10.0.0.5:10911", "10.0.0.5:10912")
