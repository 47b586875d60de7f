"""Plain ACL compatible with RocketMQ 4.x (docs/acl.md): plain_acl.yml accounts, request
signatures checked with `skiff.protocol.acl_sign`, per-request resource permissions."""

from skiff.broker.acl.service import AclService

__all__ = ["AclService"]
