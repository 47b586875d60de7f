"""Topics, subscription groups and consumer offsets, and their files under config/."""

import json
from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import ManualClock
from skiff.common.errors import CorruptionError
from skiff.common.names import SCHEDULE_TOPIC, TBW102
from skiff.protocol.bodies.topic import TopicConfig


def topics(root: Path, **cfg) -> TopicConfigManager:
    m = TopicConfigManager(BrokerConfig(broker_name="broker-a", **cfg), str(root), ManualClock(), schedule_queue_nums=19)
    m.load()
    return m


def test_system_topics_and_template(tmp_path: Path):
    m = topics(tmp_path)
    assert m.get(TBW102) == TopicConfig(TBW102, 8, 8, 7)
    assert m.get(SCHEDULE_TOPIC).read_queue_nums == 19
    assert m.get("broker-a").perm == 7
    assert TBW102 not in topics(tmp_path / "off", auto_create_topic_enable=False)
    assert (tmp_path / "config" / "topics.json").exists()


def test_auto_create_from_template_caps_queues_and_drops_inherit(tmp_path: Path):
    m = topics(tmp_path)
    changes = []
    m.on_change = lambda: changes.append(m.data_version.counter)
    created = m.create_from_template("Orders", TBW102, 4, 0)
    assert created == TopicConfig("Orders", 4, 4, 6)
    assert m.create_from_template("Big", TBW102, 64, 0).write_queue_nums == 8
    assert m.create_from_template("Nope", "NoSuchTemplate", 4, 0) is None
    assert m.create_from_template("Nope", "Orders", 4, 0) is None  # Orders does not let topics inherit it
    assert changes == [1, 2]


def test_topics_survive_a_restart_with_their_version(tmp_path: Path):
    m = topics(tmp_path)
    m.put(TopicConfig("Orders", 2, 3, 4))
    m.delete("SELF_TEST_TOPIC")
    again = topics(tmp_path)
    assert again.get("Orders") == TopicConfig("Orders", 2, 3, 4)
    assert again.data_version == m.data_version and again.data_version.counter == 2
    saved = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert saved["topicConfigTable"]["Orders"]["writeQueueNums"] == 3


def test_a_corrupt_table_is_named(tmp_path: Path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text("{not json")
    with pytest.raises(CorruptionError, match="topics.json is not valid JSON"):
        topics(tmp_path)


def test_groups_are_created_on_first_use_unless_disabled(tmp_path: Path):
    m = SubscriptionGroupManager(BrokerConfig(max_reconsume_times=5), str(tmp_path), ManualClock())
    m.load()
    g = m.find_or_create("G1")
    assert (g.group_name, g.retry_queue_nums, g.retry_max_times) == ("G1", 1, 5)
    again = SubscriptionGroupManager(BrokerConfig(auto_create_subscription_group=False), str(tmp_path), ManualClock())
    again.load()
    assert again.get("G1") == g and again.find_or_create("G2") is None


def test_offsets_persist_only_when_changed_in_rocketmq_form(tmp_path: Path):
    m = ConsumerOffsetManager(str(tmp_path))
    m.load()
    assert m.query("G", "T", 0) is None and not m.persist()
    m.commit("G", "T", 0, 12)
    m.commit("G", "T", 3, 7)
    m.commit("G2", "T@x", 1, 1)
    assert m.persist() and not m.persist()
    raw = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert json.loads(raw.replace("{0:", '{"0":').replace(",3:", ',"3":').replace("{1:", '{"1":')) == {
        "offsetTable": {"T@G": {"0": 12, "3": 7}, "T@x@G2": {"1": 1}}}
    again = ConsumerOffsetManager(str(tmp_path))
    again.load()
    assert (again.query("G", "T", 3), again.query("G2", "T@x", 1), again.topics_of("G")) == (7, 1, ["T"])
    again.remove_topic("T")
    assert again.query("G", "T", 0) is None and again.groups_of("T@x") == ["G2"]


def test_an_offsets_write_that_fails_is_tried_again(tmp_path: Path):
    """The snapshot clears the changed mark; a failed write must set it again, or the commit
    would reach the disk only with the next change."""
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit("G", "T", 0, 5)
    (tmp_path / "config").write_text("a file where the directory belongs")
    with pytest.raises(OSError):
        m.persist()
    (tmp_path / "config").unlink()
    assert m.persist() and not m.persist()
    again = ConsumerOffsetManager(str(tmp_path))
    again.load()
    assert again.query("G", "T", 0) == 5
