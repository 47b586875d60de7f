"""The broker's request handlers, one module per request family (docs/broker.md lists
every code). Each processor is the remoting door's adapter: decode the header or body,
call the operation that serves it (`skiff.broker.operations`, shared with the gRPC and Kafka
doors; docs/operations-layer.md lists them), encode its outcome or refusal (`answers.answer`);
``handlers()`` maps its request codes to methods. The requests no operation serves yet are
listed there too."""

from __future__ import annotations

from typing import Protocol

from skiff.transport.connection import Handler


class Processor(Protocol):
    """What the broker asks of each processor: its request codes and their handlers."""

    def handlers(self) -> dict[int, Handler]: ...
