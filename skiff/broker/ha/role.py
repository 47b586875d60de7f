"""What a broker is right now: master or slave, the id it registers, its master term.

Classic HA fixes it from broker.conf; in controller mode the election changes it
at run time, so the send and pull paths and the registration read it here
rather than from the frozen config.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from skiff.broker.config import BrokerConfig, BrokerRole

MASTER_ID = 0


@dataclass(slots=True)
class Role:
    role: BrokerRole
    broker_id: int
    """The id registered with the NameServers: 0 while master."""
    epoch: int = 0
    """The master term this broker serves or follows (controller mode)."""
    lease_until: float = math.inf
    """time.monotonic() after which a controller-mode master may have lost its lease:
    it takes no more sends (it fences itself) until it renews it."""

    @classmethod
    def of(cls, config: BrokerConfig) -> Role:
        if config.enable_controller_mode:  # a follower until elected
            return cls(BrokerRole.SLAVE, config.broker_id)
        return cls(config.broker_role, config.broker_id)

    @property
    def is_slave(self) -> bool:
        return self.role is BrokerRole.SLAVE

    @property
    def is_sync_master(self) -> bool:
        return self.role is BrokerRole.SYNC_MASTER

    def refusal(self) -> str | None:
        """Why a send is refused now, or None."""
        if self.is_slave:
            return "is a slave: send to its master"
        if time.monotonic() >= self.lease_until:
            return "is a master that cannot renew its lease in etcd: it takes no sends until it does"
        return None
