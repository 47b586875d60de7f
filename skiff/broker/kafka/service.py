"""The Kafka door: each Kafka request decoded, served through the broker's operations
(`skiff.broker.operations`), and answered in Kafka's terms.

| Kafka | Skiff |
|---|---|
| topic, partition, offset | topic, queue id, ConsumeQueue offset |
| brokers | every broker group of the cluster whose master serves Kafka, one node id per group across failovers — `cluster.py` |
| partition | a queue of one broker group: the topic's queues numbered across the groups in name order — `cluster.py` |
| leader of a partition | its broker group's master (a slave names its master; Produce, Fetch and ListOffsets of a partition this broker does not lead answer NOT_LEADER_OR_FOLLOWER) |
| Produce | `SendOperation` (gate, writer, store) — `produce.py` |
| Fetch | `PullOperation.read`, long-polled — `fetch.py` |
| ListOffsets | `OffsetsOperation` |
| OffsetCommit, OffsetFetch | the consumer offset table of the group holding the partition — `offsets.py` |
| consumer groups | `groups.py`, on the master a group's id hashes to (FindCoordinator) |
| CreateTopics, DeleteTopics, CreatePartitions, Describe/AlterConfigs | `TopicsOperation` — `admin.py` |
| SaslHandshake, SaslAuthenticate | ACL 2.0's users (plain ACL's accounts) — `sasl.py`, per connection |
| ACLs | every request screened through `Gate.access` before it is served — `access.py` |

Requests and versions Skiff does not serve are answered with UNSUPPORTED_VERSION
(`skiff.protocol.kafka.frames.unsupported_response`); a body that does not decode is
answered with INVALID_REQUEST; neither closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from skiff.broker.config import BrokerConfig
from skiff.broker.ha.role import Role
from skiff.broker.kafka.access import PUB, Allowed, screens, topic_need
from skiff.broker.kafka.admin import TopicAdmin
from skiff.broker.kafka.cluster import ClusterView, Layout, Node, coordinator, node_id
from skiff.broker.kafka.fetch import Fetch
from skiff.broker.kafka.groups import GroupCoordinator
from skiff.broker.kafka.idempotence import ProducerIds, ProducerStates
from skiff.broker.kafka.offsets import PartitionOffsets
from skiff.broker.kafka.producer_snapshot import ProducerSnapshots
from skiff.broker.kafka.produce import Outcome, Produce, Stored, answer_frame, partition_body
from skiff.broker.kafka.sasl import MECHANISMS, SaslFailure, SaslState, Session, exchange as sasl_exchange
from skiff.broker.operations.send import DEFAULT_TEMPLATE
from skiff.broker.operations import Operations, QueueEdge, Refusal, born_host
from skiff.broker.queue_waiters import QueueWaiters
from skiff.broker.topics import TopicConfigManager
from skiff.common.errors import DecodeError
from skiff.common.service import Periodic
from skiff.common.names import DLQ_PREFIX, RETRY_PREFIX, SYSTEM_TOPICS
from skiff.protocol.kafka.apis import ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.produce_wire import ProduceOne
from skiff.protocol.kafka.wire import Buffer
from skiff.protocol.kafka.frames import (
    RequestHeader,
    api_versions_body,
    decode_request,
    encode_response,
    encode_response_parts,
    error_response,
    read_header,
    unsupported_response,
)
from skiff.broker.kafka.errors import refusal_error
from skiff.transport import RemotingClient
from skiff.transport.late import LateAnswer

log = logging.getLogger(__name__)

Body = dict[str, Any]
Answer = bytes | LateAnswer[bytes] | None
"""A request's answer frame (size prefix included), one given later, or none (acks=0)."""
Handler = Callable[[Body, RequestHeader, tuple[str, int]], Awaitable[Body | None]]
_SASL = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
_BEFORE_SASL = (ApiKey.API_VERSIONS, *_SASL)
"""What a connection may send before it has authenticated (the SASL requests check their order)."""


class KafkaService:
    def __init__(self, config: BrokerConfig, role: Role, ops: Operations, topics: TopicConfigManager,
                 waiters: QueueWaiters, advertised_port: Callable[[], int], retention_ms: int,
                 master_host: Callable[[], str | None] = lambda: None, client: RemotingClient | None = None,
                 broker_addr: Callable[[], str] = lambda: "") -> None:
        """``master_host``: on a slave, its master's host as the registration last said (None
        while unknown); Kafka clients are sent there, at this broker's Kafka port when the
        NameServers do not say where its master's listener is. ``client``: reaches the
        NameServers (the other broker groups' Kafka listeners, `cluster.py`) and other
        groups' masters (their partitions' offsets); ``broker_addr``: this broker's remoting
        address, the key of its listener in the NameServers."""
        self.config = config
        self.master_host = master_host
        self.role = role
        self.ops = ops
        self.topics = topics
        self.advertised_port = advertised_port
        self.producers = ProducerStates()
        self.snapshots = ProducerSnapshots(self.producers, ops.send.store, ops.send.store.root)
        self._snapshot_periodic = Periodic("kafka-producer-snapshot", config.flush_consumer_offset_interval_ms / 1000.0,
                                           self._snapshot)
        self._state_lock = asyncio.Lock()
        """One walk or snapshot of the producer state at a time."""
        self.producer_ids = ProducerIds()
        self.produce_ = Produce(ops.send, self.producers, config.default_topic_queue_nums)
        self.fetch_ = Fetch(ops.gate, role, ops.pull, waiters)
        self.client = client or RemotingClient(tls=config.client_tls())
        self.view = ClusterView(self.client, config.namesrv_addrs, config.broker_cluster_name, config.broker_name,
                                broker_addr, lambda: self.node, self._queues, lambda: not role.is_slave)
        self.groups = GroupCoordinator(ops.offsets, register=ops.groups.ensure,
                                       partitions=PartitionOffsets(ops.offsets, self.view.place, self._partition_of,
                                                                   self.client))
        admin = TopicAdmin(ops.topics, config.default_topic_queue_nums, retention_ms)
        self._handlers: dict[int, Handler] = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.CREATE_TOPICS: admin.create_topics,
            ApiKey.DELETE_TOPICS: admin.delete_topics,
            ApiKey.CREATE_PARTITIONS: admin.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: admin.describe_configs,
            ApiKey.ALTER_CONFIGS: admin.alter_configs,
            **self.groups.handlers(),
        }
        self._screens = screens(config.broker_cluster_name)

    async def recover(self) -> None:
        """Before serving: read the idempotent producers' state back (`producer_snapshot`): a
        master's, and a controller-mode slave's, which it serves once elected."""
        if self._follows:
            await asyncio.to_thread(self.snapshots.recover)
        if not self.role.is_slave:
            self.snapshots.lead()

    @property
    def _follows(self) -> bool:
        """Keeps the producer state: a master, or a slave that an election may promote."""
        return not self.role.is_slave or self.config.enable_controller_mode

    async def _producer_state(self) -> None:
        """Bring the producer state to the broker's role: elected, walk the rest of what was
        replicated before leading (Produce waits for it); a slave (or demoted), read what was
        replicated since the last round."""
        async with self._state_lock:
            if not self.role.is_slave:
                if not self.snapshots.leading:
                    found = await asyncio.to_thread(self.snapshots.follow)
                    self.snapshots.lead()
                    log.info("master now: %d more idempotent Kafka batches read from the replicated CommitLog "
                             "(to offset %d) before serving Produce", found, self.snapshots.covered)
                return
            if self.snapshots.leading:
                self.snapshots.step_down()
            if self._follows:
                await asyncio.to_thread(self.snapshots.follow)

    def start(self) -> None:
        """Advertise this listener in the NameServers (now and every registration period) and
        snapshot the producer state every flushConsumerOffsetInterval."""
        self.view.start(lambda: f"{self.config.advertised_ip}:{self.advertised_port()}",
                        self.config.register_name_server_period_ms / 1000.0)
        self._snapshot_periodic.start()

    async def stop(self) -> None:
        await self._snapshot_periodic.stop()
        await self._snapshot()
        await self.view.stop()
        await self.client.close()

    async def _snapshot(self) -> None:
        """Taken on the loop (consistent with the appends), written on a thread (fsync); a
        slave reads what it replicated first."""
        if not self._follows:
            return
        await self._producer_state()
        async with self._state_lock:
            self.snapshots.due()
            data = self.snapshots.snapshot()
        if data is not None:
            await asyncio.to_thread(self.snapshots.write, data)

    def _queues(self, topic: str) -> int | None:
        tc = self.topics.get(topic)
        return None if tc is None else tc.read_queue_nums

    async def _partition_of(self, topic: str, queue_id: int) -> int | None:
        return (await self.view.layout(topic)).partition(self.config.broker_name, queue_id)

    async def _queue(self, topic: str, partition: int) -> int | ErrorCode:
        """The queue here of a partition this broker serves, or why it does not serve it."""
        if self.role.is_slave:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return _queue_in(await self.view.layout(topic), self.config.broker_name, partition)

    def _known_queue(self, topic: str, partition: int) -> int | ErrorCode | None:
        """`_queue` without waiting: None while the NameServers were not asked about ``topic``."""
        if self.role.is_slave:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        layout = self.view.known_layout(topic)
        return None if layout is None else _queue_in(layout, self.config.broker_name, partition)

    @property
    def node(self) -> Node | None:
        """The broker group's node: its master (this broker, or on a slave the master it
        replicates, at the same Kafka port), one id across failovers; None while a slave
        does not know its master."""
        host = self.master_host() if self.role.is_slave else self.config.advertised_ip
        return None if host is None else Node(node_id(self.config.broker_name), host, self.advertised_port())

    async def handle(self, frame: bytes, session: Session) -> bytes | list[Buffer] | None:
        """The answer frame to one request frame of ``session``'s connection (None: the
        request takes no answer; ``session.close``: close the connection after it); a Fetch's
        as parts, its record batches not copied into the frame (`encode_response_parts`)."""
        if session.state is SaslState.RAW:
            return await self._raw_token(frame, session)
        peer = session.peer
        header, body = read_header(frame)
        sasl = header.api_key in _SASL
        handler = self._handlers.get(header.api_key)
        if (handler is None and not sasl) or not header.supported:
            log.info("Kafka client %s (%s) asked for %s v%d, which Skiff does not serve", peer, header.client_id,
                     _api_name(header.api_key), header.api_version)
            return unsupported_response(header)
        if self.ops.gate.auth is not None and session.caller is None and header.api_key not in _BEFORE_SASL:
            # Kafka's broker closes without an answer (IllegalSaslStateException)
            log.warning("Kafka client %s sent %s before authenticating with SASL, which access control requires: "
                        "closing", peer, _api_name(header.api_key))
            session.close = True
            return None
        try:
            req = decode_request(header, body)
        except DecodeError as exc:
            log.warning("Kafka client %s sent a %s v%d that does not decode: %s", peer, _api_name(header.api_key),
                        header.api_version, exc)
            return error_response(header, ErrorCode.INVALID_REQUEST)
        if sasl:
            return encode_response(header, await self._sasl(req, header, session))
        assert handler is not None
        complete = None
        if session.caller is not None and header.api_key in self._screens:
            screened = self._screens[header.api_key](req, self._allowed(session, header.api_key))
            if screened.answer is not None:
                return encode_response(header, screened.answer)
            complete = screened.complete
        try:
            answer = await handler(req, header, peer)
        except Exception:
            log.exception("Kafka %s v%d from %s failed", _api_name(header.api_key), header.api_version, peer)
            return error_response(header, ErrorCode.UNKNOWN_SERVER_ERROR)
        if answer is None:
            return None
        if complete is not None:
            complete(answer)
        return encode_response_parts(header, answer) if header.api_key == ApiKey.FETCH else \
            encode_response(header, answer)

    def _allowed(self, session: Session, key: int) -> Allowed:
        """The gate's question for one need of ``session``'s caller (its host: the connection's
        peer). Metadata's refusals are logged at debug level: it hides the topics a caller may
        not see (and clients ask every few seconds), which is its answer, not an incident."""
        gate, caller, name = self.ops.gate, session.caller, f"Kafka {_api_name(key)}"
        assert caller is not None
        quiet = key == ApiKey.METADATA
        return lambda need: gate.access(caller, [need], name, quiet=quiet) is None

    # -- SASL (sasl.py) ------------------------------------------------------------

    async def _sasl(self, req: Body, header: RequestHeader, session: Session) -> Body:
        auth = self.ops.gate.auth
        handshake = header.api_key == ApiKey.SASL_HANDSHAKE
        if auth is None or session.state is SaslState.DONE:
            # what Kafka's broker answers on a listener without SASL, or once authenticated (no re-authentication)
            why = "SASL is not enabled on this listener (access control is off)" if auth is None \
                else "the connection is already authenticated"
            return _sasl_error(handshake, ErrorCode.ILLEGAL_SASL_STATE, why)
        expected = SaslState.HANDSHAKE if handshake else SaslState.AUTHENTICATE
        if session.state is not expected:
            session.close = True
            return _sasl_error(handshake, ErrorCode.ILLEGAL_SASL_STATE,
                               f"{_api_name(header.api_key)} is not expected while the connection is at "
                               f"{session.state.value}")
        if handshake:
            session.exchange = sasl_exchange(auth, req["mechanism"], session.host)
            if session.exchange is None:
                session.close = True
                log.warning("Kafka client %s asked for SASL mechanism %r; Skiff offers %s", session.peer, req["mechanism"],
                            ", ".join(MECHANISMS))
                return {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": list(MECHANISMS)}
            session.state = SaslState.AUTHENTICATE if header.api_version >= 1 else SaslState.RAW
            return {"error_code": 0, "mechanisms": list(MECHANISMS)}
        token = await self._step(session, req["auth_bytes"])
        if isinstance(token, SaslFailure):
            return {"error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED), "error_message": str(token),
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        return {"error_code": 0, "error_message": None, "auth_bytes": token, "session_lifetime_ms": 0}

    async def _raw_token(self, frame: bytes, session: Session) -> bytes | None:
        """After a v0 handshake: a bare token in, a size-prefixed bare token out; a failure
        closes the connection without an answer, as Kafka does."""
        token = await self._step(session, frame)
        return None if isinstance(token, SaslFailure) else struct.pack(">i", len(token)) + token

    @staticmethod
    async def _step(session: Session, token: bytes) -> bytes | SaslFailure:
        """One token of the mechanism, on a thread (SCRAM's PBKDF2 takes 2 ms with SHA-256, 6 ms
        with SHA-512); the connection is authenticated once the mechanism is done, and marked
        to be closed when it fails."""
        exchange = session.exchange
        assert exchange is not None
        try:
            answer = await asyncio.to_thread(exchange.step, token)
        except SaslFailure as exc:
            session.close = True
            return exc
        except Exception:
            log.exception("Kafka SASL step of %s failed", session.peer)
            session.close = True
            return SaslFailure("Authentication failed: an error in the broker (its log says which)")
        if exchange.caller is not None:
            session.caller, session.state, session.exchange = exchange.caller, SaslState.DONE, None
            log.info("Kafka client %s authenticated as User:%s", session.peer, exchange.caller.name)
        return answer

    # -- ApiVersions, Metadata -----------------------------------------------------

    async def api_versions(self, req: Body, header: RequestHeader, peer: tuple[str, int]) -> Body:
        return api_versions_body()

    async def metadata(self, req: Body, header: RequestHeader, peer: tuple[str, int]) -> Body:
        nodes = (await self.view.members()).nodes
        wanted = req["topics"]
        if wanted is None:
            names = [t for t in self.topics.topics() if not _internal(t)]
        else:
            names = [t["name"] for t in wanted]
        auto = req.get("allow_auto_topic_creation", True) and self.config.auto_create_topic_enable
        topics = list(await asyncio.gather(*(self._topic_metadata(name, nodes, auto and wanted is not None)
                                             for name in names)))
        brokers = [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": None}
                   for _, n in sorted(nodes.items())]
        own = nodes.get(self.config.broker_name)
        return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": self.config.broker_cluster_name,
                "controller_id": -1 if own is None else own.node_id, "topics": topics}

    async def _topic_metadata(self, name: str, nodes: dict[str, Node], create: bool) -> Body:
        layout = await self.view.layout(name)
        if not layout.groups and create and not self.role.is_slave:
            self.topics.create_from_template(name, DEFAULT_TEMPLATE, self.config.default_topic_queue_nums, 0)
            layout = await self.view.layout(name)
        if not layout.groups:
            return {"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "name": name, "partitions": []}
        return {"error_code": 0, "name": name, "is_internal": False, "partitions": _partitions(layout, nodes)}

    # -- Produce, Fetch, ListOffsets, InitProducerId ------------------------------------

    async def produce(self, req: Body, header: RequestHeader, peer: tuple[str, int]) -> Body | None:
        """A Produce the connection could not take as one partition's (`produce_now`): every
        partition appended together (`produce.Appends`), the answer once all are settled."""
        acks = req["acks"]
        if not self.snapshots.leading and not self.role.is_slave:
            await self._producer_state()  # elected: the producers' state first
        appends = self.produce_.appends(born_host(peer))
        for t in req["topic_data"]:
            for p in t["partition_data"]:
                appends.add(t["name"], p["index"], await self._queue(t["name"], p["index"]), p["records"], acks)
        outcomes = iter(appends.flush())
        responses = [{"name": t["name"], "partition_responses": [
            partition_body(p["index"], o if isinstance(o, Stored) else await o)
            for p, o in zip(t["partition_data"], outcomes)]} for t in req["topic_data"]]
        if acks == 0:
            return None  # Kafka's rule: no answer at all, or the client reads it as the next request's
        return {"responses": responses, "throttle_time_ms": 0}

    def serves(self, session: Session) -> bool:
        """Whether `produce_now` may serve ``session``'s Produce requests: with access control
        on, once the connection has authenticated (`produce_now` then asks the gate about each
        topic, as `handle`'s screen does; a refused one and the rest go through `handle`)."""
        return self.ops.gate.auth is None or session.caller is not None

    def produce_now(self, reqs: list[ProduceOne], session: Session) -> tuple[list[Answer], int]:
        """The one-partition Produce requests of one read (`produce_wire.parse_produce`), served
        without a task or an await: their batches appended together per queue, each answered
        with its frame, None (acks=0) or a late answer the flush or slave wait gives. Stops at
        the first request that needs a wait before it can be appended (a topic the NameServers
        were not asked about yet), or at once when the connection must authenticate: the
        second value says how many were served; the rest go through `handle`."""
        if not self.serves(session) or not self.snapshots.leading:  # not master, or elected and reading the state
            return [], 0
        allowed = self._allowed(session, ApiKey.PRODUCE) if session.caller is not None else None
        permitted: dict[str, bool] = {}
        appends = self.produce_.appends(born_host(session.peer))
        known: dict[tuple[str, int], int | ErrorCode | None] = {}
        for req in reqs:
            where = (req.topic, req.partition)
            queue = known[where] if where in known else known.setdefault(where, self._known_queue(*where))
            if queue is None:
                break
            if allowed is not None:
                ok = permitted.get(req.topic)
                if ok is None:
                    ok = permitted[req.topic] = allowed(topic_need(req.topic, PUB))
                if not ok:  # `handle` answers it (TOPIC_AUTHORIZATION_FAILED) and logs the refusal
                    break
            appends.add(req.topic, req.partition, queue, req.records, req.acks)
        outcomes = appends.flush()
        return [_answer(req, o) for req, o in zip(reqs, outcomes)], len(outcomes)

    async def fetch(self, req: Body, header: RequestHeader, peer: tuple[str, int]) -> Body:
        queues = {(t["topic"], p["partition"]): await self._queue(t["topic"], p["partition"])
                  for t in req["topics"] for p in t["partitions"]}
        return await self.fetch_.fetch(req, queues)

    async def list_offsets(self, req: Body, header: RequestHeader, peer: tuple[str, int]) -> Body:
        offsets = self.ops.offsets
        topics = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                ts = p["timestamp"]
                answer: Body = {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                                "offset": -1, "leader_epoch": -1}
                q = await self._queue(t["name"], p["partition_index"])
                tc = self.ops.gate.readable_queue(t["name"], q) if isinstance(q, int) else None
                if isinstance(q, ErrorCode):
                    answer["error_code"] = int(q)
                elif isinstance(tc, Refusal):
                    answer["error_code"] = int(refusal_error(tc))
                elif ts == -1:
                    answer["offset"] = offsets.queue_offset(t["name"], q, QueueEdge.END)
                elif ts == -2:
                    answer["offset"] = offsets.queue_offset(t["name"], q, QueueEdge.FIRST)
                elif ts >= 0:  # may look in the tier (docs/tiered-storage.md)
                    at, stored = await offsets.offset_at_time(t["name"], q, ts)
                    if at < offsets.queue_offset(t["name"], q, QueueEdge.END):
                        answer.update(offset=at, timestamp=-1 if stored is None else stored)
                else:
                    answer["error_code"] = int(ErrorCode.UNSUPPORTED_VERSION)
                parts.append(answer)
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    async def init_producer_id(self, req: Body, header: RequestHeader, peer: tuple[str, int]) -> Body:
        if req["transactional_id"] is not None:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                    "producer_id": -1, "producer_epoch": -1}
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": self.producer_ids.next(), "producer_epoch": 0}

    async def find_coordinator(self, req: Body, header: RequestHeader, peer: tuple[str, int]) -> Body:
        node = coordinator(req["key"], (await self.view.members()).nodes)
        if node is None:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    "error_message": "this slave does not know its master yet", "node_id": -1, "host": "",
                    "port": -1}
        if req.get("key_type", 0) != 0:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    "error_message": "Skiff coordinates consumer groups only, not transactions",
                    "node_id": -1, "host": "", "port": -1}
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": node.node_id,
                "host": node.host, "port": node.port}


def _queue_in(layout: Layout, broker_name: str, partition: int) -> int | ErrorCode:
    """The queue of ``partition`` on broker group ``broker_name``, or why that group does not
    serve it. A topic no group has yet is taken as this group's (its queue of the same number,
    which a Produce may auto-create)."""
    if not layout.groups:
        return partition
    where = layout.locate(partition)
    if where is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    name, queue_id = where
    return queue_id if name == broker_name else ErrorCode.NOT_LEADER_OR_FOLLOWER


def _answer(req: ProduceOne, outcome: Outcome) -> Answer:
    """A one-partition Produce's answer frame, now or late; None for acks=0 (no answer at all)."""
    if req.acks == 0:
        return None
    if isinstance(outcome, Stored):
        return answer_frame(req, outcome)
    late: LateAnswer[bytes] = LateAnswer()
    outcome.then(lambda _, stored: late.give(answer_frame(req, stored)))
    return late


def _sasl_error(handshake: bool, code: ErrorCode, why: str) -> Body:
    if handshake:
        return {"error_code": int(code), "mechanisms": list(MECHANISMS)}
    return {"error_code": int(code), "error_message": why, "auth_bytes": b"", "session_lifetime_ms": 0}


def _partitions(layout: Layout, nodes: dict[str, Node]) -> list[Body]:
    """Metadata's partitions of a topic: each led by its broker group's node (LEADER_NOT_AVAILABLE
    while the group's master serves no Kafka listener the NameServers know of)."""
    out: list[Body] = []
    for name, count in layout.groups:
        node = nodes.get(name)
        leader = -1 if node is None else node.node_id
        error = 0 if node is not None else int(ErrorCode.LEADER_NOT_AVAILABLE)
        replicas = [] if node is None else [leader]
        out += [{"error_code": error, "partition_index": len(out) + q, "leader_id": leader, "leader_epoch": -1,
                 "replica_nodes": replicas, "isr_nodes": replicas, "offline_replicas": []} for q in range(count)]
    return out


def _internal(topic: str) -> bool:
    """RocketMQ's own topics (retry, DLQ, system, the template) are not listed to Kafka clients."""
    return topic in SYSTEM_TOPICS or topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or topic == DEFAULT_TEMPLATE


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"API key {key}"


