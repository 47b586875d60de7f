"""Credentials: the access key and secret key a client signs its requests with.

A broker with ``aclEnable=true`` refuses unsigned requests (docs/acl.md). Give a
client its keys in one of three ways, first found wins in `resolve_credentials`:

- explicitly: ``Credentials("app-user", "app-secret")`` passed as ``credentials=``
  to any producer, consumer, pull client or admin (or to `ClientConfig`);
- a credentials file: YAML with RocketMQ's tools.yml keys ``accessKey`` and ``secretKey``
  (``Credentials.from_file``);
- environment variables ``SKIFF_ACCESS_KEY`` and ``SKIFF_SECRET_KEY`` (read by
  `ClientConfig` when it is given none).

The secret key never appears in ``repr`` or in an error message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from skiff.client.errors import ClientConfigError

ACCESS_KEY_ENV = "SKIFF_ACCESS_KEY"
SECRET_KEY_ENV = "SKIFF_SECRET_KEY"
CREDENTIALS_FILE_ENV = "SKIFF_CREDENTIALS_FILE"


@dataclass(frozen=True, slots=True)
class Credentials:
    """RocketMQ's SessionCredentials: who signs, and the secret that proves it."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)
    """Sent as ``SecurityToken`` and signed; plain ACL does not check it (RocketMQ's neither)."""

    def __post_init__(self) -> None:
        if not isinstance(self.access_key, str) or not self.access_key:
            raise ClientConfigError("credentials: the access key is empty")
        if not isinstance(self.secret_key, str) or not self.secret_key:
            raise ClientConfigError(f"credentials: the secret key of access key {self.access_key!r} is empty")

    @classmethod
    def from_env(cls) -> Credentials | None:
        """From ``$SKIFF_ACCESS_KEY``/``$SKIFF_SECRET_KEY``, or the file ``$SKIFF_CREDENTIALS_FILE``;
        None when neither is set; an error when only one key is."""
        access, secret = os.environ.get(ACCESS_KEY_ENV, ""), os.environ.get(SECRET_KEY_ENV, "")
        if access or secret:
            if not (access and secret):
                missing = SECRET_KEY_ENV if access else ACCESS_KEY_ENV
                raise ClientConfigError(f"${missing} is not set: set both {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}")
            return cls(access, secret)
        path = os.environ.get(CREDENTIALS_FILE_ENV, "")
        return cls.from_file(path) if path else None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Credentials:
        """From a YAML file with ``accessKey`` and ``secretKey`` (RocketMQ's conf/tools.yml)."""
        import yaml  # only credential files need it

        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ClientConfigError(f"credentials file {path}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ClientConfigError(f"credentials file {path} is not YAML: {_first_line(exc)}") from None
        if not isinstance(data, dict) or not data.get("accessKey") or not data.get("secretKey"):
            raise ClientConfigError(f"credentials file {path} needs accessKey and secretKey")
        token = data.get("securityToken")
        return cls(str(data["accessKey"]), str(data["secretKey"]), str(token) if token else None)


def resolve_credentials(access_key: str | None = None, secret_key: str | None = None,
                        file: str | os.PathLike[str] | None = None) -> Credentials | None:
    """Explicit keys, else the file; None leaves it to `ClientConfig`, which reads the environment
    (`Credentials.from_env`).

    The command line passes its ``--access-key/--secret-key/--credentials`` here.
    """
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise ClientConfigError("give both an access key and a secret key")
        return Credentials(access_key, secret_key)
    if file:
        return Credentials.from_file(file)
    return None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
