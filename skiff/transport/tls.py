"""TLS for the remoting door: RocketMQ's ``tls.*`` keys, the ssl contexts made from them,
and the listener that tells a TLS client from a plaintext one by its first byte.

RocketMQ's Netty server (``NettyRemotingServer.HandshakeHandler``) peeks at the first byte
a client sends: 0x16, a TLS handshake record, starts TLS; anything else is plaintext,
served in ``permissive`` mode and refused in ``enforcing`` mode. A plaintext remoting frame
cannot start with 0x16: its first four bytes are the frame length, and 0x16000000 bytes is
far past `FRAME_MAX_BYTES`. `SniffingListener` does the same with ``MSG_PEEK``, so no byte
is consumed before the connection is handed to the event loop with or without TLS.

The keys keep RocketMQ's names (``TlsSystemConfig``), read from broker.conf / namesrv.conf
or the command line instead of JVM system properties. Skiff's default mode is
``disabled`` (RocketMQ's is ``permissive`` with a self-signed test certificate made at each
start): a server serves TLS only with a certificate its operator gave it. See docs/tls.md.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from skiff.common.config import build_config, read_properties_file
from skiff.common.errors import ConfigError
from skiff.common.limits import TLS_HANDSHAKE_TIMEOUT_S, TLS_REFUSAL_MAX_BYTES, TLS_SNIFF_TIMEOUT_S
from skiff.common.service import Periodic
from skiff.protocol.codes import ResponseCode
from skiff.protocol.frame import FrameDecoder, FrameError, encode_frame

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16
"""The first byte of every TLS connection (record type handshake, the ClientHello)."""

TLS_AT_PLAINTEXT_PORT = " (a TLS handshake: this port serves plaintext, tls.server.mode=disabled; docs/tls.md)"
"""Added to the reason a plaintext port closes a connection whose first frame is a TLS ClientHello."""


def starts_tls(data: bytes) -> bool:
    """Whether bytes at a frame boundary begin a TLS record rather than a remoting frame."""
    return data[:1] == bytes((TLS_HANDSHAKE_RECORD,))


ACCEPT_RETRY_S = 1.0
"""After an accept fails (out of descriptors, say), the listener waits this long before
accepting again, as asyncio's own servers do, instead of spinning."""

CERT_CHECK_INTERVAL_S = 10.0
"""How often a TLS port looks at its certificate files for a change (a stat of each)."""

ENFORCING_REMARK = ("this server accepts TLS connections only (tls.server.mode=enforcing): connect with TLS "
                    "(skiff --tls, a Skiff client's tls=, RocketMQ clients -Dtls.enable=true)")
"""The answer a plaintext request gets from an enforcing server, before it closes the connection."""


class TlsMode(enum.Enum):
    """RocketMQ's ``tls.server.mode``."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    """RocketMQ's ``tls.server.need.client.auth`` (Netty's ClientAuth names)."""

    NONE = ssl.CERT_NONE
    OPTIONAL = ssl.CERT_OPTIONAL
    REQUIRE = ssl.CERT_REQUIRED


@dataclass(frozen=True, slots=True)
class TlsClientConfig:
    """How a client side connects with TLS: its certificate for mutual TLS, and whether and
    against what it verifies the server's. RocketMQ's default (``tls.client.authServer=false``)
    verifies nothing: the connection is encrypted but the server unauthenticated. Verifying
    checks the certificate chain, not the host name, as RocketMQ's Netty client: brokers are
    reached at the addresses the NameServer hands out, which certificates rarely list."""

    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    auth_server: bool = False
    trust_cert_path: str = ""
    """PEM certificates the server's must chain to; empty with ``auth_server``: the system's."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The ``tls.*`` keys a NameServer and a broker share; their configs derive from it.

    The server side is what this process's listening door does; ``tls.enable`` and the
    ``tls.client.*`` keys are what it does when it dials (a broker registering with
    NameServers). RocketMQ's ``tls.test.mode.enable`` is not read.
    """

    TLS_KEYS: ClassVar[dict[str, str]] = {
        "tls.server.mode": "tls_server_mode",
        "tls.server.certPath": "tls_server_cert_path",
        "tls.server.keyPath": "tls_server_key_path",
        "tls.server.keyPassword": "tls_server_key_password",
        "tls.server.need.client.auth": "tls_server_need_client_auth",
        "tls.server.authClient": "tls_server_auth_client",
        "tls.server.trustCertPath": "tls_server_trust_cert_path",
        "tls.enable": "tls_enable",
        "tls.client.certPath": "tls_client_cert_path",
        "tls.client.keyPath": "tls_client_key_path",
        "tls.client.keyPassword": "tls_client_key_password",
        "tls.client.authServer": "tls_client_auth_server",
        "tls.client.trustCertPath": "tls_client_trust_cert_path",
        "tls.config.file": "tls_config_file",
    }
    """RocketMQ's key → field (the configs' ALIASES include these)."""
    ALIASES: ClassVar[dict[str, str]] = TLS_KEYS
    TLS_SECRETS: ClassVar[frozenset[str]] = frozenset({"tls_server_key_password", "tls_client_key_password"})
    """Fields never shown (GET_BROKER_CONFIG answers "******" for a password that is set)."""

    tls_server_mode: TlsMode = TlsMode.DISABLED
    """disabled: plaintext only; permissive: TLS and plaintext on one port; enforcing: TLS only."""
    tls_server_cert_path: str = ""
    """PEM certificate chain of this server (needed unless the mode is disabled)."""
    tls_server_key_path: str = ""
    """Its PEM private key (PKCS#8 or traditional, encrypted with ``tls.server.keyPassword`` or not)."""
    tls_server_key_password: str = ""
    tls_server_need_client_auth: ClientAuth = ClientAuth.NONE
    """none / optional / require a client certificate (mutual TLS)."""
    tls_server_auth_client: bool = False
    """Accepted for RocketMQ's files; Skiff verifies every client certificate it asks for against
    ``tls.server.trustCertPath`` whatever this says (Python's ssl cannot ask without verifying)."""
    tls_server_trust_cert_path: str = ""
    """PEM certificates client certificates must chain to (needed with client auth)."""
    tls_enable: bool = False
    """Connections this process opens (a broker's to its NameServers) use TLS."""
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    tls_client_key_password: str = ""
    tls_client_auth_server: bool = False
    tls_client_trust_cert_path: str = ""
    tls_config_file: str = ""
    """A properties file of ``tls.*`` keys, read as RocketMQ reads it: its values win over the
    config's, and it may not set ``tls.server.mode`` or ``tls.enable``."""

    def __post_init__(self) -> None:
        if self.tls_config_file:
            for name, value in _file_values(self.tls_config_file).items():
                object.__setattr__(self, name, value)

    def validate_tls(self) -> None:
        """The files each mode needs are named (their contents are checked when loaded)."""
        if self.tls_server_mode is not TlsMode.DISABLED:
            for key, value in (("tls.server.certPath", self.tls_server_cert_path),
                               ("tls.server.keyPath", self.tls_server_key_path)):
                if not value:
                    raise ConfigError(f"{key} is needed with tls.server.mode={self.tls_server_mode.value}")
        if self.tls_server_need_client_auth is not ClientAuth.NONE and not self.tls_server_trust_cert_path:
            raise ConfigError(f"tls.server.trustCertPath is needed with tls.server.need.client.auth="
                              f"{self.tls_server_need_client_auth.name.lower()}: client certificates are "
                              f"verified against it")
        if bool(self.tls_client_cert_path) != bool(self.tls_client_key_path):
            raise ConfigError("tls.client.certPath and tls.client.keyPath go together (mutual TLS)")

    def server_tls(self) -> ServerTls | None:
        """What the listening door serves; None when TLS is disabled."""
        if self.tls_server_mode is TlsMode.DISABLED:
            return None
        return ServerTls(self)

    def client_tls(self) -> TlsClientConfig | None:
        """How this process dials (``tls.enable``); None for plaintext."""
        if not self.tls_enable:
            return None
        return TlsClientConfig(self.tls_client_cert_path, self.tls_client_key_path, self.tls_client_key_password,
                               self.tls_client_auth_server, self.tls_client_trust_cert_path)


def _file_values(path: str) -> dict[str, object]:
    """The fields ``tls.config.file`` sets, with their values; `ConfigError` names a key it may not set."""
    keys = read_properties_file(path)  # a missing file is an error (RocketMQ skips it silently)
    for key in keys:
        if key in ("tls.server.mode", "tls.enable", "tls.config.file"):
            raise ConfigError(f"tls.config.file {path}: {key} is not read from this file (as in RocketMQ): "
                              f"set it in the server's config")
        if key not in TlsSettings.TLS_KEYS:
            raise ConfigError(f"tls.config.file {path}: unknown key {key!r} (only tls.* keys)")
    parsed = build_config(TlsSettings, keys)
    return {TlsSettings.TLS_KEYS[key]: getattr(parsed, TlsSettings.TLS_KEYS[key]) for key in keys}


class ServerTls:
    """What a TLS-capable port serves: its mode, and the context of its certificate, which
    `reload_if_changed` replaces when the files change (a renewed certificate is served to new
    connections without a restart, as RocketMQ's servers watch theirs). Files that changed but
    cannot be used (a half-written pair) are logged and the old certificate stays."""

    def __init__(self, settings: TlsSettings, check_interval_s: float = CERT_CHECK_INTERVAL_S) -> None:
        self.mode = settings.tls_server_mode
        self.check_interval_s = check_interval_s
        self._settings = settings
        self._files = WatchedFiles(settings)
        self.context = server_context(settings)

    def reload_if_changed(self) -> None:
        if not self._files.changed():
            return
        try:
            self.context = server_context(self._settings)
        except ConfigError as exc:
            log.error("the TLS files changed but cannot be used; the previous certificate is still served: %s", exc)
            return
        log.info("TLS certificate reloaded from %s", self._settings.tls_server_cert_path)



class WatchedFiles:
    """A server's certificate, key and trust files, and whether they changed since last asked
    (by modification time, size and inode: a file replaced by a rename counts)."""

    def __init__(self, settings: TlsSettings, paths: Sequence[str] | None = None) -> None:
        """``paths``: these files instead of the server's (a dialling side's certificate, key and trust)."""
        if paths is not None:
            self._paths = [p for p in paths if p]
        else:
            self._paths = [settings.tls_server_cert_path, settings.tls_server_key_path]
            if settings.tls_server_need_client_auth is not ClientAuth.NONE:
                self._paths.append(settings.tls_server_trust_cert_path)
        self._stamps = self._now()

    def changed(self) -> bool:
        now = self._now()
        if now == self._stamps:
            return False
        self._stamps = now
        return True

    def _now(self) -> tuple[tuple[int, int, int] | None, ...]:
        return tuple(_stamp(p) for p in self._paths)


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The server's context; `ConfigError` names the key whose file cannot be used."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_pair(ctx, "tls.server", settings.tls_server_cert_path, settings.tls_server_key_path,
               settings.tls_server_key_password)
    if settings.tls_server_need_client_auth is not ClientAuth.NONE:
        ctx.verify_mode = ssl.VerifyMode(settings.tls_server_need_client_auth.value)
        _load_trust(ctx, "tls.server.trustCertPath", settings.tls_server_trust_cert_path)
    return ctx


def client_context(config: TlsClientConfig) -> ssl.SSLContext:
    """A dialling side's context (see `TlsClientConfig` for what it verifies)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    if config.auth_server:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if config.trust_cert_path:
            _load_trust(ctx, "tls.client.trustCertPath", config.trust_cert_path)
        else:
            ctx.load_default_certs()
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if config.cert_path:
        _load_pair(ctx, "tls.client", config.cert_path, config.key_path, config.key_password)
    return ctx


def _load_pair(ctx: ssl.SSLContext, prefix: str, cert_path: str, key_path: str, password: str) -> None:
    try:
        ctx.load_cert_chain(cert_path, key_path or None, password or None)
    except FileNotFoundError as exc:
        raise ConfigError(f"{prefix}.certPath / {prefix}.keyPath: {exc.filename} does not exist") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"{prefix}.certPath {cert_path} / {prefix}.keyPath {key_path}: not a PEM certificate "
                          f"and its private key (or a wrong {prefix}.keyPassword): {exc}") from None


def _load_trust(ctx: ssl.SSLContext, key: str, path: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"{key}: {path} is not a readable file of PEM certificates: {exc}") from None


def server_pem(settings: TlsSettings) -> tuple[bytes, bytes, bytes | None]:
    """The server's certificate chain, its key unencrypted, and the trusted client certificates, as
    PEM bytes: what grpcio's server credentials take (they read no files and no passwords)."""
    from cryptography.hazmat.primitives import serialization  # only the gRPC door needs it

    def read(key: str, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None

    chain = read("tls.server.certPath", settings.tls_server_cert_path)
    key_pem = read("tls.server.keyPath", settings.tls_server_key_path)
    password = settings.tls_server_key_password.encode() or None
    try:
        key = serialization.load_pem_private_key(key_pem, password)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"tls.server.keyPath {settings.tls_server_key_path}: not a PEM private key "
                          f"(or a wrong tls.server.keyPassword): {exc}") from None
    plain = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    trust = (read("tls.server.trustCertPath", settings.tls_server_trust_cert_path)
             if settings.tls_server_need_client_auth is not ClientAuth.NONE else None)
    return chain, plain, trust


# ------------------------------------------------------------------ listening


ProtocolFactory = Callable[[], asyncio.Protocol]
Accepted = Callable[[asyncio.Protocol], None]


def listen_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A bound, listening, non-blocking socket (``OSError`` as `socket.create_server` raises it)."""
    family = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0][0]
    sock = socket.create_server((host, port), family=family, backlog=backlog)
    sock.setblocking(False)
    return sock


class SniffingListener:
    """Accepts on ``sock`` and serves each connection by its first byte and ``tls.mode``.

    ``make`` builds a connection's protocol; ``accepted`` is told once the connection is
    served (after its TLS handshake), so a connection whose handshake fails is never
    tracked. A failed handshake and a refused plaintext client are logged with the peer;
    the listener keeps serving. Shaped like `asyncio.Server` where a server uses one
    (``sockets``, ``close``, ``wait_closed``).

    ``door`` names the port in those log lines (" to the HA port"); ``answer_refused``: a
    refused plaintext client is answered as a remoting client (`_PlaintextRefusal`), else
    closed at once (a protocol with no way to say why, the HA stream's).
    """

    def __init__(self, sock: socket.socket, tls: ServerTls, make: ProtocolFactory, accepted: Accepted, *,
                 door: str = "", answer_refused: bool = True) -> None:
        self._sock = sock
        self._tls = tls
        self._make = make
        self._accepted = accepted
        self._door = door
        self._answer_refused = answer_refused
        self._tasks: set[asyncio.Task[None]] = set()
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())
        self._watch = Periodic("tls-certificate-watch", tls.check_interval_s, tls.reload_if_changed)
        self._watch.start()

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return () if self._sock.fileno() < 0 else (self._sock,)

    def close(self) -> None:
        """Stop accepting; connections still being sniffed or shaking hands are dropped."""
        self._accepting.cancel()
        for task in list(self._tasks):
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        await self._watch.stop()
        await asyncio.gather(self._accepting, *self._tasks, return_exceptions=True)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(self._sock)
            except (ConnectionAbortedError, InterruptedError):
                continue
            except OSError as exc:
                if self._sock.fileno() < 0:  # closed
                    return
                # out of descriptors or buffers, or anything else: the listener must not die of it
                log.error("cannot accept a connection on port %d: %s; retrying in %.0f s",
                          self._sock.getsockname()[1], exc.strerror or exc, ACCEPT_RETRY_S)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            task = loop.create_task(self._serve(conn, _peer_text(peer)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: socket.socket, peer: str) -> None:
        conn.setblocking(False)
        try:
            async with asyncio.timeout(TLS_SNIFF_TIMEOUT_S):
                first = await _peek_byte(conn)
        except (TimeoutError, OSError) as exc:
            why = str(exc) or f"nothing within {TLS_SNIFF_TIMEOUT_S:.0f} s"
            log.info("closed the connection from %s before it said anything: %s", peer, why)
            conn.close()
            return
        except asyncio.CancelledError:
            conn.close()
            raise
        if not first:
            conn.close()
            return
        await self._hand_over(conn, peer, starts_tls(first))

    async def _hand_over(self, conn: socket.socket, peer: str, is_tls: bool) -> None:
        """Give ``conn`` to the loop: the socket is the loop's from here on, closed by it."""
        loop = asyncio.get_running_loop()
        if not is_tls and self._tls.mode is TlsMode.ENFORCING:
            log.warning("refused a plaintext connection from %s%s: tls.server.mode is enforcing", peer, self._door)
            if not self._answer_refused:
                conn.close()
                return
            try:
                await loop.connect_accepted_socket(_PlaintextRefusal, conn)
            except OSError as exc:
                log.debug("the refused connection from %s failed: %s", peer, exc)
            return
        protocol = self._make()
        try:
            if is_tls:
                await loop.connect_accepted_socket(lambda: protocol, conn, ssl=self._tls.context,
                                                   ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
            else:
                await loop.connect_accepted_socket(lambda: protocol, conn)
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            log.warning("TLS handshake with %s%s failed: %s", peer, self._door, handshake_failure(exc))
            return
        self._accepted(protocol)


def handshake_failure(exc: BaseException) -> str:
    """Why a TLS handshake failed, in a log line: OpenSSL's reason (``CERTIFICATE_VERIFY_FAILED
    (SSL)``) rather than its long text, else the error's."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return f"{exc.reason} ({exc.library or 'ssl'})"
    return str(exc) or type(exc).__name__


def _peer_text(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)


async def _peek_byte(conn: socket.socket) -> bytes:
    """The first byte the peer sent, left in the socket (b"" if it closed first)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            pass
        readable: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(conn.fileno(), ready)
        try:
            await readable
        finally:
            loop.remove_reader(conn.fileno())


class _PlaintextRefusal(asyncio.Protocol):
    """Answers a plaintext client's first requests (those of its first read) with why they are
    refused, then closes.

    A RocketMQ client then reports the reason instead of a bare closed connection; bytes
    that are no remoting frame (or more than `TLS_REFUSAL_MAX_BYTES` of them) just close.
    """

    def __init__(self) -> None:
        self._decoder = FrameDecoder(TLS_REFUSAL_MAX_BYTES)
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._deadline = asyncio.get_running_loop().call_later(TLS_SNIFF_TIMEOUT_S, transport.close)

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        try:
            commands = self._decoder.feed(data)
        except FrameError:
            self._transport.close()
            return
        if not commands:
            return
        for request in commands:  # a client may have sent several at once (a heartbeat and a send)
            self._transport.writelines(encode_frame(request.response(ResponseCode.NO_PERMISSION, ENFORCING_REMARK)))
        self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
