"""The transport against a real server process that dies and comes back."""

from __future__ import annotations

import asyncio

import pytest

from skiff.protocol.bodies.route import ClusterInfo
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.testing.processes import start_namesrv
from skiff.transport import CloseReason, ConnectFailed, RemotingClient
from skiff.transport.loop import run_coroutine
from tests.unit.transport._support import wait_until


def test_client_sees_a_killed_server_and_reconnects_when_it_returns():
    first = start_namesrv()
    addr, port = first.addr, first.port
    restarted = []

    async def main():
        loop = asyncio.get_running_loop()
        client = RemotingClient(connect_timeout_ms=2000)
        try:
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5000)
            assert resp.code == ResponseCode.SUCCESS and ClusterInfo.from_json(resp.body) == ClusterInfo()
            conn = client.connections[addr]
            await loop.run_in_executor(None, first.kill)
            await wait_until(lambda: conn.is_closed, what="the client noticing the kill")
            assert conn.close_reason in (CloseReason.PEER_CLOSED, CloseReason.SOCKET_ERROR)
            with pytest.raises(ConnectFailed) as info:
                await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5000)
            assert info.value.retriable
            restarted.append(await loop.run_in_executor(None, lambda: start_namesrv(port=port)))
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5000)
            assert resp.code == ResponseCode.SUCCESS and client.connections[addr] is not conn
        finally:
            await client.close()

    try:
        run_coroutine(main())
    finally:
        for proc in [first, *restarted]:
            if proc.popen.poll() is None:
                proc.stop()
