"""A NameServer list naming a broker's port: a server that answers NameServer requests
as unsupported (as a broker does) is reported as no NameServer, and the others are asked."""

from __future__ import annotations

import pytest

from skiff.client._impl.admin_api import AdminAPI
from skiff.client._impl.api import NameServers
from skiff.client.errors import NameServerUnavailableError, NotANameServerError
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.protocol.codes import RequestCode
from skiff.transport import RemotingClient, RemotingServer
from skiff.transport.loop import run_coroutine

DEAD = "127.0.0.1:1"  # nothing listens on port 1


def with_servers(test):
    """``test(api_for, not_namesrv_addr, namesrv_addr)``: a server with no handlers (it answers
    every request REQUEST_CODE_NOT_SUPPORTED, as a broker answers NameServer requests) and a
    real NameServer."""
    async def main():
        other = RemotingServer("127.0.0.1", 0, {})
        namesrv = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
        await other.start()
        await namesrv.start()
        remoting = RemotingClient()
        try:
            await test(lambda addrs: AdminAPI(remoting, NameServers(addrs), 2000),
                       f"127.0.0.1:{other.port}", f"127.0.0.1:{namesrv.port}")
        finally:
            await remoting.close()
            await other.stop(0.2)
            await namesrv.stop(0.2)

    run_coroutine(main())


def test_a_broker_port_is_named_as_no_nameserver():
    async def test(api_for, broker, _namesrv):
        api = api_for([broker])
        for call, code in ((api.get_topic_route("T"), RequestCode.GET_ROUTEINFO_BY_TOPIC),
                           (api.get_cluster_info(), RequestCode.GET_BROKER_CLUSTER_INFO),
                           (api.get_topic_list(), RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)):
            with pytest.raises(NotANameServerError) as info:
                await call
            err = info.value
            assert isinstance(err, NameServerUnavailableError) and not err.retriable
            assert (err.not_namesrvs, err.request_code) == ([broker], code)
            assert str(err) == (f"{broker} is not a NameServer (it answered request code {int(code)} as "
                                f"unsupported, as a broker does): give the NameServer's address, "
                                f"e.g. 127.0.0.1:9876")
            assert err.explain("-n takes the NameServer's address").endswith(
                "as a broker does): -n takes the NameServer's address, e.g. 127.0.0.1:9876")

    with_servers(test)


def test_the_real_nameserver_of_the_list_answers():
    async def test(api_for, broker, namesrv):
        api = api_for([broker, namesrv])
        api.namesrvs._index = 0  # the broker first
        assert await api.get_topic_route("Missing") is None
        assert api.namesrvs.current == namesrv

    with_servers(test)


def test_a_broker_and_a_dead_address_name_both():
    async def test(api_for, broker, _namesrv):
        api = api_for([broker, DEAD])
        with pytest.raises(NotANameServerError) as info:
            await api.get_topic_route("T")
        text = str(info.value)
        assert text.startswith(f"{broker} is not a NameServer (it answered request code 105")
        assert f"no answer from {DEAD}: " in text

    with_servers(test)
