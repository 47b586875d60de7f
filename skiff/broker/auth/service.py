"""AuthService: ACL 2.0 on one broker — who is calling (authentication, per door) and what they
may do (authorization, asked by the gate for both doors alike).

Authentication and authorization are switched apart (``authenticationEnabled``,
``authorizationEnabled``), each with its whitelist of request codes, as RocketMQ 5.3. With
authentication off, the caller is the user its ``AccessKey`` names, unverified (upstream's
authorization reads the subject the same way). Refusals are logged at WARNING with the peer
and the user, never a secret or a signature.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from skiff.broker.auth.evaluate import Need, refusal
from skiff.broker.auth.migrate import migrate_plain_acl
from skiff.broker.auth.model import AuthDataError, User, UserStatus, UserType
from skiff.broker.auth.signature import GrpcCredential, SignatureError, check_grpc
from skiff.broker.auth.store import AuthData, AuthStore
from skiff.broker.config import BrokerConfig
from skiff.common.clock import Clock
from skiff.common.limits import AUTH_DECISIONS_CACHED
from skiff.protocol.acl_sign import ACCESS_KEY, signature_matches
from skiff.protocol.command import RemotingCommand

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who made a request: the user (None when nobody was asked to sign) and the peer's host."""

    user: User | None
    host: str

    @property
    def name(self) -> str:
        return self.user.username if self.user is not None else "-"


def _codes(text: str) -> frozenset[str]:
    return frozenset(c.strip() for c in text.split(",") if c.strip())


class AuthService:
    def __init__(self, config: BrokerConfig, store_root: str | None, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.authentication = config.authentication_enabled
        self.authorization = config.authorization_enabled
        self.authentication_whitelist = _codes(config.authentication_whitelist)
        self.authorization_whitelist = _codes(config.authorization_whitelist)
        self.store = AuthStore(store_root)
        self.refused = 0
        """Requests refused since start (a metric)."""
        self._decisions: dict[tuple[str, ...], str | None] = {}
        self._decided_on: AuthData | None = None
        """The table `_decisions` were made on: a new one (any change) empties them."""

    @classmethod
    def for_plain_acl(cls, config: BrokerConfig, clock: Clock) -> AuthService:
        """The gRPC door's checks under RocketMQ 4.x plain ACL (aclEnable): plain_acl.yml's accounts
        as users and policies, migrated in memory as `skiff acl migrate` would, both checks on.
        The table is replaced whole (`AuthStore.adopt`) each time the file is reloaded."""
        service = cls(config, None, clock)
        service.authentication = service.authorization = True
        service.authentication_whitelist = service.authorization_whitelist = frozenset()
        return service

    @property
    def enabled(self) -> bool:
        return self.authentication or self.authorization

    def load(self) -> None:
        """The stored users and ACLs, then the users broker.conf asks for; `ConfigError` if unusable."""
        self.store.load()
        cfg = self.config
        for key, text, name_key, secret_key in (
                ("initAuthenticationUser", cfg.init_authentication_user, "username", "password"),
                ("innerClientAuthenticationCredentials", cfg.inner_client_authentication_credentials,
                 "accessKey", "secretKey")):
            if text.strip():
                self.store.create_user_if_absent(_super_user(key, text, name_key, secret_key))
        if self.config.migrate_auth_from_v1_enabled:
            self._migrate_v1()

    def _migrate_v1(self) -> None:
        path = self.config.plain_acl_file
        if not os.path.exists(path):
            log.warning("migrateAuthFromV1Enabled: %s does not exist, nothing migrated", path)
            return
        with open(path, encoding="utf-8") as f:
            migrated = migrate_plain_acl(yaml.safe_load(f), path)
        for user in migrated.users:
            if self.store.user(user.username) is None:
                self.store.create_user(user)
                acl = next((a for a in migrated.acls if a.username == user.username), None)
                if acl is not None:
                    self.store.put_acl(acl)
        for item in migrated.not_migrated:
            log.warning("migrateAuthFromV1Enabled: not migrated: %s", item)

    # -- authentication (per door) -------------------------------------------------

    def authenticate_remoting(self, cmd: RemotingCommand, host: str) -> Caller | str:
        """The caller, or why the request is refused (the client's reason)."""
        ext = cmd.ext_fields or {}
        name = ext.get(ACCESS_KEY, "")
        verify = self.authentication and str(cmd.code) not in self.authentication_whitelist
        if not name:
            return self._unauthenticated(host, verify, "username cannot be null: the request carries no AccessKey")
        user = self.store.user(name)
        if user is None:
            return self._failed(host, name, cmd.code, f"User:{name} is not found")
        if verify:
            if user.status is UserStatus.DISABLE:
                return self._failed(host, name, cmd.code, f"User:{name} is disabled")
            if not signature_matches(user.password, ext, cmd.body):
                return self._failed(host, name, cmd.code, f"check signature failed for User:{name}")
        return Caller(user, host)

    def authenticate_grpc(self, credential: GrpcCredential | SignatureError | None, rpc: str,
                          host: str) -> Caller | str:
        """``credential``: the call's parsed authorization (None: no header; a `SignatureError`:
        one that did not parse)."""
        verify = self.authentication and rpc not in self.authentication_whitelist
        if credential is None or (isinstance(credential, SignatureError) and not verify):
            why = "username cannot be null: the call has no authorization header"
            return self._unauthenticated(host, verify, str(credential) if credential is not None else why)
        if isinstance(credential, SignatureError):
            return self._failed(host, "-", rpc, str(credential))
        name = credential.access_key
        user = self.store.user(name)
        if user is None:
            return self._failed(host, name, rpc, f"User:{name} is not found")
        if verify:
            if user.status is UserStatus.DISABLE:
                return self._failed(host, name, rpc, f"User:{name} is disabled")
            try:
                check_grpc(credential, user.password, self.clock.now_ms())
            except SignatureError as exc:
                return self._failed(host, name, rpc, str(exc))
        return Caller(user, host)

    def _unauthenticated(self, host: str, verify: bool, why: str) -> Caller | str:
        if verify:
            return self._failed(host, "-", "", why)
        return Caller(None, host)

    def _failed(self, host: str, user: str, code: int | str, why: str) -> str:
        self.refused += 1
        log.warning("authentication refused request %s from %s (user %s): %s", code, host, user, why)
        return why

    # -- authorization (asked by the gate) -----------------------------------------

    def authorize(self, caller: Caller, needs: Sequence[Need], code: int | str, *, quiet: bool = False) -> str | None:
        """None when ``caller`` may do ``needs``, else why not (logged; at debug level when
        ``quiet``: a refusal the request expects, as Kafka's Metadata hiding a topic)."""
        if not self.authorization or str(code) in self.authorization_whitelist or not needs:
            return None
        user = caller.user
        if user is None:
            why = "username cannot be null: this broker authorizes every request and it names no user"
        elif user.status is UserStatus.DISABLE:
            why = f"User:{user.username} is disabled"
        else:
            denied = self._decide(user, needs, caller.host)
            if denied is None:
                return None
            why = denied
        self.refused += 1
        log.log(logging.DEBUG if quiet else logging.WARNING, "authorization refused request %s from %s (user %s): %s",
                code, caller.host, caller.name, why)
        return why

    def _decide(self, user: User, needs: Sequence[Need], host: str) -> str | None:
        """`refusal`, remembered per (user, needs, host) until the table changes: a producer's
        sends ask the same question each time, and the answer is a dict lookup after the first."""
        data = self.store.data
        if self._decided_on is not data or len(self._decisions) >= AUTH_DECISIONS_CACHED:
            self._decisions, self._decided_on = {}, data
        key = (user.username, host, *[n.key for n in needs])
        if key not in self._decisions:
            self._decisions[key] = refusal(user, data.acls.get(user.subject), needs, host)
        return self._decisions[key]

    def inner_credentials(self) -> tuple[str, str] | None:
        """The access and secret key the broker signs its own requests to other brokers with."""
        text = self.config.inner_client_authentication_credentials
        if not text.strip():
            return None
        user = _super_user("innerClientAuthenticationCredentials", text, "accessKey", "secretKey")
        return user.username, user.password


def _super_user(key: str, text: str, name_key: str, secret_key: str) -> User:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raise AuthDataError(f"{key}: not JSON {{\"{name_key}\": .., \"{secret_key}\": ..}}") from None
    if not isinstance(raw, Mapping) or not raw.get(name_key) or not raw.get(secret_key):
        raise AuthDataError(f"{key}: needs {name_key} and {secret_key}")
    return User(str(raw[name_key]), str(raw[secret_key]), UserType.SUPER)
