"""Micro-benchmark of the broker's ACL check: ``skiff bench acl`` (``python -m skiff.bench.acl``).

Times `skiff.broker.acl.validator.refusal` — what the broker runs before every request
with ``aclEnable=true``: parse the request's resources, recompute the HmacSHA1
signature over its fields and body, look up the perms — on a signed single send
(SEND_MESSAGE_V2, 1 KiB body), a signed batch (SEND_BATCH_MESSAGE, 64 × 1 KiB) and a
signed pull, and the signing our client does per request. Figures are µs per call
(best of ``--repeat`` rounds) and, for sends, µs per message. The end-to-end cost is
`skiff bench broker --acl` against `skiff bench broker`.

``acl2`` times ACL 2.0's remoting check on the same requests (`skiff.broker.auth.remoting.guard`:
authentication, what the request needs, the gate's decision) with the same account migrated to
a user and policies, as a broker with authenticationEnabled/authorizationEnabled runs it.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from skiff.bench._micro import best_us, micro_main
from skiff.bench.broker_load import BENCH_ACL, BENCH_KEYS, TOPIC
from skiff.broker.acl.plain_config import parse_plain_acl
from skiff.broker.acl.validator import refusal
from skiff.broker.auth.migrate import as_auth_data, migrate_plain_acl
from skiff.broker.auth.remoting import guard
from skiff.broker.auth.service import AuthService
from skiff.broker.config import BrokerConfig
from skiff.broker.operations.gate import Gate
from skiff.common.clock import SYSTEM_CLOCK
from skiff.common.message import Message
from skiff.common.msgid import UNIQ_IDS
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.pull import PullMessageRequestHeader
from skiff.protocol.message_codec import encode_batch, send_properties
from skiff.testing.wire import send_header
from skiff.transport.connection import Handler

BATCH = 64


class _Peer:
    """What the guard reads of a connection: the peer's address."""

    peer = ("127.0.0.1", 50000)


def _requests() -> dict[str, tuple[RemotingCommand, int]]:
    """Signed requests by name, with the messages each carries."""
    one = Message.of(TOPIC, b"x" * 1024, tags="bench", keys="k")
    single = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, send_header(
        RequestCode.SEND_MESSAGE_V2, TOPIC, 0, send_properties(one, UNIQ_IDS.next_id())), one.body)
    batch_body = encode_batch([Message.of(TOPIC, b"x" * 1024, keys=f"k{i}") for i in range(BATCH)], UNIQ_IDS.next_id)
    batch = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, send_header(
        RequestCode.SEND_BATCH_MESSAGE, TOPIC, 0, "", batch=True), batch_body)
    pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, PullMessageRequestHeader(
        "BenchGroup", TOPIC, 0, 0, 32, 2, 0, 0, 0, "*").to_ext())
    out = {"send_single_1k": (single, 1), "send_batch_64x1k": (batch, BATCH), "pull": (pull, 0)}
    for cmd, _ in out.values():
        sign_command(cmd, *BENCH_KEYS)
    return out


def _acl2_check() -> Handler:
    """ACL 2.0's guard around a handler that does nothing, over BENCH_ACL's accounts migrated."""
    auth = AuthService.for_plain_acl(BrokerConfig(), SYSTEM_CLOCK)
    accounts = yaml.safe_load(BENCH_ACL)
    for account in accounts["accounts"]:
        account["admin"] = False  # a Normal user, so its policies are evaluated (a Super user skips them)
    auth.store.adopt(as_auth_data(migrate_plain_acl(accounts)))
    gate = Gate.__new__(Gate)  # only its access check runs here
    gate.auth = auth
    return guard({0: lambda conn, cmd: None}, auth, gate, "DefaultCluster")[0]


def measure(calls: int, repeat: int) -> dict[str, dict[str, float]]:
    config = parse_plain_acl(yaml.safe_load(BENCH_ACL))
    acl2, conn = _acl2_check(), _Peer()
    figures: dict[str, dict[str, float]] = {}
    for name, (cmd, messages) in _requests().items():
        assert refusal(config, "127.0.0.1", cmd) is None
        assert acl2(conn, cmd) is None, acl2(conn, cmd)  # type: ignore[arg-type]
        check = best_us(lambda: refusal(config, "127.0.0.1", cmd), calls, repeat)
        check2 = best_us(lambda: acl2(conn, cmd), calls, repeat)  # type: ignore[arg-type]
        signing = best_us(lambda: sign_command(cmd, *BENCH_KEYS), calls, repeat)
        figures[name] = {"check_us": round(check, 2), "acl2_check_us": round(check2, 2), "sign_us": round(signing, 2),
                         "body_bytes": len(cmd.body)}
        if messages:
            figures[name]["check_us_per_message"] = round(check / messages, 2)
    return figures


def _line(name: str, f: dict[str, float]) -> str:
    per = f" ({f['check_us_per_message']} us/msg)" if "check_us_per_message" in f else ""
    return (f"{name:18} check {f['check_us']:8.2f} us{per}   acl2 {f['acl2_check_us']:8.2f} us   "
            f"sign {f['sign_us']:8.2f} us   body {f['body_bytes']:,} B")


def main(argv: Sequence[str] | None = None) -> int:
    return micro_main(argv, "skiff bench acl", __doc__, 2000, measure, _line)


if __name__ == "__main__":
    raise SystemExit(main())
