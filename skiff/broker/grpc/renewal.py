"""Renewing the invisible time of push consumers' messages (``auto_renew`` receives), as
RocketMQ's proxy does (``DefaultReceiptHandleManager``).

A push consumer's receive sends no invisible duration: its messages are hidden for
``defaultInvisibleTimeMills`` and, while the client holds them, renewed: every
``renewSchedulePeriodMillis`` the messages due within ``renewAheadTimeMillis`` get
another ``defaultInvisibleTimeMills``, for at most ``renewMaxTimeMillis`` in all (then
they are left to come back), and not once the client is gone (terminated or
expired): its messages then come back after their current invisible time. A renewal gives the message a new handle, but the client
acks with the one it received: the table maps that one to the current handle until
the client acks, nacks (changes the invisible time itself) or dead-letters it.
"""

from __future__ import annotations

from typing import NamedTuple

from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.clients import GrpcClientConn
from skiff.broker.pop.service import PopService
from skiff.common.clock import Clock
from skiff.protocol.headers.pop import ExtraInfo


class Held(NamedTuple):
    conn: GrpcClientConn
    """The client holding it: once it is gone (terminated, expired), renewals stop."""
    group: str
    topic: str
    current: ExtraInfo
    until_ms: int
    """Renewed no further than this."""


class Renewals:
    def __init__(self, config: BrokerConfig, pop: PopService, clock: Clock) -> None:
        self.config = config
        self.pop = pop
        self.clock = clock
        self._held: dict[str, Held] = {}

    def hold(self, conn: GrpcClientConn, receipt: str, group: str, topic: str, handle: ExtraInfo) -> None:
        self._held[receipt] = Held(conn, group, topic, handle, self.clock.now_ms() + self.config.renew_max_time_ms)

    def release(self, receipt: str) -> ExtraInfo | None:
        """The client is done with the message (acked, nacked, dead-lettered): stop renewing
        it; the handle the received one stands for now, or None when it was not renewed."""
        held = self._held.pop(receipt, None)
        return None if held is None else held.current

    def renew(self) -> int:
        """Renew the held messages that are due soon; how many were renewed."""
        now, renewed = self.clock.now_ms(), 0
        for receipt, held in list(self._held.items()):
            if held.current.visible_at - now > self.config.renew_ahead_time_ms:
                continue
            new = None
            if now < held.until_ms and not held.conn.is_closed:
                new = self.pop.change_invisible(held.group, held.topic, held.current,
                                                self.config.default_invisible_time_ms)
            if new is None:
                del self._held[receipt]
            else:
                self._held[receipt] = held._replace(current=new)
                renewed += 1
        return renewed

    def renew_tick(self) -> None:
        """`renew` for `Periodic`, which awaits whatever its function returns."""
        self.renew()
