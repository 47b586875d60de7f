"""Prometheus metrics of a real broker and NameServer: scraped over HTTP after known sends,
pulls, commits and a dead-lettered message, and every value checked against what the test did."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skiff.client import (
    AsyncAdmin,
    AsyncProducer,
    AsyncPullClient,
    AsyncTransactionProducer,
    LocalTransactionState,
    Message,
    MessageQueue,
)
from skiff.client._impl.config import ClientConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port
from skiff.testing.waits import wait_for
from skiff.testing.wire import BrokerWire
from skiff.transport.loop import run_coroutine

TOPIC, GROUP = "MetricsTopic", "metrics-group"
BODIES = [f"body-{i:03d}".encode() * (i + 1) for i in range(20)]
PULLED, COMMITTED = 12, 5
STARTED = time.time()
TX_TOPIC = "MetricsTx"
TX_ANSWERS = (*[LocalTransactionState.COMMIT_MESSAGE] * 3, LocalTransactionState.ROLLBACK_MESSAGE,
              LocalTransactionState.UNKNOW)


@pytest.fixture(scope="module")
def ports() -> tuple[int, int]:
    return free_port(), free_port()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ports: tuple[int, int]) -> Iterator[Cluster]:
    broker_port, namesrv_port = ports
    with Cluster(tmp_path_factory.mktemp("metrics"), broker_args=[f"--metricsPort={broker_port}"],
                 namesrv_args=[f"--metricsPort={namesrv_port}"]) as c:
        run_coroutine(_traffic(c))
        yield c


def config(cluster: Cluster, name: str) -> ClientConfig:
    return ClientConfig(cluster.namesrv_addr, instance_name=name, client_ip="127.0.0.1")


async def _traffic(cluster: Cluster) -> None:
    mq = MessageQueue(TOPIC, Cluster.broker_name(0), 0)
    async with AsyncAdmin(client_config=config(cluster, "m-admin")) as admin:
        await admin.create_topic(TOPIC, queue_nums=1)
        async with AsyncProducer("PG-metrics", client_config=config(cluster, "m-prod"), trace=False) as producer:
            for body in BODIES:
                await producer.send(Message(TOPIC, body))
        async with AsyncPullClient(client_config=config(cluster, "m-pull"), group=GROUP) as puller:
            got = (await puller.pull(mq, 0, PULLED)).messages
            assert len(got) == PULLED
        await admin.update_consumer_offset(GROUP, mq, COMMITTED)
        await admin.create_topic(TX_TOPIC, queue_nums=1)
    async with AsyncTransactionProducer("PG-metrics-tx", client_config=config(cluster, "m-tx"), trace=False,
                                        checker=lambda _msg: LocalTransactionState.UNKNOW) as tx:
        for answer in TX_ANSWERS:
            await tx.send_in_transaction(Message(TX_TOPIC, b"tx"), lambda _m, _a, a=answer: a)
    wire = BrokerWire(cluster.broker_addr(0))
    try:
        header = ConsumerSendMsgBackRequestHeader(got[0].commit_log_offset, GROUP, -1, got[0].msg_id, TOPIC)
        resp = await wire.call(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await wire.close()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    hits = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert hits, f"no {name} with {labels}"
    return sum(hits)


def test_messages_and_bytes_in_and_out_match_what_was_sent_and_pulled(cluster: Cluster, ports) -> None:
    samples = scrape(ports[0])
    assert value(samples, "rocketmq_messages_in_total", topic=TOPIC, is_retry="false") == len(BODIES)
    assert value(samples, "rocketmq_throughput_in_total", topic=TOPIC) == sum(len(b) for b in BODIES)
    assert value(samples, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == PULLED
    assert value(samples, "rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP) > sum(
        len(b) for b in BODIES[:PULLED])  # stored records: bodies plus headers
    assert value(samples, "rocketmq_messages_in_total", cluster="DefaultCluster", node_id="broker-a",
                 topic=TOPIC) == len(BODIES)


def test_lag_inflight_and_ready_per_queue(cluster: Cluster, ports) -> None:
    samples = scrape(ports[0])
    q = {"topic": TOPIC, "consumer_group": GROUP, "queue_id": "0"}
    assert value(samples, "rocketmq_consumer_lag_messages", **q) == len(BODIES) - COMMITTED
    assert value(samples, "rocketmq_consumer_inflight_messages", **q) == PULLED - COMMITTED
    assert value(samples, "rocketmq_consumer_ready_messages", **q) == len(BODIES) - PULLED
    age_ms = value(samples, "rocketmq_consumer_lag_latency", **q)
    assert 0 < age_ms < (time.time() - STARTED) * 1000 + 1000  # the first uncommitted message is from this run


def test_dlq_count_rpc_latency_and_storage(cluster: Cluster, ports) -> None:
    samples = scrape(ports[0])
    assert value(samples, "rocketmq_send_to_dlq_messages_total", consumer_group=GROUP) == 1
    sends = value(samples, "rocketmq_rpc_latency_count", request_code=str(int(RequestCode.SEND_MESSAGE_V2)),
                  response_code="0")
    assert sends == len(BODIES) + len(TX_ANSWERS)  # half messages are sends too
    assert value(samples, "rocketmq_rpc_latency_bucket", request_code=str(int(RequestCode.PULL_MESSAGE)),
                 le="+Inf") >= 1
    assert value(samples, "rocketmq_storage_size") > 0
    assert value(samples, "rocketmq_storage_dispatch_behind_bytes") >= 0


def test_lag_moves_with_new_sends_at_scrape_time(cluster: Cluster, ports) -> None:
    async def more() -> None:
        async with AsyncProducer("PG-metrics", client_config=config(cluster, "m-prod2"), trace=False) as producer:
            for _ in range(3):
                await producer.send(Message(TOPIC, b"x"))
    run_coroutine(more())
    lag = value(scrape(ports[0]), "rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP)
    assert lag == len(BODIES) + 3 - COMMITTED


def test_namesrv_metrics(cluster: Cluster, ports) -> None:
    samples = wait_for(lambda: (s := scrape(ports[1])) and
                       value(s, "skiff_namesrv_live_brokers") == 1 and s, 15, "the NameServer metrics")
    assert value(samples, "rocketmq_rpc_latency_count", request_code=str(int(RequestCode.REGISTER_BROKER))) >= 1
    assert value(samples, "skiff_namesrv_topics") >= 1


def test_only_get_metrics_answers(cluster: Cluster, ports) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/other", timeout=10)
    assert info.value.code == 404


def test_transactions_committed_rolled_back_and_open(cluster: Cluster, ports) -> None:
    """END_TRANSACTION is oneway: the counts are waited for, then must be exact."""
    def counted():
        s = scrape(ports[0])
        done = [v for (n, ls), v in s.items() if n in ("rocketmq_commit_messages_total",
                                                        "rocketmq_rollback_messages_total")]
        return s if sum(done) >= 4 else None
    samples = wait_for(counted, 15, "the END_TRANSACTION counts")
    assert value(samples, "rocketmq_commit_messages_total", topic=TX_TOPIC) == 3
    assert value(samples, "rocketmq_rollback_messages_total", topic=TX_TOPIC) == 1
    assert value(samples, "rocketmq_half_messages") == 1  # the UNKNOW one stays open
