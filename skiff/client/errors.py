"""Errors the client raises: the protocol's map for what a server answered,
and `ClientError` subclasses for what went wrong on this side.

Every class derives from `skiff.common.errors.SkiffError` and carries
``retriable``: whether the same call may succeed if made again. A broker's
answer raises the class its response code maps to (`skiff.protocol.errors`,
re-exported here), with ``code`` and the broker's ``remark``.
"""

from __future__ import annotations

from skiff.common.errors import ConfigError, SkiffError
from skiff.protocol.errors import (
    ConnectionClosed,
    MessageIllegalError,
    RemotingError,
    RequestTimeout,
    ResponseError,
    error_class,
)
from skiff.transport.errors import ConnectFailed


class ClientError(SkiffError):
    """A problem found on the client's side, before or instead of a server's answer."""


class ClientConfigError(ClientError, ConfigError):
    """A client setting is missing or wrong; the message names it."""


class ClientStateError(ClientError):
    """The object is not started, already shut down, or used from a wrong place."""


class ClientTimeoutError(ClientError, TimeoutError):
    """A blocking call did not finish within the time its caller allowed."""

    retriable = True


class MessageValidationError(ClientError, ValueError):
    """A message, topic or group name that no broker would accept (checked before sending)."""


class NoRouteError(ClientError):
    """No NameServer knows a route for the topic (and none for auto-creating it)."""

    retriable = True

    def __init__(self, topic: str, detail: str = "") -> None:
        self.topic = topic
        super().__init__(f"no route for topic {topic!r}{': ' + detail if detail else ''}; "
                         "create it (skiff topic create) or check the NameServer address")


class NoBrokerError(ClientError):
    """No address is known for a broker name (it left the route, or never registered)."""

    retriable = True


class NameServerUnavailableError(ClientError):
    """Every NameServer in the list failed; ``errors`` holds each one's failure."""

    retriable = True

    def __init__(self, errors: dict[str, Exception]) -> None:
        self.errors = errors
        detail = "; ".join(f"{addr}: {exc}" for addr, exc in errors.items())
        super().__init__(f"no NameServer answered ({detail})")


class NotANameServerError(NameServerUnavailableError):
    """No NameServer answered, and an address of the list answered a NameServer request
    (a route, the cluster, the topic list) as unsupported, as a broker does: the list names
    a broker's port. ``not_namesrvs`` holds those addresses, ``request_code`` the request."""

    retriable = False
    EXAMPLE = "127.0.0.1:9876"

    def __init__(self, errors: dict[str, Exception], not_namesrvs: list[str], request_code: int) -> None:
        self.errors = errors
        self.not_namesrvs = not_namesrvs
        self.request_code = request_code
        ClientError.__init__(self, self.explain("give the NameServer's address"))

    def explain(self, advice: str) -> str:
        """The reason, ending with ``advice`` and an example address (the CLI says "-n takes ...")."""
        addrs = ", ".join(self.not_namesrvs)
        one = len(self.not_namesrvs) == 1
        verb = "is not a NameServer (it" if one else "are not NameServers (they"
        others = {a: e for a, e in self.errors.items() if a not in self.not_namesrvs}
        rest = f"; no answer from {'; '.join(f'{a}: {e}' for a, e in others.items())}" if others else ""
        return (f"{addrs} {verb} answered request code {self.request_code} as unsupported, as a broker does)"
                f"{rest}: {advice}, e.g. {self.EXAMPLE}")


class NoOffsetsError(ClientError):
    """A consumer group has no committed offset (of the topic asked about): it does not exist,
    or has not consumed yet."""


class SendFailedError(ClientError):
    """A send failed on every attempt; ``attempts`` lists (broker name, error) per attempt
    and ``__cause__`` is the last error."""

    def __init__(self, topic: str, attempts: list[tuple[str, Exception]]) -> None:
        self.topic = topic
        self.attempts = attempts
        self.retriable = bool(attempts) and all(getattr(e, "retriable", False) for _, e in attempts)
        detail = "; ".join(f"{broker}: {exc}" for broker, exc in attempts)
        super().__init__(f"sending to {topic!r} failed after {len(attempts)} attempt(s): {detail}")


__all__ = [
    "ClientConfigError",
    "ClientError",
    "ClientStateError",
    "ClientTimeoutError",
    "ConnectFailed",
    "ConnectionClosed",
    "MessageIllegalError",
    "MessageValidationError",
    "NameServerUnavailableError",
    "NoBrokerError",
    "NoRouteError",
    "NotANameServerError",
    "RemotingError",
    "RequestTimeout",
    "ResponseError",
    "SendFailedError",
    "SkiffError",
    "error_class",
]
