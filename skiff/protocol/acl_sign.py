"""RocketMQ 4.x plain-ACL request signatures, sans-IO: fields and bytes in, a string out.

What is signed (RocketMQ's ``AclUtils.combineRequestContent``, the Java
``AclClientRPCHook`` and the C++ ``ClientRPCHook``): every ext field of the
request except ``Signature`` and ``_UNIQUE_KEY_QUERY``, sorted by key, their
VALUES concatenated (keys are not part of the text) as UTF-8, then the body.
The signature is ``base64(HmacSHA1(secretKey, content))``.

The signer adds ``AccessKey`` (and ``SecurityToken`` when it has one) before
signing, so both are covered; the C++ client adds ``OnsChannel`` the same way.
The broker recomputes the content from the fields it received, so whichever
extra fields a client adds, they are covered as long as they are sent.

Java sorts keys with ``TreeMap`` (UTF-16 code units) and C++ with ``std::map``
(bytes); ext-field keys are ASCII, where both orders equal Python's.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from collections.abc import Mapping
from typing import Union

from skiff.protocol.command import RemotingCommand

Buffer = Union[bytes, bytearray, memoryview]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"
"""Sent by the C++ client (its ``channel`` argument, "ALIYUN" by default); signed like any field."""
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
"""RocketMQ's broker leaves this one out of the content it checks (MixAll.UNIQUE_MSG_QUERY_FLAG)."""
UNSIGNED_FIELDS = frozenset({SIGNATURE, UNIQUE_KEY_QUERY})


def signed_text(ext_fields: Mapping[str, str] | None) -> bytes:
    """The header part of the signed content: the signed fields' values in key order, UTF-8."""
    if not ext_fields:
        return b""
    return "".join([ext_fields[k] for k in sorted(ext_fields) if k not in UNSIGNED_FIELDS]).encode()


@functools.lru_cache(maxsize=256)
def _keyed(secret_key: str) -> hmac.HMAC:
    """An HMAC already keyed with ``secret_key``: copying it skips the key setup (about a third
    of a 1 KiB signature's cost). Keyed per account, so the cache stays as small as the ACL."""
    return hmac.new(secret_key.encode(), digestmod=hashlib.sha1)


def calc_signature(secret_key: str, ext_fields: Mapping[str, str] | None, body: Buffer = b"") -> str:
    """``base64(HmacSHA1(secret_key, signed_text(ext_fields) + body))``.

    The two parts are fed to one HMAC, so a multi-megabyte batch body is not copied.
    """
    mac = _keyed(secret_key).copy()
    mac.update(signed_text(ext_fields))
    if body:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


def signature_matches(secret_key: str, ext_fields: Mapping[str, str] | None, body: Buffer = b"") -> bool:
    """Whether the request's ``Signature`` is the one ``secret_key`` gives (constant-time compare)."""
    given = (ext_fields or {}).get(SIGNATURE)
    if not given:
        return False
    return hmac.compare_digest(given.encode(), calc_signature(secret_key, ext_fields, body).encode())


def sign_command(cmd: RemotingCommand, access_key: str, secret_key: str, security_token: str | None = None) -> None:
    """Add ``AccessKey`` (and ``SecurityToken``) to ``cmd`` and sign it, as RocketMQ's ACL hook does.

    Signing again (a retried request) replaces the old signature: it is never part of the content.
    """
    fields = cmd.ext_fields if cmd.ext_fields is not None else {}
    fields[ACCESS_KEY] = access_key
    if security_token:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = calc_signature(secret_key, fields, cmd.body)
    cmd.ext_fields = fields
