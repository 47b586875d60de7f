"""GrpcServer: ``apache.rocketmq.v2.MessagingService`` inside the broker (RocketMQ 5's "local"
proxy mode) on ``grpcServerPort``, with grpcio's asyncio server.

The service is registered with grpcio's generic handlers over the generated message
classes (`skiff.protocol.v5`), method by method; RPCs the official clients do not
need are served where cheap (QueryOffset, GetOffset, UpdateOffset, PullMessage:
`skiff.broker.grpc.offsets`); lite topics (SyncLiteSubscription, LITE sends, lite consumers'
receives) are `skiff.broker.grpc.lite`'s. Every other error travels inside the
response's ``Status`` with the gRPC status OK, as the proxy does. The receive limit
is raised from grpcio's 4 MiB (a 4 MiB body plus its envelope would not fit).

Routes and assignments list every broker group holding the topic, each with its own
gRPC endpoint (`skiff.broker.grpc.routes`): each broker serves its own queues, and a
client talks to the broker that holds the queues it was routed to. The server puts its
endpoint in the NameServers' KV config when it starts and every ``registerNameServerPeriod``
(brokers of one host serve gRPC on different ports), and takes it out when it stops.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import grpc

from skiff.broker.config import BrokerConfig, GrpcServerEngine
from skiff.broker.grpc.clients import GrpcClientConn, GrpcClients, end_stream
from skiff.broker.auth import Caller
from skiff.broker.grpc.auth import TELEMETRY, GrpcAuth, settings_needs
from skiff.broker.grpc.consuming import Consuming
from skiff.broker.grpc.lite import LiteTopics
from skiff.broker.grpc.lite_expiry import LiteExpiry
from skiff.broker.grpc.lite_peers import CALL_METADATA, LitePeers
from skiff.broker.grpc.offsets import Offsets
from skiff.broker.grpc.producing import Producing
from skiff.broker.grpc.status import status
from skiff.broker.grpc.routes import NamesrvRoutes, Routes
from skiff.broker.grpc.tls import door_tls, grpc_credentials, peer_credentials
from skiff.broker.operations import Operations
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock
from skiff.common.limits import GRPC_PEERS_PARSED, TELEMETRY_QUEUED_MAX
from skiff.common.service import Periodic
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.transport.errors import ListenError
from skiff.transport.grpc_server import GrpcServer as GrpcDoor
from skiff.transport.grpc_server import Kind, Method
from skiff.transport.tls import ServerTls

log = logging.getLogger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
MAX_INBOUND_BYTES = 130 * 1024 * 1024
"""The proxy's grpcMaxInboundMessageSize."""
TERMINATED = "NotifyClientTermination"
"""Why a terminated 5.x client's registrations were dropped (the consumer table's log says it)."""


_KINDS = {"unary": Kind.UNARY, "stream": Kind.SERVER_STREAM, "bidi": Kind.BIDI}
_GRPCIO_KINDS = {"unary": grpc.unary_unary_rpc_method_handler, "stream": grpc.unary_stream_rpc_method_handler,
                 "bidi": grpc.stream_stream_rpc_method_handler}


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()


class ServicerContext(Protocol):
    """What the handlers ask of a call: grpcio's ServicerContext and our door's CallContext both give it."""

    def invocation_metadata(self) -> Any: ...

    def peer(self) -> str: ...

    def time_remaining(self) -> float | None: ...


class GrpcServer:
    def __init__(self, config: BrokerConfig, topics: TopicConfigManager,
                 clients: GrpcClients, ops: Operations, clock: Clock, namesrv: NamesrvRoutes,
                 offsets: Offsets) -> None:
        self.offsets = offsets
        self.config = config
        self.clients = clients
        self.membership = ops.membership
        self.port = config.grpc_server_port
        self.namesrv = namesrv
        self.routes = routes = Routes(topics, config.broker_name, config.advertised_ip, namesrv.lookup,
                                      lambda: ops.gate.role.is_slave, namesrv.endpoints, clock)
        self.producing = Producing(config, topics, clients, clock, self.endpoints, routes, ops.send,
                                   ops.end_transaction, ops.cancel, ops.messages)
        self.consuming = Consuming(config, ops.groups, ops.pop, clock, routes, self.producing.broker_of)
        self.lite = LiteTopics(config, topics, ops.groups, clients, ops.pop, self.consuming.renewals, clock)
        self.lite.peers = LitePeers(routes, config.broker_name, clock, self.lite.holds, peer_credentials(config))
        self.producing.lite = self.consuming.lite = self.lite
        self._server: grpc.aio.Server | None = None
        """grpcio's server (grpcServerEngine=grpcio)."""
        self._door: GrpcDoor | None = None
        """Skiff's own HTTP/2 door (grpcServerEngine=skiff, the default)."""
        self.auth: GrpcAuth | None = None
        """ACL 2.0 (`skiff.broker.grpc.auth`): every call authenticated and authorized by the gate."""
        self._renewer = Periodic("grpc-renew-invisible", config.renew_schedule_period_ms / 1000.0,
                                 self.consuming.renewals.renew_tick)
        self.lite_expiry = LiteExpiry(config, topics, ops.topics, ops.pop, self.lite, clock)
        self._periodics = [self._renewer, *self.lite_expiry.periodics()]
        if config.namesrv_addrs:
            self._periodics.append(Periodic("grpc-advertise", config.register_name_server_period_ms / 1000.0,
                                            self._advertise))

    def endpoints(self, host: str, port: int) -> pb.Endpoints:
        """A broker's gRPC endpoint (`skiff.broker.grpc.routes` says which port)."""
        scheme = pb.IPv6 if ipaddress.ip_address(host).version == 6 else pb.IPv4
        return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])

    async def _advertise(self) -> None:
        await self.namesrv.entry.put(f"{self.config.advertised_ip}:{self.port}")

    async def start(self) -> None:
        """Listen on grpcServerPort with the engine ``grpcServerEngine`` names: Skiff's own
        HTTP/2 door or grpcio's server, with TLS as ``tls.server.mode`` says (skiff.broker.grpc.tls)."""
        if self.config.grpc_server_engine is GrpcServerEngine.SKIFF:
            tls = door_tls(self.config)
            await self._start_door(tls)
            secure = tls is not None
        else:
            credentials = grpc_credentials(self.config)
            await self._start_grpcio(credentials)
            secure = credentials is not None
        self.routes.grpc_port = self.port  # the port taken (0 picks one)
        if self.config.namesrv_addrs:
            await self._advertise()  # before clients are routed here, peers can find this endpoint
        for periodic in self._periodics:
            periodic.start()
        log.info("gRPC endpoint (RocketMQ 5.x clients) listening on %s:%d%s (grpcServerEngine=%s)",
                 self.config.listen_host, self.port, " over TLS" if secure else "",
                 self.config.grpc_server_engine.value)

    async def _start_door(self, tls: ServerTls | None) -> None:
        methods = {name: Method(_KINDS[kind], req.FromString, _serialize, handler)
                   for name, (kind, handler, req, _) in self._methods().items()}
        door = GrpcDoor(self.config.listen_host, self.port, SERVICE, methods, MAX_INBOUND_BYTES, tls)
        try:
            await door.start()
        except ListenError as exc:
            raise ListenError(f"the gRPC endpoint (grpcServerPort): {exc}") from None
        self.port = door.port
        self._door = door

    async def _start_grpcio(self, credentials: grpc.ServerCredentials | None) -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_INBOUND_BYTES),
                                          ("grpc.so_reuseport", 0)])
        handlers = {name: _GRPCIO_KINDS[kind](handler, req.FromString, out.SerializeToString)
                    for name, (kind, handler, req, out) in self._methods().items()}
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
        try:
            target = _target(self.config.listen_host, self.port)
            self.port = (server.add_insecure_port(target) if credentials is None
                         else server.add_secure_port(target, credentials))
        except RuntimeError as exc:
            raise ListenError(f"the gRPC endpoint cannot listen on {self.config.listen_host}:{self.port} "
                              f"(grpcServerPort): {exc}") from None
        await server.start()
        self._server = server

    async def stop(self, grace_s: float) -> None:
        self.offsets.close()  # first: a PullMessage held for the tier answers now, not at its limit
        for periodic in self._periodics:
            await periodic.stop()
        if self.config.namesrv_addrs and (self._server is not None or self._door is not None):
            await self.namesrv.entry.delete()
        if self.lite.peers is not None:
            await self.lite.peers.close()
        if self._server is not None or self._door is not None:
            for conn in list(self.clients.conns.values()):
                conn.close()
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
        if self._door is not None:
            await self._door.stop(grace_s)
            self._door = None

    # -- methods -------------------------------------------------------------------

    def _methods(self) -> dict[str, tuple[str, Callable[..., Any], Any, Any]]:
        """Method name → (kind, handler, request class, response class), for either engine."""
        p, c = self.producing, self.consuming
        unary: dict[str, tuple[Callable[..., Any], Any, Any]] = {
            "QueryRoute": (lambda conn, r: p.query_route(r), rpc.QueryRouteRequest, rpc.QueryRouteResponse),
            "Heartbeat": (self._heartbeat, rpc.HeartbeatRequest, rpc.HeartbeatResponse),
            "SendMessage": (p.send, rpc.SendMessageRequest, rpc.SendMessageResponse),
            "QueryAssignment": (lambda conn, r: c.query_assignment(r), rpc.QueryAssignmentRequest,
                                rpc.QueryAssignmentResponse),
            "AckMessage": (lambda conn, r: c.ack(r), rpc.AckMessageRequest, rpc.AckMessageResponse),
            "ForwardMessageToDeadLetterQueue": (lambda conn, r: c.dead_letter(r),
                                                rpc.ForwardMessageToDeadLetterQueueRequest,
                                                rpc.ForwardMessageToDeadLetterQueueResponse),
            "EndTransaction": (p.end_transaction, rpc.EndTransactionRequest, rpc.EndTransactionResponse),
            "NotifyClientTermination": (self._terminate, rpc.NotifyClientTerminationRequest,
                                        rpc.NotifyClientTerminationResponse),
            "ChangeInvisibleDuration": (lambda conn, r: c.change_invisible(r), rpc.ChangeInvisibleDurationRequest,
                                        rpc.ChangeInvisibleDurationResponse),
            "RecallMessage": (p.recall, rpc.RecallMessageRequest, rpc.RecallMessageResponse),
            "QueryOffset": (lambda conn, r: self.offsets.query_offset(r), rpc.QueryOffsetRequest,
                            rpc.QueryOffsetResponse),
            "GetOffset": (lambda conn, r: self.offsets.get_offset(r), rpc.GetOffsetRequest, rpc.GetOffsetResponse),
            "UpdateOffset": (lambda conn, r: self.offsets.update_offset(r), rpc.UpdateOffsetRequest,
                             rpc.UpdateOffsetResponse),
            "SyncLiteSubscription": (self.lite.sync_everywhere, rpc.SyncLiteSubscriptionRequest,
                                     rpc.SyncLiteSubscriptionResponse),
        }
        methods: dict[str, tuple[str, Callable[..., Any], Any, Any]] = {
            name: ("unary", self._unary(fn, out), req, out) for name, (fn, req, out) in unary.items()}
        methods["ReceiveMessage"] = ("stream", self._receive, rpc.ReceiveMessageRequest, rpc.ReceiveMessageResponse)
        methods["PullMessage"] = ("stream", self._pull, rpc.PullMessageRequest, rpc.PullMessageResponse)
        methods["Telemetry"] = ("bidi", self._telemetry, rpc.TelemetryCommand, rpc.TelemetryCommand)
        return methods

    def _unary(self, fn: Callable[..., Any], out: Any) -> Callable[[Any, ServicerContext], Awaitable[Any]]:
        async def method(request: Any, context: ServicerContext) -> Any:
            conn = self._conn(context, request)
            if isinstance(conn, pb.Status):
                return out(status=conn)
            CALL_METADATA.set(tuple(context.invocation_metadata() or ()))
            try:
                result = fn(conn, request)
                return await result if asyncio.iscoroutine(result) else result
            except Exception as exc:
                log.exception("gRPC %s failed", type(request).__name__)
                return out(status=status(pb.INTERNAL_SERVER_ERROR, str(exc) or type(exc).__name__))
        return method

    def _conn(self, context: ServicerContext, request: Any) -> GrpcClientConn | pb.Status:
        """The client's connection, once the call passed ACL 2.0 when it is on (a Telemetry
        stream's ``request`` is None: authenticated here, its settings authorized as they come)."""
        meta = dict(context.invocation_metadata() or ())
        client_id = meta.get("x-mq-client-id", "")
        if not client_id:
            return status(pb.CLIENT_ID_REQUIRED, "the x-mq-client-id header is missing")
        peer = _peer(context.peer())
        if self.auth is not None:
            denied = self.auth.check(meta, peer[0], request)
            if denied is not None:
                return denied
        return self.clients.conn(str(client_id), peer)

    def _heartbeat(self, conn: GrpcClientConn, req: rpc.HeartbeatRequest) -> rpc.HeartbeatResponse:
        self.clients.touch(conn)
        return rpc.HeartbeatResponse(status=status(pb.OK, "OK"))

    async def _terminate(self, conn: GrpcClientConn, req: rpc.NotifyClientTerminationRequest) -> \
            rpc.NotifyClientTerminationResponse:
        gone = self.clients.forget(conn.client_id)
        if gone is not None:
            self.membership.closed(gone, TERMINATED)
            gone.close()
        await self.lite.terminated(conn)
        return rpc.NotifyClientTerminationResponse(status=status(pb.OK, "OK"))

    async def _receive(self, request: rpc.ReceiveMessageRequest,
                       context: ServicerContext) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        conn = self._conn(context, request)
        if isinstance(conn, pb.Status):
            yield rpc.ReceiveMessageResponse(status=conn)
            return
        CALL_METADATA.set(tuple(context.invocation_metadata() or ()))
        async for response in self.consuming.receive(conn, request, context.time_remaining()):
            yield response

    async def _pull(self, request: rpc.PullMessageRequest,
                    context: ServicerContext) -> AsyncIterator[rpc.PullMessageResponse]:
        conn = self._conn(context, request)
        if isinstance(conn, pb.Status):
            yield rpc.PullMessageResponse(status=conn)
            return
        async for response in self.offsets.pull(request):
            yield response

    async def _telemetry(self, requests: AsyncIterator[rpc.TelemetryCommand],
                         context: ServicerContext) -> AsyncIterator[rpc.TelemetryCommand]:
        conn = self._conn(context, None)
        if isinstance(conn, pb.Status):
            yield rpc.TelemetryCommand(status=conn)
            return
        caller = None if self.auth is None else self.auth.caller(dict(context.invocation_metadata() or ()),
                                                                 TELEMETRY, conn.peer[0])
        if isinstance(caller, pb.Status):
            yield rpc.TelemetryCommand(status=caller)
            return
        out: asyncio.Queue[rpc.TelemetryCommand | None] = asyncio.Queue(TELEMETRY_QUEUED_MAX)
        conn.stream = out
        reader = asyncio.ensure_future(self._read_telemetry(conn, requests, out, caller))
        try:
            while (command := await out.get()) is not None:
                yield command
        finally:
            reader.cancel()
            if conn.stream is out:
                conn.stream = None

    async def _read_telemetry(self, conn: GrpcClientConn, requests: AsyncIterator[rpc.TelemetryCommand],
                              out: asyncio.Queue[rpc.TelemetryCommand | None], caller: Caller | None) -> None:
        try:
            async for command in requests:
                reply = self._on_telemetry(conn, command, caller)
                if reply is not None:
                    await out.put(reply)  # a client that does not read is not read from
        finally:
            end_stream(out)

    def _on_telemetry(self, conn: GrpcClientConn, command: rpc.TelemetryCommand,
                      caller: Caller | None) -> rpc.TelemetryCommand | None:
        which = command.WhichOneof("command")
        if which == "settings":
            if not command.settings.HasField("publishing") and not command.settings.HasField("subscription"):
                return rpc.TelemetryCommand(status=status(pb.BAD_REQUEST, "settings without publishing or "
                                                                           "subscription"))
            if self.auth is not None and caller is not None:
                denied = self.auth.allowed(caller, list(settings_needs(command.settings)), TELEMETRY)
                if denied is not None:
                    return rpc.TelemetryCommand(status=denied)
            reply = self.clients.on_settings(conn, command.settings)
            self.lite.settings(reply.settings)
            return reply
        if which == "print_thread_stack_trace_command":
            nonce = command.print_thread_stack_trace_command.nonce
            return rpc.TelemetryCommand(status=status(pb.OK, "OK"),
                                        thread_stack_trace=rpc.ThreadStackTrace(nonce=nonce))
        if which == "verify_message_command":
            nonce = command.verify_message_command.nonce
            return rpc.TelemetryCommand(status=status(pb.OK, "OK"),
                                        verify_message_result=rpc.VerifyMessageResult(nonce=nonce))
        return None


@functools.lru_cache(maxsize=GRPC_PEERS_PARSED)
def _peer(text: str) -> tuple[str, int]:
    """A grpc peer string (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``) as (host, port); a
    connection's calls all name the same peer, parsed once."""
    _, _, rest = text.partition(":")
    host, _, port = rest.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port) if port.isdigit() else 0


def _target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
