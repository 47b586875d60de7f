"""kafka-python's admin client against Skiff: topics made, grown and deleted through the
topic operation the remoting admin uses (the NameServer's route follows), topic configs
read and changed (cleanup.policy=compact is Skiff's COMPACTION), consumer groups listed
and described."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import InvalidConfigurationError, TopicAlreadyExistsError

from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode
from skiff.testing.cluster import Cluster
from skiff.testing.waits import wait_for
from skiff.testing.wire import BrokerWire, with_wire
from tests.integration.kafka_kit import kafka_cluster


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka-admin")) as c:
        yield c


def topic_attributes(cluster: Cluster, topic: str) -> tuple[int, dict[str, str]]:
    """The queue count and attributes the broker holds for ``topic`` (read over remoting)."""
    found: list[TopicConfig] = []

    async def read(wire: BrokerWire) -> None:
        answer = await wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)
        found.append(TopicConfigSerializeWrapper.from_json(answer.body).topic_config_table[topic])
    with_wire(cluster.broker_addr(0), read)
    return found[0].read_queue_nums, dict(found[0].attributes)


def test_topics_and_configs(kafka: tuple[Cluster, str]) -> None:
    cluster, bootstrap = kafka
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("kadmin-plain", 2, 1),
                             NewTopic("kadmin-compact", 3, 1, topic_configs={"cleanup.policy": "compact"})])
        assert topic_attributes(cluster, "kadmin-compact") == (3, {"cleanup.policy": "COMPACTION"})
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kadmin-plain", 2, 1)])
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic("kadmin-bad", 1, 1, topic_configs={"segment.bytes": "1"})])
        assert "kadmin-bad" not in admin.list_topics()

        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kadmin-compact")],
                                           config_filter="all")
        [(_, topics)] = described.items()
        configs = {name: c["value"] if isinstance(c, dict) else c for name, c in topics["kadmin-compact"].items()}
        assert configs["cleanup.policy"] == "compact" and configs["retention.ms"] == str(72 * 3_600_000)

        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kadmin-plain",
                                            configs={"cleanup.policy": "compact", "delete.retention.ms": "1000"})])
        assert topic_attributes(cluster, "kadmin-plain")[1] == {"cleanup.policy": "COMPACTION",
                                                               "delete.retention.ms": "1000"}
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kadmin-plain",
                                            configs={"cleanup.policy": "delete"})])
        # kafka-python sends the topic's other configs with the one changed (so the rest stays)
        assert topic_attributes(cluster, "kadmin-plain")[1] == {"cleanup.policy": "DELETE",
                                                               "delete.retention.ms": "1000"}

        admin.create_partitions({"kadmin-plain": NewPartitions(5)})
        assert topic_attributes(cluster, "kadmin-plain")[0] == 5
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("kadmin-plain", b"to the new partition", partition=4).get(timeout=10)
        producer.close()

        admin.delete_topics(["kadmin-plain", "kadmin-compact"])
        remaining = wait_for(lambda: (lambda t: t if "kadmin-plain" not in t else None)(set(admin.list_topics())),
                             10, "the deleted topics gone from Metadata")
        assert "kadmin-compact" not in remaining
    finally:
        admin.close()


def test_groups_listed_and_described(kafka: tuple[Cluster, str]) -> None:
    _, bootstrap = kafka
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send("kadmin-groups", b"one", partition=0).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("kadmin-groups", bootstrap_servers=bootstrap, group_id="kadmin-group",
                             auto_offset_reset="earliest", client_id="described-member")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 30
        values = []
        while not values and time.monotonic() < deadline:
            values = [r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs]
        assert values == [b"one"]
        listed = admin.list_groups()
        assert any(g["group_id"] == "kadmin-group" and g["protocol_type"] == "consumer" for g in listed), listed
        group = admin.describe_groups(["kadmin-group"])["kadmin-group"]
        assert group["error"] is None and group["group_state"] == "Stable" and group["protocol_type"] == "consumer"
        [described] = group["members"]
        assert described["client_id"] == "described-member"
        assert described["member_metadata"]["topics"] == ["kadmin-groups"]  # the subscription the member sent
    finally:
        consumer.close()
        admin.close()
