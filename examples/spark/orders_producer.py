"""Generate order events (JSON) into a Skiff topic: the input of orders_pipeline.py.

    skiff up &                                   # a NameServer and a broker on 127.0.0.1
    python examples/spark/orders_producer.py --count 20000

Each event is one order changing state: ``{"order_id", "customer", "status",
"amount", "event_time"}`` with ``event_time`` in ISO-8601 UTC, spread over the
last ``--minutes`` minutes and up to ``--late-s`` seconds out of order, as
events from many shops arrive. The customer is the message key, the status its
tag, and events of one customer go to one queue (ordered per customer). The
topic is created if it does not exist. ``--seed`` makes a run repeatable.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from decimal import Decimal

from skiff.client import Admin, Message, Producer, SelectByHash

STATUSES = ("created", "paid", "shipped", "cancelled")


@dataclass(frozen=True)
class OrderEvent:
    order_id: str
    customer: str
    status: str
    amount: str
    """A decimal with two places, kept as text so no float rounding creeps in."""
    event_time: str

    @property
    def event_ms(self) -> int:
        return int(datetime.fromisoformat(self.event_time.replace("Z", "+00:00")).timestamp() * 1000)


def generate(count: int, minutes: int = 10, late_s: int = 30, seed: int = 7,
             end_ms: int | None = None) -> list[OrderEvent]:
    """``count`` events ending at ``end_ms`` (now), in arrival order."""
    rng = random.Random(seed)
    end_ms = end_ms if end_ms is not None else int(time.time() * 1000)
    span_ms = minutes * 60_000
    events = []
    for i in range(count):
        arrival_ms = end_ms - span_ms + span_ms * i // max(count, 1)
        event_ms = arrival_ms - rng.randrange(late_s * 1000 + 1)
        stamp = datetime.fromtimestamp(event_ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
        events.append(OrderEvent(f"o-{i}", f"c-{rng.randrange(50)}", rng.choice(STATUSES),
                                 str(Decimal(rng.randrange(500, 50_000)) / 100), stamp.replace("+00:00", "Z")))
    return events


def produce(namesrv: str, topic: str, events: Sequence[OrderEvent], *, queues: int = 4) -> int:
    """Send ``events`` to ``topic`` (created with ``queues`` queues if missing); returns how many were sent."""
    with Admin(namesrv) as admin:
        if topic not in admin.topic_list():
            admin.create_topic(topic, queue_nums=queues)
    by_customer = SelectByHash()
    with Producer("orders-producer", namesrv) as producer:
        for event in events:
            body = json.dumps(asdict(event)).encode()
            producer.send(Message.of(topic, body, tags=event.status, keys=[event.order_id, event.customer]),
                          selector=by_customer, arg=event.customer)
    return len(events)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876", help="NameServer address (default 127.0.0.1:9876)")
    parser.add_argument("--topic", default="Orders")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=10, help="event times span this many minutes up to now")
    parser.add_argument("--late-s", type=int, default=30, help="how far out of order events may be")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    started = time.monotonic()
    sent = produce(args.namesrv, args.topic, generate(args.count, args.minutes, args.late_s, args.seed))
    print(f"sent {sent} order events to {args.topic} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
