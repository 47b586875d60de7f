"""ACL 2.0, as RocketMQ 5.3 (docs/acl.md): users, policies of resources, actions, source
addresses and decisions, checked on both doors — authentication by each door, authorization
by the operations' gate."""

from skiff.broker.auth.evaluate import Need
from skiff.broker.auth.service import AuthService, Caller

__all__ = ["AuthService", "Caller", "Need"]
