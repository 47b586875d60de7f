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


class NoMasterError(NoRouteError, NoBrokerError):
    """Nowhere to send now: the route names broker groups, but none of them has a master (the
    NameServer lists only slaves, or no address, for brokerId 0). The master is down or a
    failover is in progress; a producer waits for a new one within its send timeout.

    ``groups`` maps each masterless group to what the route has ("slaves only", "no broker");
    ``exists`` is False when the topic has no route of its own and TBW102's groups are the
    masterless ones (it would be auto-created); ``waited_ms`` is how long a send waited.
    A `NoRouteError` (what callers caught before it existed) and a `NoBrokerError`.
    """

    retriable = True

    def __init__(self, topic: str | None, groups: dict[str, str], *, exists: bool = True,
                 waited_ms: int | None = None) -> None:
        self.topic = topic  # type: ignore[assignment]
        self.groups = dict(groups)
        self.exists = exists
        self.waited_ms = waited_ms
        detail = ", ".join(f"{name}: {what}" for name, what in sorted(self.groups.items())) or "none listed"
        if topic is None:
            head = f"broker group {', '.join(sorted(self.groups))} has no master now ({detail})"
        elif exists:
            head = f"topic {topic!r} exists but none of its broker groups has a master now ({detail})"
        else:
            head = (f"topic {topic!r} does not exist yet and no broker group that would create it (TBW102's) "
                    f"has a master now ({detail})")
        tail = f"; the send waited {waited_ms} ms for one" if waited_ms is not None else ""
        ClientError.__init__(self, f"{head}: the master is down or a failover is in progress{tail}")

    def after_waiting(self, waited_ms: int) -> NoMasterError:
        """The same error, saying how long the send waited for a master."""
        return NoMasterError(self.topic, self.groups, exists=self.exists, waited_ms=waited_ms)


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
    "NoMasterError",
    "NoRouteError",
    "NotANameServerError",
    "RemotingError",
    "RequestTimeout",
    "ResponseError",
    "SendFailedError",
    "SkiffError",
    "error_class",
]
