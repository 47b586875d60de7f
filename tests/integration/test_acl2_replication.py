"""ACL 2.0 on a master and its slave: users and ACLs written on the master reach the slave with
the rest of the metadata (signed with the inner credentials, which the master checks), so the
slave authorizes reads by the same policies; a change on the master (a deny) reaches it too."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.common.sysflag import PullSysFlag
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.codes import AuthRequestCode, RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.ha import HAGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, send_header
from skiff.transport.loop import run_coroutine

pytestmark = pytest.mark.timeout(120)

ROOT, APP = ("root", "root-secret-1"), ("app", "app-secret-1")
ARGS = ["--slaveSyncInterval=300", "--authenticationEnabled=true", "--authorizationEnabled=true",
        '--initAuthenticationUser={"username":"root","password":"root-secret-1"}',
        '--innerClientAuthenticationCredentials={"accessKey":"inner","secretKey":"inner-secret-1"}']


async def call(wire: BrokerWire, keys: tuple[str, str], code: int, ext: dict[str, str] | None = None,
               body: bytes = b"") -> RemotingCommand:
    cmd = RemotingCommand.request(code, ext or {}, body)
    sign_command(cmd, *keys)
    return await wire.client.invoke(wire.addr, cmd, wire.timeout_ms)


async def ok(wire: BrokerWire, keys: tuple[str, str], code: int, ext: dict[str, str] | None = None,
             body: bytes = b"") -> RemotingCommand:
    resp = await call(wire, keys, code, ext, body)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


def acl(decision: str) -> bytes:
    return (b'{"subject":"User:app","policies":[{"policyType":"Custom","entries":['
            b'{"resource":"Topic:Rep","actions":["Pub","Sub"],"decision":"' + decision.encode() + b'"},'
            b'{"resource":"Group:rep-group","actions":["Sub"],"decision":"Allow"}]}]}')


def test_users_and_acls_reach_the_slave(tmp_path: Path) -> None:
    with HAGroup(tmp_path, broker_args=ARGS) as group:
        async def main() -> None:
            master, slave = BrokerWire(group.master_addr), BrokerWire(group.slave_addr(1))
            try:
                header = CreateTopicRequestHeader("Rep", "TBW102", 1, 1, 6, "SINGLE_TAG")
                await ok(master, ROOT, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                await ok(master, ROOT, AuthRequestCode.AUTH_CREATE_USER, {"username": "app"},
                         b'{"username":"app","password":"app-secret-1"}')
                await ok(master, ROOT, AuthRequestCode.AUTH_CREATE_ACL, {"subject": "User:app"}, acl("Allow"))
                sent = await ok(master, APP, RequestCode.SEND_MESSAGE_V2,
                                send_header(RequestCode.SEND_MESSAGE_V2, "Rep", 0, ""), b"replicated")
                assert sent.code == ResponseCode.SUCCESS

                async def slave_pull() -> RemotingCommand:
                    ext = {"consumerGroup": "rep-group", "topic": "Rep", "queueId": "0", "queueOffset": "0",
                           "maxMsgNums": "32", "sysFlag": str(int(PullSysFlag.SUBSCRIPTION)), "commitOffset": "0", "suspendTimeoutMillis": "0",
                           "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
                    return await call(slave, APP, RequestCode.PULL_MESSAGE, ext)

                async def slave_serves() -> bool:
                    return (await slave_pull()).code == ResponseCode.SUCCESS
                await eventually(slave_serves, 30, "the slave knowing the user, its ACL and the message")
                users = await ok(slave, ROOT, AuthRequestCode.AUTH_LIST_USER)
                assert b'"app"' in bytes(users.body) and b'"inner"' in bytes(users.body)

                await ok(master, ROOT, AuthRequestCode.AUTH_UPDATE_ACL, {"subject": "User:app"}, acl("Deny"))

                async def slave_refuses() -> bool:
                    resp = await slave_pull()
                    return resp.code == ResponseCode.NO_PERMISSION and "denied by the entry for Topic:Rep" in resp.remark
                await eventually(slave_refuses, 30, "the slave taking the master's deny")
            finally:
                await master.close()
                await slave.close()
        run_coroutine(main())
