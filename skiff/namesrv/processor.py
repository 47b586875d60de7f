"""The NameServer's request handlers: decode the header and body, ask the route
table or the KV store, encode the answer. All synchronous, so the transport
answers each in the iteration that read it."""

from __future__ import annotations

import logging

from skiff.common.record import body_crc
from skiff.namesrv.kv_config import ORDER_TOPIC_CONFIG, KvConfigStore
from skiff.namesrv.route_table import RouteTable
from skiff.protocol.bodies.admin import DataVersion, KVTable
from skiff.protocol.bodies.register import RegisterBrokerBody
from skiff.protocol.bodies.topic import TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers import namesrv as h
from skiff.transport.connection import Connection, Handler

log = logging.getLogger(__name__)

_CRC_MASK = 0x7FFFFFFF
"""RocketMQ's body CRC keeps 31 bits; a sender's full 32-bit value is accepted too."""


class NamesrvProcessor:
    """Answers every NameServer request code from one route table and KV store."""

    def __init__(self, routes: RouteTable, kv: KvConfigStore) -> None:
        self.routes = routes
        self.kv = kv

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.change_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.change_write_perm,
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
        }

    # ------------------------------------------------------------ brokers

    def register_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = h.RegisterBrokerRequestHeader.from_ext(req.ext_fields)
        if header.body_crc32 and body_crc(req.body) != header.body_crc32 & _CRC_MASK:
            log.warning("REGISTER_BROKER from %s: crc32 not match", conn.peer_addr)
            return req.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = (RegisterBrokerBody.decode(req.body, header.compressed) if req.body
                else RegisterBrokerBody(TopicConfigSerializeWrapper(data_version=DataVersion(0, 0))))
        result = self.routes.register_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id,
            header.ha_server_addr, body.topic_config_serialize_wrapper, body.filter_server_list, conn,
        )
        if result.first_time:
            log.info("broker %s (id %d) registered at %s in cluster %s with %d topics", header.broker_name,
                     header.broker_id, header.broker_addr, header.cluster_name,
                     len(body.topic_config_serialize_wrapper.topic_config_table))
        order_conf = self.kv.namespace(ORDER_TOPIC_CONFIG)
        return req.response(
            ext_fields=h.RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr).to_ext(),
            body=KVTable(order_conf).to_json() if order_conf else b"",
        )

    def unregister_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = h.BrokerIdentityHeader.from_ext(req.ext_fields)
        found = self.routes.unregister_broker(header.cluster_name, header.broker_addr, header.broker_name,
                                              header.broker_id)
        log.info("broker %s (id %d) at %s unregistered%s", header.broker_name, header.broker_id,
                 header.broker_addr, "" if found else " (it was not registered)")
        return req.response()

    def query_data_version(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = h.BrokerIdentityHeader.from_ext(req.ext_fields)
        version = DataVersion.from_json(req.body) if req.body else DataVersion()
        changed = self.routes.is_topic_config_changed(header.broker_addr, version)
        if not changed:
            self.routes.touch(header.broker_addr)
        known = self.routes.data_version(header.broker_addr)
        return req.response(ext_fields=h.QueryDataVersionResponseHeader(changed).to_ext(),
                            body=known.to_json() if known is not None else b"")

    def change_write_perm(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (before a broker stops) or ADD_WRITE_PERM_OF_BROKER."""
        broker_name = h.BrokerNameHeader.from_ext(req.ext_fields).broker_name
        wipe = req.code == RequestCode.WIPE_WRITE_PERM_OF_BROKER
        count = self.routes.set_write_perm(broker_name, writable=not wipe)
        log.info("write permission of broker %s %s on %d topics (asked by %s)", broker_name,
                 "wiped" if wipe else "restored", count, conn.peer_addr)
        header = h.WipeWritePermOfBrokerResponseHeader(count) if wipe else h.AddWritePermOfBrokerResponseHeader(count)
        return req.response(ext_fields=header.to_ext())

    # ------------------------------------------------------------- topics

    def get_route(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = h.GetRouteInfoRequestHeader.from_ext(req.ext_fields).topic
        route = self.routes.topic_route(topic, self.kv.get(ORDER_TOPIC_CONFIG, topic))
        if route is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}")
        return req.response(body=route.to_json())

    def get_cluster_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=self.routes.cluster_info().to_json())

    def get_all_topics(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=self.routes.all_topics().to_json())

    def get_topics_by_cluster(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        cluster = h.GetTopicsByClusterRequestHeader.from_ext(req.ext_fields).cluster
        return req.response(body=self.routes.topics_by_cluster(cluster).to_json())

    def delete_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = h.DeleteTopicFromNamesrvRequestHeader.from_ext(req.ext_fields)
        found = self.routes.delete_topic(header.topic, header.cluster_name)
        log.info("topic %s deleted%s by %s%s", header.topic,
                 f" from cluster {header.cluster_name}" if header.cluster_name else "", conn.peer_addr,
                 "" if found else " (it did not exist)")
        return req.response()

    # ---------------------------------------------------------- KV config

    def put_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = h.PutKVConfigRequestHeader.from_ext(req.ext_fields)
        self.kv.put(header.namespace, header.key, header.value)
        return req.response()

    def get_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = h.KVConfigKeyHeader.from_ext(req.ext_fields)
        value = self.kv.get(header.namespace, header.key)
        if value is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND,
                                f"No config item, Namespace: {header.namespace} Key: {header.key}")
        return req.response(ext_fields=h.GetKVConfigResponseHeader(value).to_ext())

    def delete_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = h.KVConfigKeyHeader.from_ext(req.ext_fields)
        self.kv.delete(header.namespace, header.key)
        return req.response()

    def get_kv_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        namespace = h.GetKVListByNamespaceRequestHeader.from_ext(req.ext_fields).namespace
        table = self.kv.namespace(namespace)
        if table is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return req.response(body=KVTable(table).to_json())
