"""Errors of the transport beyond the two every caller handles.

A request that times out raises `skiff.protocol.errors.RequestTimeout`; one
whose connection closes first raises `skiff.protocol.errors.ConnectionClosed`
with the connection's `CloseReason` as ``reason``. Both are retriable, and so
are the errors here except `ListenError`.
"""

from __future__ import annotations

from skiff.common.errors import SkiffError
from skiff.protocol.errors import ConnectionClosed, RemotingError


class ConnectFailed(ConnectionClosed):
    """A connection to ``addr`` could not be opened (refused, unreachable, too slow)."""

    def __init__(self, addr: str, reason: str) -> None:
        RemotingError.__init__(self, f"cannot connect to {addr}: {reason}")
        self.addr = addr
        self.reason = reason


class TooManyPendingRequests(RemotingError):
    """The connection already waits for `CONNECTION_PENDING_REQUESTS` responses."""

    retriable = True


class ListenError(SkiffError):
    """A server cannot listen on its address (in use, not permitted, not local)."""
