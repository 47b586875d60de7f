"""The 5.x clients' gRPC signature, checked with a clock-skew window.

The Python, Java and Node.js clients send, on every call:

    x-mq-date-time: 20261127T051500Z
    authorization:  MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>

where ``<hex>`` is hex(HmacSHA1(key = the secret, UTF-8; message = the date-time value, UTF-8));
Python writes lowercase hex, Java and Node uppercase. As RocketMQ's proxy: the scheme word is not
checked, the pairs are split on ``,`` and trimmed, the user is the ``Credential`` value up to a
``/``, ``SignedHeaders`` is not read.

Unlike RocketMQ, which never looks at the date, a date-time further than `AUTH_CLOCK_SKEW_MS`
from the broker's clock is refused, so a captured call cannot be replayed later. The Python
client 5.1.2 writes its *local* time with a ``Z``: run it with TZ=UTC (or on a host whose zone
is UTC), or its calls are refused with a reason that says so.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import time
from dataclasses import dataclass

from skiff.common.limits import AUTH_CLOCK_SKEW_MS

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
DATE_FORMAT = "%Y%m%dT%H%M%SZ"


class SignatureError(ValueError):
    """The call's credentials cannot be checked or do not hold; the message is the client's reason."""


@dataclass(frozen=True, slots=True)
class GrpcCredential:
    access_key: str
    signature: bytes
    date_time: str


def parse_authorization(authorization: str | None, date_time: str | None) -> GrpcCredential:
    if not authorization:
        raise SignatureError("username cannot be null: the call has no authorization header")
    if not date_time:
        raise SignatureError("datetime is null: the call has no x-mq-date-time header")
    _, _, pairs = authorization.strip().partition(" ")
    fields: dict[str, str] = {}
    for pair in pairs.split(","):
        key, sep, value = pair.strip().partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    access_key = fields.get("Credential", "").split("/", 1)[0]
    if not access_key:
        raise SignatureError("username cannot be null: the authorization header has no Credential")
    try:
        signature = bytes.fromhex(fields.get("Signature", ""))
    except ValueError:
        raise SignatureError(f"the signature of {access_key!r} is not hexadecimal") from None
    if not signature:
        raise SignatureError(f"the authorization header of {access_key!r} has no Signature")
    return GrpcCredential(access_key, signature, date_time)


def sign_grpc(secret: str, date_time: str) -> str:
    """What a client sends as ``Signature`` (lowercase hex)."""
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def authorization_header(access_key: str, secret: str, date_time: str) -> str:
    return (f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders={DATE_TIME}, "
            f"Signature={sign_grpc(secret, date_time)}")


def date_time_now(now_s: float | None = None) -> str:
    return time.strftime(DATE_FORMAT, time.gmtime(time.time() if now_s is None else now_s))


def check_grpc(credential: GrpcCredential, secret: str, now_ms: int, skew_ms: int = AUTH_CLOCK_SKEW_MS) -> None:
    """`SignatureError` unless the signature is ``secret``'s over a date-time within ``skew_ms``."""
    expected = hmac.new(secret.encode(), credential.date_time.encode(), hashlib.sha1).digest()
    if not hmac.compare_digest(expected, credential.signature):
        raise SignatureError(f"check signature failed for User:{credential.access_key}")
    try:
        signed_ms = calendar.timegm(time.strptime(credential.date_time, DATE_FORMAT)) * 1000
    except ValueError:
        raise SignatureError(f"x-mq-date-time {credential.date_time!r} is not {DATE_FORMAT}") from None
    if abs(now_ms - signed_ms) > skew_ms:
        raise SignatureError(
            f"x-mq-date-time {credential.date_time} is {abs(now_ms - signed_ms) // 1000} s from the broker's clock "
            f"(at most {skew_ms // 1000} s): a replayed call, or a client clock or time zone off UTC")
