"""asyncio transport over the sans-IO protocol: framed connections, requests
matched by opaque per connection, timeouts, handlers by request code, and a
`CloseReason` for every close. See docs/transport.md."""

from skiff.protocol.errors import ConnectionClosed, RequestTimeout
from skiff.transport.client import RemotingClient, parse_addr
from skiff.transport.connection import CloseListener, CloseReason, Connection, Handler
from skiff.transport.errors import ConnectFailed, ListenError, TooManyPendingRequests
from skiff.transport.late import LateAnswer
from skiff.transport.server import RemotingServer

__all__ = [
    "CloseListener",
    "CloseReason",
    "ConnectFailed",
    "Connection",
    "ConnectionClosed",
    "Handler",
    "LateAnswer",
    "ListenError",
    "RemotingClient",
    "RemotingServer",
    "RequestTimeout",
    "TooManyPendingRequests",
    "parse_addr",
]
