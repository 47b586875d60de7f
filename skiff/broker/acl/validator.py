"""PlainAccessValidator: may this request from this host go through? (RocketMQ's
PlainPermissionManager.validate, same order of checks.)

1. a host in ``globalWhiteRemoteAddresses`` passes;
2. no ``AccessKey``, or one no account has: refused;
3. a host in the account's ``whiteRemoteAddress`` passes (no signature, no perms);
4. the signature must be the one the account's secret key gives (`skiff.protocol.acl_sign`);
5. admin codes need ``admin: true``;
6. each resource the request touches (`needs_of`) needs its perm: the account's entry for
   it, else its default topic or group perm. An admin account with no entries passes.

A refusal is a reason string: it names the access key, the request code and the
resource, never a secret or a signature.
"""

from __future__ import annotations

from skiff.broker.acl.plain_config import ANY, DENY, PERM_NAMES, Account, PlainAclConfig
from skiff.broker.acl.resources import ADMIN_CODES, needs_of
from skiff.common.errors import DecodeError
from skiff.common.names import RETRY_PREFIX, is_retry_topic
from skiff.protocol.acl_sign import ACCESS_KEY, signature_matches
from skiff.protocol.command import RemotingCommand


def perm_allows(needed: int, owned: int) -> bool:
    """RocketMQ's Permission.checkPermission."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & ~ANY & ~DENY)
    return bool(needed & owned)


def refusal(config: PlainAclConfig, host: str, cmd: RemotingCommand) -> str | None:
    """None when ``cmd`` from ``host`` may pass, else why not."""
    if any(white(host) for white in config.global_white):
        return None
    access_key = (cmd.ext_fields or {}).get(ACCESS_KEY)
    if not access_key:
        return "no AccessKey: this broker has ACL enabled and needs signed requests"
    account = config.accounts.get(access_key)
    if account is None:
        return f"no ACL account for accessKey {access_key!r}"
    if account.white(host):
        return None
    if not signature_matches(account.secret_key, cmd.ext_fields, cmd.body):
        return f"signature check failed for accessKey {access_key!r}"
    if cmd.code in ADMIN_CODES and not account.admin:
        return f"request code {cmd.code} needs an admin account and accessKey {access_key!r} is not one"
    return _resource_refusal(account, cmd)


def _resource_refusal(account: Account, cmd: RemotingCommand) -> str | None:
    if account.admin and not account.resource_perms:
        return None
    try:
        needs = needs_of(cmd)
    except (DecodeError, ValueError) as exc:
        return f"request code {cmd.code}: cannot tell what it touches: {exc}"
    for resource, needed in needs:
        is_group = is_retry_topic(resource)
        owned = account.resource_perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group else account.default_topic_perm
        if not perm_allows(needed, owned):
            what = f"group {resource[len(RETRY_PREFIX):]}" if is_group else f"topic {resource}"
            return (f"accessKey {account.access_key!r} has no {PERM_NAMES.get(needed, needed)} permission "
                    f"on {what} (request code {cmd.code})")
    return None
