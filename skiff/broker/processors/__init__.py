"""The broker's request handlers, one module per request family (docs/broker.md lists
every code). Each processor is thin: decode the header or body, call the managers
and the store, encode the answer; ``handlers()`` maps its request codes to methods."""

from __future__ import annotations

from typing import Protocol

from skiff.transport.connection import Handler


class Processor(Protocol):
    """What the broker asks of each processor: its request codes and their handlers."""

    def handlers(self) -> dict[int, Handler]: ...
