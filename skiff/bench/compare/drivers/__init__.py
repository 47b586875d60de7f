"""One driver per system under test, looked up by the system's name."""

from __future__ import annotations

import importlib

from skiff.bench.compare.drivers.base import Driver

DRIVERS: dict[str, str] = {
    "skiff": "skiff.bench.compare.drivers.skiff_client:SkiffDriver",
    "skiff-kafka": "skiff.bench.compare.drivers.skiff_kafka:SkiffKafkaDriver",
    "rabbitmq-stream": "skiff.bench.compare.drivers.rabbit_stream:RabbitStreamDriver",
    "rabbitmq-quorum": "skiff.bench.compare.drivers.rabbit_quorum:RabbitQuorumDriver",
    "redis": "skiff.bench.compare.drivers.redis_streams:RedisStreamsDriver",
    "nats": "skiff.bench.compare.drivers.nats_jetstream:NatsJetStreamDriver",
}


def driver_class(system: str) -> type[Driver]:
    """Import only the client the worker needs, so a missing one fails alone."""
    module, _, cls = DRIVERS[system].partition(":")
    return getattr(importlib.import_module(module), cls)
