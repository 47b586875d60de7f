"""Every request a broker serves is named in ACL 2.0's tables: each remoting request code its
processors register (RocketMQ 5.3 lets codes whose header names no resource through; here an
unlisted code would need Cluster Update, and this test keeps the table complete so that rule is
never what decides), and each gRPC method's request type. One broker, in this process."""

from __future__ import annotations

import asyncio
from pathlib import Path

from skiff.broker import BrokerConfig, BrokerServer
from skiff.broker.auth.remoting import TABLE, needs_of
from skiff.broker.grpc.auth import NEEDS
from skiff.protocol.codes import AuthRequestCode, RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.store import StoreConfig
from skiff.testing.processes import free_port
from skiff.transport.errors import ListenError

STREAMS_CHECKED_APART = {"Telemetry"}
"""Authenticated when the stream opens; each settings message authorized as it comes."""


def test_every_served_request_is_in_the_tables(tmp_path: Path) -> None:
    async def main(attempt: int) -> tuple[set[int], set[str]]:
        config = BrokerConfig(listen_host="127.0.0.1", listen_port=0, grpc_server_port=free_port(), namesrv_addr="")
        store = StoreConfig(store_path_root_dir=str(tmp_path / str(attempt)), mapped_file_size_commit_log=1 << 22,
                            mapped_file_size_consume_queue=60_000)
        server = BrokerServer(config, store)
        await server.start()
        try:
            assert server._remoting is not None and server.grpc is not None
            return set(server._remoting._handlers), set(server.grpc._methods())
        finally:
            await server.stop()

    for attempt in range(3):  # the gRPC port was free a moment ago; another test's process may take it first
        try:
            codes, methods = asyncio.run(main(attempt))
            break
        except ListenError:
            if attempt == 2:
                raise
    assert set(AuthRequestCode) <= codes
    assert sorted(codes - set(TABLE)) == []
    named = {t.DESCRIPTOR.name.removesuffix("Request") for t in NEEDS}
    assert sorted(methods - named - STREAMS_CHECKED_APART) == []


def test_an_admin_write_needs_cluster_update_and_reads_need_get() -> None:
    def need(code: int, ext: dict[str, str] | None = None) -> list[str]:
        return [n.describe() for n in needs_of(RemotingCommand.request(code, ext or {}), "C1")]
    assert need(AuthRequestCode.AUTH_CREATE_USER) == ["Update on Cluster:C1"]
    assert need(AuthRequestCode.AUTH_LIST_ACL) == ["Get on Cluster:C1"]
    assert need(RequestCode.UPDATE_BROKER_CONFIG) == ["Update on Cluster:C1"]
    assert need(RequestCode.GET_ALL_TOPIC_CONFIG) == ["Get on Cluster:C1"]
    assert need(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T"}) == ["Delete on Topic:T"]
    assert need(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G"}) == ["Delete on Group:G"]
    assert need(9999) == ["Update on Cluster:C1"], "a code no table names is an admin write"
    assert need(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G"}) == ["Sub on Group:G"]
