"""Refusal: why an operation was not done, as one value for every door.

An operation answers its outcome or one `Refusal`; each protocol adapter encodes it
(a remoting response with the code and remark; a gRPC ``Status`` through the proxy's
code table, `skiff.broker.grpc.status`). The code is RocketMQ's 4.x response code,
the vocabulary both doors already share, so a check written once refuses alike over
remoting and gRPC.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Refusal:
    """The response code and the reason a client reads (what was wrong, and what to do)."""

    code: int
    reason: str
    bad_request: bool = False
    """The request itself names what cannot be (a queue id out of range): RocketMQ's 4.x code
    for that is SYSTEM_ERROR, which gRPC would read as the server's fault; the gRPC door
    answers BAD_REQUEST instead."""
