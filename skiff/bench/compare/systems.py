"""The systems under test: which server runs them, which package provides it."""

from __future__ import annotations

from dataclasses import dataclass

from skiff.bench.compare.servers import NatsServer, RabbitServer, RedisServer, Server, SkiffServer


@dataclass(frozen=True, slots=True)
class System:
    name: str
    server: type[Server]
    package: str | None
    """Debian package that provides the server; None for Skiff (this repository)."""
    client_module: str | None = None
    """Python module the driver needs beyond the harness's own (the system is skipped, and the
    run says so, when it cannot be imported)."""


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("skiff", SkiffServer, None),
        System("skiff-kafka", SkiffServer, None, client_module="confluent_kafka"),  # the same broker, Kafka door
        System("rabbitmq-stream", RabbitServer, "rabbitmq-server"),
        System("rabbitmq-quorum", RabbitServer, "rabbitmq-server"),
        System("redis", RedisServer, "redis-server"),
        System("nats", NatsServer, "nats-server"),
    )
}
ALIASES = {"rabbitmq": ("rabbitmq-stream", "rabbitmq-quorum")}


def parse_systems(text: str) -> list[System]:
    """`skiff,redis,rabbitmq` → systems in the order given; `rabbitmq` means both of its queue types."""
    names: list[str] = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        for name in ALIASES.get(word, (word,)):
            if name not in SYSTEMS:
                raise ValueError(f"unknown system {name!r}; known: {', '.join([*SYSTEMS, *ALIASES])}")
            if name not in names:
                names.append(name)
    return [SYSTEMS[n] for n in names]


def by_server(systems: list[System]) -> list[tuple[type[Server], list[System]]]:
    """Group systems that share one server process (both RabbitMQ queue types), keeping order."""
    groups: dict[type[Server], list[System]] = {}
    for system in systems:
        groups.setdefault(system.server, []).append(system)
    return list(groups.items())
