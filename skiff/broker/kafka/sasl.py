"""SASL on the Kafka listener: who a Kafka connection is, checked against ACL 2.0's users.

Kafka's order on a connection (KIP-43, KIP-152): ApiVersions (allowed before anything),
SaslHandshake naming a mechanism, then SaslAuthenticate until the mechanism is done; only
then other requests. Skiff follows Kafka's broker where a client can tell:

- an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled ones, then the
  connection is closed;
- a SaslAuthenticate that fails: SASL_AUTHENTICATION_FAILED with the reason, then closed
  (the client reports an authentication error instead of retrying);
- a request out of order (a second handshake, a SaslAuthenticate before the handshake,
  any other request before authentication): ILLEGAL_SASL_STATE, then closed;
- after a v0 handshake the tokens come without Kafka headers (a size and the token each
  way), as Kafka's pre-1.0 clients send them.

The mechanisms: PLAIN (``authzid NUL user NUL password``: the authzid empty or the user,
as Kafka's PlainSaslServer) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677). A user's secret is
its ACL 2.0 password, which the store keeps in the clear because RocketMQ's signatures are
HMACs of it; SCRAM's salted password is derived from it per authentication, with a fresh
salt each time (a client keeps nothing between connections). The secret is checked
whenever access control is on, whatever ``authenticationEnabled`` says: a Kafka client
that is asked for SASL always sends one, and an unchecked password would be a door
around the users. A disabled user is refused. Refusals are logged without the secret.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skiff.broker.auth import AuthService, Caller
from skiff.broker.auth.model import User, UserStatus

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
"""What SaslHandshake offers, in this order."""
SCRAM_ITERATIONS = 4096
"""PBKDF2 rounds Skiff asks of a SCRAM client: Kafka's minimum, which every client accepts
(kafka-python refuses more than 1 000 000); the broker pays them once per connection
(measured 2 ms with SHA-256, 6 ms with SHA-512), on a thread."""
_NONCE_BYTES = 24
_SALT_BYTES = 16


class SaslFailure(Exception):
    """A SaslAuthenticate that fails: the text goes to the client and the log."""


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    """Waiting for SaslHandshake (ApiVersions is served too)."""
    AUTHENTICATE = "authenticate"
    """A v1 handshake chose a mechanism: SaslAuthenticate requests carry its tokens."""
    RAW = "raw"
    """A v0 handshake chose a mechanism: the next frames are bare tokens."""
    DONE = "done"


class Exchange:
    """One mechanism's conversation: each client token in, the server's token out; `caller`
    set once it has succeeded."""

    caller: Caller | None = None

    def step(self, token: bytes) -> bytes:
        raise NotImplementedError


@dataclass
class Session:
    """One Kafka connection's security state, made by the listener per connection."""

    peer: tuple[str, int]
    state: SaslState = SaslState.HANDSHAKE
    caller: Caller | None = None
    """Who the connection authenticated as (None until then, and always without access control)."""
    close: bool = False
    """Set when the answer being written is the connection's last (Kafka closes after it)."""
    exchange: Exchange | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return self.peer[0]


def _user(auth: AuthService, name: str, host: str, mechanism: str) -> User:
    user = auth.store.user(name)
    if user is None:
        raise _refused(auth, host, name, mechanism, f"User:{name} is not found")
    if user.status is UserStatus.DISABLE:
        raise _refused(auth, host, name, mechanism, f"User:{name} is disabled")
    return user


def _refused(auth: AuthService, host: str, name: str, mechanism: str, why: str) -> SaslFailure:
    auth.refused += 1
    log.warning("Kafka SASL %s refused %s (user %s): %s", mechanism, host, name or "-", why)
    return SaslFailure(f"Authentication failed: {why}")


class Plain(Exchange):
    def __init__(self, auth: AuthService, host: str) -> None:
        self.auth = auth
        self.host = host

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _refused(self.auth, self.host, "", PLAIN, "a PLAIN token is authzid NUL username NUL password")
        try:
            authzid, name, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise _refused(self.auth, self.host, "", PLAIN, "a PLAIN token is not UTF-8") from None
        if not name or not password:
            raise _refused(self.auth, self.host, name, PLAIN, "username or password is empty")
        if authzid and authzid != name:
            raise _refused(self.auth, self.host, name, PLAIN,
                           f"authorization id {authzid!r} is neither empty nor the username")
        user = _user(self.auth, name, self.host, PLAIN)
        if not hmac.compare_digest(user.password.encode(), password.encode()):
            raise _refused(self.auth, self.host, name, PLAIN, f"wrong password for User:{name}")
        self.caller = Caller(user, self.host)
        return b""


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ValueError(f"SCRAM attribute {part!r} is not x=value")
        out.setdefault(part[0], part[2:])
    return out


def _saslname(text: str) -> str:
    """RFC 5802's escaping of ',' and '=' in a username."""
    return text.replace("=2C", ",").replace("=3D", "=")


class Scram(Exchange):
    """The server's side of SCRAM-SHA-256/512 without channel binding (gs2 header ``n,,``
    or ``y,,``, as Kafka's clients send)."""

    def __init__(self, auth: AuthService, host: str, mechanism: str) -> None:
        self.auth = auth
        self.host = host
        self.mechanism = mechanism
        self.hash: Callable[..., Any] = hashlib.sha256 if mechanism == SCRAM_SHA_256 else hashlib.sha512
        self.name = self.hash().name
        self._first: tuple[User, str, str, str, bytes] | None = None
        """After the first message: the user, the gs2 header, client-first-bare, server-first, the salt."""

    def _fail(self, name: str, why: str) -> SaslFailure:
        return _refused(self.auth, self.host, name, self.mechanism, why)

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("", "a SCRAM message is not UTF-8") from None
        return self._client_first(text) if self._first is None else self._client_final(text)

    def _client_first(self, text: str) -> bytes:
        pieces = text.split(",", 2)
        if len(pieces) != 3 or pieces[0] not in ("n", "y"):
            raise self._fail("", "the first SCRAM message has no gs2 header n,, (channel binding is not served)")
        gs2, bare = f"{pieces[0]},{pieces[1]},", pieces[2]
        try:
            attrs = _attributes(bare)
        except ValueError as exc:
            raise self._fail("", str(exc)) from None
        name, nonce = _saslname(attrs.get("n", "")), attrs.get("r", "")
        if not name or not nonce:
            raise self._fail(name, "the first SCRAM message needs n=<user> and r=<nonce>")
        if pieces[1] and pieces[1] != f"a={attrs.get('n')}":
            raise self._fail(name, "the authorization id is neither empty nor the username")
        user = _user(self.auth, name, self.host, self.mechanism)
        salt = secrets.token_bytes(_SALT_BYTES)
        server_first = (f"r={nonce}{base64.b64encode(secrets.token_bytes(_NONCE_BYTES)).decode()},"
                        f"s={base64.b64encode(salt).decode()},i={SCRAM_ITERATIONS}")
        self._first = (user, gs2, bare, server_first, salt)
        return server_first.encode()

    def _client_final(self, text: str) -> bytes:
        assert self._first is not None
        user, gs2, bare, server_first, salt = self._first
        name = user.username
        without_proof, sep, proof_text = text.rpartition(",p=")
        try:
            attrs = _attributes(without_proof) if sep else {}
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise self._fail(name, "the final SCRAM message does not parse") from None
        if attrs.get("c") != base64.b64encode(gs2.encode()).decode():
            raise self._fail(name, "the channel binding (c=) does not match the gs2 header")
        if attrs.get("r") != _attributes(server_first)["r"]:
            raise self._fail(name, "the final SCRAM message's nonce is not the server's")
        salted = hashlib.pbkdf2_hmac(self.name, user.password.encode(), salt, SCRAM_ITERATIONS)
        client_key = hmac.digest(salted, b"Client Key", self.name)
        stored_key = self.hash(client_key).digest()
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self.name)
        if len(proof) != len(signature) or not hmac.compare_digest(
                self.hash(bytes(a ^ b for a, b in zip(proof, signature))).digest(), stored_key):
            raise self._fail(name, f"wrong password for User:{name}")
        server_key = hmac.digest(salted, b"Server Key", self.name)
        self.caller = Caller(user, self.host)
        return f"v={base64.b64encode(hmac.digest(server_key, auth_message, self.name)).decode()}".encode()


def exchange(auth: AuthService, mechanism: str, host: str) -> Exchange | None:
    """The conversation for ``mechanism``, or None when Skiff does not offer it."""
    if mechanism == PLAIN:
        return Plain(auth, host)
    if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        return Scram(auth, host, mechanism)
    return None
