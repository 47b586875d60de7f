"""The broker's request handlers, one module per request family (docs/broker.md lists
every code). Each processor is the remoting door's adapter: decode the header or body,
call an operation (`skiff.broker.operations`, shared with the gRPC and Kafka doors),
encode its outcome or refusal (`answers.answer`); ``handlers()`` maps its request codes
to methods."""

from __future__ import annotations

from typing import Protocol

from skiff.transport.connection import Handler


class Processor(Protocol):
    """What the broker asks of each processor: its request codes and their handlers."""

    def handlers(self) -> dict[int, Handler]: ...
