"""Controller mode: the brokers of one brokerName elect their master through etcd.

Each broker runs a `ReplicasManager` (no separate controller process). It holds a
lease, renewed every TTL/3, and a lease-bound ``live`` key with its addresses and
max offset; every TTL/4 (at most 1 s) it reads the group's keys (`EtcdGroup`) and acts:

- no state yet: the first broker to write it is master (epoch 1);
- a live master that is not this broker: follow it (cutting first the tail it
  never had: `epochs.truncation_point`);
- a master whose HA connection dropped and whose port refuses connections (its
  process is gone): revoke its lease rather than wait up to a TTL for it to expire;
- no live master: if this broker is in the SyncStateSet (or
  ``allowUncleanElection``) and no live candidate has more data, it tries the
  election transaction; one candidate wins;
- this broker is master: keep the SyncStateSet to the slaves that have caught
  up (a slave joins once its acknowledgement reaches the master's end, and
  leaves after ``haMaxTimeSlaveNotCatchup`` without; the local set grows before
  etcd's and shrinks after it, so etcd never names an electable slave that
  SYNC_MASTER sends did not wait for).

A master that cannot renew its lease stops taking sends when it could have
expired (`Role.lease_until`), before etcd can elect a successor. SYNC_MASTER
sends wait for every slave in the set, so whoever is elected has every
acknowledged message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from skiff.broker.config import BrokerConfig, BrokerRole
from skiff.broker.ha.controller import ControllerError, EtcdGroup, GroupState, Live, Snapshot
from skiff.broker.ha.epochs import EpochFile, truncation_point
from skiff.broker.ha.master import HAMaster
from skiff.broker.ha.role import Role
from skiff.broker.ha.slave import HASlave
from skiff.common.record import parse_host_port
from skiff.common.service import Service
from skiff.store import MessageStore
from skiff.store.timer.cut import after_cut as timer_after_cut

log = logging.getLogger(__name__)

RoleChange = Callable[[GroupState], Awaitable[None]]

POLL_MAX_S = 1.0
"""The group's keys are read every TTL/4, at least this often (one read and one write of the
broker's live key each time)."""


class ReplicasManager(Service):
    name = "replicas-manager"

    def __init__(self, config: BrokerConfig, role: Role, store: MessageStore, master: HAMaster, slave: HASlave,
                 addr: str, ha_addr: str, *, on_master: RoleChange, on_slave: RoleChange) -> None:
        super().__init__()
        self.config = config
        self.role = role
        self.store = store
        self.master = master
        self.slave = slave
        self.addr = addr
        self.ha_addr = ha_addr
        self.me = config.broker_id
        self.ttl_s = max(1, config.controller_lease_ttl_ms // 1000)
        self.poll_s = min(self.ttl_s / 4, POLL_MAX_S)
        self.etcd = EtcdGroup(config.etcd_endpoints, config.broker_cluster_name, config.broker_name, self.ttl_s)
        if config.broker_role is BrokerRole.SYNC_MASTER:
            # no reads until this broker knows what of its store the group keeps: all of it once
            # elected (`_promote`), what its master has once following (`_follow`, after the cut)
            store.set_visible_end(0)
        self.epochs = EpochFile(store.config.root)
        self.state: GroupState | None = None
        self.elections_won = 0
        self._on_master = on_master
        self._on_slave = on_slave
        self._following: tuple[int, int] | None = None
        self._keepalive: asyncio.Task[None] | None = None
        self._renewed_at = 0.0
        self._stale_term = False
        """Master under a lease of an earlier session: fenced until a new term starts."""

    # -- the loop ---------------------------------------------------------------

    async def run(self) -> None:
        while not self.stopping:
            try:
                await self._session()
            except ControllerError as exc:
                log.warning("controller: %s", exc)
            except Exception:  # noqa: BLE001 - a failed round (a full disk while following, say)
                # must not end controller mode for good: log it and start a new session
                log.exception("controller: the session failed; starting a new one")
            self._fence_now()
            if not await self.sleep(self.ttl_s / 4):
                return

    async def _session(self) -> None:
        await self.etcd.connect()
        # a master's term hangs on the lease of the session that elected it: the fresh lease of
        # a new session (after a partition, say) must not let it take sends again before its
        # first round finds a successor; only an election in this session (`_promote`) does
        self._stale_term = self._stale_term or not self.role.is_slave
        self._lease_renewed(time.monotonic())
        self._keepalive = asyncio.create_task(self._keep_lease())
        try:
            while not self.stopping and not self._keepalive.done():
                sent, client = time.monotonic(), self.etcd.client
                try:
                    await self._round()
                except ControllerError as exc:
                    log.warning("controller: %s; going on through another etcd member", exc)
                    if not await self.etcd.change_member(client):
                        raise ControllerError("the lease expired") from exc
                    self._lease_renewed(sent)
                if not await self.sleep(self.poll_s):
                    break
        finally:
            ended = self._keepalive.done()
            self._keepalive.cancel()
            await asyncio.gather(self._keepalive, return_exceptions=True)
        if ended and not self.stopping:
            failure = None if self._keepalive.cancelled() else self._keepalive.exception()
            raise ControllerError("the lease could not be renewed" + (f" ({failure!r})" if failure else ""))

    async def _keep_lease(self) -> None:
        while True:
            sent, client = time.monotonic(), self.etcd.client
            try:
                alive = await asyncio.wait_for(self.etcd.keepalive(), self.ttl_s / 3)
            except (ControllerError, asyncio.TimeoutError):
                try:  # the member may be gone while etcd keeps its majority
                    alive = await self.etcd.change_member(client)
                except ControllerError:
                    alive = None
            if alive is False:
                log.warning("controller: the lease expired")
                return
            if alive:
                self._lease_renewed(sent)
            elif time.monotonic() >= self.role.lease_until:
                return
            await asyncio.sleep(self.ttl_s / 3)

    def _lease_renewed(self, sent: float) -> None:
        """Renewed at ``sent`` (when the request left): etcd keeps the lease at least TTL from
        then, so a master that stops at sent + 0.9 TTL stops before anyone can succeed it."""
        self._renewed_at = sent
        if not self._stale_term:
            self.role.lease_until = sent + 0.9 * self.ttl_s

    def _fence_now(self) -> None:
        if not self.role.is_slave:
            self.role.lease_until = 0.0

    async def _round(self) -> None:
        seen = await self.etcd.read()
        await self.etcd.publish(self._live())
        self.state = seen.state
        if seen.state is None:
            await self._try_elect(seen, first=True)
        elif seen.master_lease and seen.state.master_id == self.me:
            await self._lead(seen)
        elif seen.master_lease and await self._master_process_gone(seen.state):
            log.warning("controller: the master at %s refuses connections (its process is gone): revoking its "
                        "lease instead of waiting for it to expire", seen.state.master_addr)
            await self.etcd.revoke(seen.master_lease)
            await self._try_elect(await self.etcd.read(), first=False)
        elif seen.master_lease:
            await self._follow(seen.state)
        else:
            await self._try_elect(seen, first=False)

    async def _master_process_gone(self, state: GroupState) -> bool:
        """A crashed master's lease outlives it by up to a TTL; a follower that lost its HA
        connection and finds the master's port refusing connections (nothing listens: the
        process is gone, which a partition never looks like) ends the lease at once."""
        if self.role.is_slave is False or self.slave.connected or self._following is None:
            return False
        return await _refuses_connections(state.master_addr)

    def _live(self) -> Live:
        return Live(self.me, self.addr, self.ha_addr, self.slave.local_addr, self.store.max_physical_offset,
                    self.role.epoch)

    # -- elections --------------------------------------------------------------

    async def _try_elect(self, seen: Snapshot, *, first: bool) -> None:
        state = seen.state
        if state is not None and not await self._electable(state, seen):
            return
        self.slave.pause()
        end = self.store.max_physical_offset
        epoch = 1 if state is None else state.epoch + 1
        new = GroupState(self.me, self.addr, self.ha_addr, epoch, (self.me,),
                         1 if state is None else state.sync_state_set_epoch + 1,
                         (*(state.epochs if state else ()), (epoch, end)))
        if not await self.etcd.elect(new, seen):
            self.slave.resume()
            return
        self.elections_won += 1
        log.warning("elected master of %s, epoch %d, at offset %d%s", self.config.broker_name, epoch, end,
                    " (first election)" if first else "")
        await self._promote(new)

    async def _electable(self, state: GroupState, seen: Snapshot) -> bool:
        """In the set, and no rival beats this broker on data (max offset, then lower id).

        A rival's ``live`` key outlives a crashed rival by up to a TTL, as the master's lease
        does: when the master and a slave die together, waiting for the slave's key to expire
        kept the survivor from taking over for 7.5 s with the default lease. A rival whose
        remoting port refuses connections (its process is gone) is no rival. Passing it over
        loses nothing acknowledged: every SEND_OK message is on every broker of the set,
        this one included; its extra data is what no client was told was stored."""
        if self.me not in state.sync_state_set and not self.config.allow_unclean_election:
            return False
        mine = (self.store.max_physical_offset, -self.me)
        ahead = [live for live in seen.lives.values() if live.broker_id != self.me
                 and (live.broker_id in state.sync_state_set or self.config.allow_unclean_election)
                 and (live.max_offset, -live.broker_id) > mine]
        for live in ahead:
            if not await _refuses_connections(live.addr):
                return False
            log.warning("controller: broker %d has more data or a lower id but its port %s refuses connections "
                        "(its process is gone): not waiting for its lease", live.broker_id, live.addr)
        return True

    async def _promote(self, state: GroupState) -> None:
        self._stale_term = False
        self.state = state
        self.role.epoch = state.epoch
        self.epochs.save(state.epochs)
        self._following = None
        self.master.set_sync_members(set())
        self._lease_renewed(self._renewed_at)
        await self._on_master(state)

    # -- following --------------------------------------------------------------

    async def _follow(self, state: GroupState) -> None:
        target = (state.master_id, state.epoch)
        if self._following == target:
            return
        was_master = not self.role.is_slave
        self.role.epoch = state.epoch
        if was_master:
            log.warning("controller: broker %d is master of epoch %d now: stepping down", state.master_id,
                        state.epoch)
        self.slave.pause()
        await self._on_slave(state)
        cut = truncation_point(self.epochs.load(), state.epochs, self.store.max_physical_offset)
        if cut < self.store.max_physical_offset:
            dropped = await asyncio.to_thread(self.store.truncate, cut)
            log.warning("controller: cut %d bytes the master of epoch %d never had", dropped, state.epoch)
            await asyncio.to_thread(timer_after_cut, self.store, cut, int(time.time() * 1000))
        self.epochs.save(state.epochs)
        self.store.set_visible_end(None)  # what is left is what the master has
        self._following = target
        self.slave.follow(state.master_ha_addr)

    # -- leading ----------------------------------------------------------------

    async def _lead(self, seen: Snapshot) -> None:
        state = seen.state
        assert state is not None
        if seen.master_lease != self.etcd.lease.id:
            # the master key hangs on a lease of an earlier session, which nobody renews: take no
            # sends until it expires and an election (perhaps this broker's) names the next term
            self._stale_term = True
            self._fence_now()
            return
        if self.role.is_slave or self.role.epoch != state.epoch:
            await self._promote(state)  # this broker's term, after a restart of its session
        self.master.slave_ids({live.ha_client_addr: live.broker_id for live in seen.lives.values()
                               if live.ha_client_addr})
        caught_up = self.master.caught_up(self.config.ha_max_time_slave_not_catchup_ms / 1000)
        current = set(state.sync_state_set) - {self.me}
        grow, shrink = caught_up - current, current - caught_up
        if not grow and not shrink:
            return
        wanted = tuple(sorted({self.me} | (current | grow) - shrink))
        new = replace(state, sync_state_set=wanted, sync_state_set_epoch=state.sync_state_set_epoch + 1)
        if grow:
            self.master.set_sync_members(current | grow)
        if await self.etcd.alter(new, seen):
            self.state = new
            self.master.set_sync_members(set(wanted) - {self.me})
            log.info("controller: SyncStateSet of epoch %d is %s", state.epoch, list(wanted))
        else:
            self.master.set_sync_members(current)

    def runtime_table(self) -> dict[str, str]:
        state = self.state
        return {
            "controllerEpoch": str(self.role.epoch),
            "controllerMasterId": "" if state is None else str(state.master_id),
            "controllerSyncStateSet": "" if state is None else ",".join(map(str, state.sync_state_set)),
            "controllerElectionsWon": str(self.elections_won),
        }

    async def stop(self, timeout_s: float = 5.0) -> None:
        await super().stop(timeout_s)
        if self.etcd.client is not None:
            try:
                await asyncio.wait_for(self.etcd.resign(), 2.0)
            except (ControllerError, asyncio.TimeoutError):
                pass
            await self.etcd.close()


async def _refuses_connections(addr: str) -> bool:
    """Nothing listens at ``addr``: the process is gone (a partition or a paused process
    times out instead, and counts as alive)."""
    host, port = parse_host_port(addr)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
    except ConnectionRefusedError:
        return True
    except (OSError, asyncio.TimeoutError):
        return False
    writer.transport.abort()
    return False
