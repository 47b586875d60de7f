"""What every admin command shares, and ``skiff cluster list``.

Each admin command takes ``-n/--namesrv`` (default ``$SKIFF_NAMESRV``, else
127.0.0.1:9876) and ``--json``: tables for people, JSON for scripts (one
document, or one object per line for streams of messages). A failure prints
the server's reason (``skiff: NO_PERMISSION (16): ...``) and exits with 1,
through `skiff.cli.main`.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TextIO, TypeVar

import orjson

from skiff.client.admin import AsyncAdmin
from skiff.client.admin_results import BrokerInfo
from skiff.client import ClientConfig
from skiff.client.credentials import Credentials, resolve_credentials
from skiff.client.errors import ClientConfigError
from skiff.common.message import MessageQueue
from skiff.protocol.bodies.base import JsonBody
from skiff.transport.loop import run_coroutine
from skiff.transport.tls import TlsClientConfig

T = TypeVar("T")

DEFAULT_NAMESRV = "127.0.0.1:9876"
CLI_INSTANCE = "skiff-cli"
RUNTIME_COLUMNS = ("msgPutTotalTodayNow", "msgGetTotalTodayNow", "commitLogMaxOffset", "runtime")


def default_namesrv() -> str:
    return os.environ.get("SKIFF_NAMESRV") or DEFAULT_NAMESRV


def common_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("-n", "--namesrv", default=default_namesrv(), metavar="HOST:PORT;...",
                        help="NameServer addresses (default $SKIFF_NAMESRV or 127.0.0.1:9876)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    acl = parser.add_argument_group("ACL credentials (brokers with aclEnable=true; docs/acl.md)")
    acl.add_argument("--access-key", metavar="KEY", help="access key (default $SKIFF_ACCESS_KEY)")
    acl.add_argument("--secret-key", metavar="SECRET", help="secret key (default $SKIFF_SECRET_KEY)")
    acl.add_argument("--credentials", metavar="FILE",
                     help="YAML file with accessKey and secretKey (default $SKIFF_CREDENTIALS_FILE)")
    return tls_args(parser)


def tls_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options `tls_config` reads."""
    tls = parser.add_argument_group("TLS (servers with tls.server.mode enforcing or permissive; docs/tls.md)")
    tls.add_argument("--tls", action="store_true", help="connect with TLS (implied by the options below)")
    tls.add_argument("--tls-trust", metavar="PEM", help="verify the servers' certificates against these "
                     "certificates (without it the connection is encrypted but the server not verified)")
    tls.add_argument("--tls-cert", metavar="PEM", help="this client's certificate, for mutual TLS (with --tls-key)")
    tls.add_argument("--tls-key", metavar="PEM", help="its private key (unencrypted PEM)")
    return parser


def credentials(args: argparse.Namespace) -> Credentials | None:
    """The keys the command signs with: flags, else the file, else the environment."""
    return resolve_credentials(getattr(args, "access_key", None), getattr(args, "secret_key", None),
                               getattr(args, "credentials", None))


def tls_config(args: argparse.Namespace) -> TlsClientConfig | None:
    """The TLS the command connects with: None unless --tls or one of its options is given."""
    trust, cert, key = (getattr(args, name, None) for name in ("tls_trust", "tls_cert", "tls_key"))
    if not (getattr(args, "tls", False) or trust or cert or key):
        return None
    if bool(cert) != bool(key):
        raise ClientConfigError("--tls-cert and --tls-key go together (mutual TLS)")
    return TlsClientConfig(cert or "", key or "", auth_server=bool(trust), trust_cert_path=trust or "")


def client_config(args: argparse.Namespace) -> ClientConfig:
    """What the command's clients share: the NameServers, its instance name, credentials and TLS."""
    return ClientConfig(args.namesrv, CLI_INSTANCE, credentials=credentials(args), tls=tls_config(args))


N = TypeVar("N", int, float)


def bounded(low: N, high: N | None = None, kind: Callable[[str], N] = int) -> Callable[[str], N]:
    """An argparse type: a ``kind`` number from ``low`` (to ``high``). Anything else is a bad
    argument, refused by argparse (exit 2) before a request is sent."""
    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < low or (high is not None and value > high):
            wanted = f"{low:g} to {high:g}" if high is not None else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {wanted}")
        return value
    return parse


def family(sub: Any, name: str, help_text: str) -> Any:
    """A command family (``skiff topic ...``) whose subcommands are added to the returned object."""
    parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(handler=lambda args, extra: _usage(parser))
    return parser.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def command(family_sub: Any, name: str, help_text: str, handler: Callable[[argparse.Namespace], int]) -> Any:
    parser = common_args(family_sub.add_parser(name, help=help_text, description=help_text))
    parser.set_defaults(handler=lambda args, extra: handler(args))
    return parser


def run_client(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's client work on a fresh event loop. The client's lifecycle lines
    (started, shut down) are left out unless the command runs with ``--log-level DEBUG``."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("skiff.client").setLevel(logging.WARNING)
    return run_coroutine(coro)


def with_admin(args: argparse.Namespace, work: Callable[[AsyncAdmin], Awaitable[T]]) -> T:
    """Run ``work(admin)`` against the NameServers of ``args``."""
    async def main() -> T:
        async with AsyncAdmin(client_config=client_config(args)) as admin:
            return await work(admin)

    return run_client(main())


# ------------------------------------------------------------------ output

def jsonable(value: Any) -> Any:
    """Plain JSON values for results: result rows as objects of their fields and computed
    properties (snake_case), protocol bodies in their wire form (camelCase), enums by name,
    queues as {topic, broker_name, queue_id}, bytes as UTF-8 text (bad bytes replaced)."""
    if isinstance(value, JsonBody):
        return value.to_obj()
    if isinstance(value, MessageQueue):
        return {"topic": value.topic, "broker_name": value.broker_name, "queue_id": value.queue_id}
    names = _record_fields(value)
    if names is not None:
        return {name: jsonable(getattr(value, name)) for name in names + _properties(type(value))}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, Mapping):
        if any(isinstance(k, MessageQueue) for k in value):
            return [{"message_queue": jsonable(k), "value": jsonable(v)} for k, v in value.items()]
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return value


def _record_fields(value: Any) -> list[str] | None:
    """The fields of a dataclass or NamedTuple instance; None for anything else."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [f.name for f in dataclasses.fields(value)]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return list(value._fields)
    return None


def _properties(cls: type) -> list[str]:
    return [n for n in dir(cls) if not n.startswith("_") and isinstance(getattr(cls, n, None), property)]


def print_json(value: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(orjson.dumps(jsonable(value), option=orjson.OPT_INDENT_2).decode() + "\n")


def print_json_line(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(orjson.dumps(jsonable(value)).decode() + "\n")
    out.flush()


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None) -> None:
    """Left-aligned columns, two spaces apart, as mqadmin prints them."""
    out = out or sys.stdout
    text = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in text) for i in range(len(headers))]
    for row in text:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


def emit(args: argparse.Namespace, value: Any, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Print ``value`` as JSON with ``--json``, else ``rows`` as a table; exit status 0."""
    if args.json:
        print_json(value)
    else:
        print_table(headers, rows)
    return 0


# ----------------------------------------------------------------- cluster

def register(sub: Any) -> None:
    clusters = family(sub, "cluster", "brokers of the clusters the NameServers know")
    cmd = command(clusters, "list", "list every broker: cluster, name, id, address, version, counters",
                  cluster_list)
    cmd.add_argument("-c", "--cluster", help="only this cluster")


def cluster_list(args: argparse.Namespace) -> int:
    brokers: list[BrokerInfo] = with_admin(args, lambda a: a.brokers(args.cluster))
    rows = [(b.cluster, b.broker_name, b.broker_id, b.addr, b.version or ("-" if b.error is None else "DOWN"),
             *(b.runtime.get(k, "") for k in RUNTIME_COLUMNS), *replication_columns(b, brokers)) for b in brokers]
    return emit(args, brokers, ("CLUSTER", "BROKER", "ID", "ADDRESS", "VERSION", "PUT TODAY", "GET TODAY",
                                "COMMITLOG MAX", "RUNTIME", "ROLE", "EPOCH", "IN-SYNC", "LAG BYTES"), rows)


def replication_columns(broker: BrokerInfo, brokers: Sequence[BrokerInfo]) -> tuple[str, str, str, str]:
    """Role, controller epoch, SyncStateSet and replication lag of one broker (docs/replication.md):
    a slave's lag is its master's CommitLog end less its own; a master's, the furthest any
    slave it streams to is behind."""
    info = broker.runtime
    role, epoch, in_sync = info.get("brokerRole", ""), info.get("controllerEpoch", ""), info.get(
        "controllerSyncStateSet", "")
    end = int(info.get("commitLogMaxOffset") or 0)
    if role == "SLAVE":
        master = next((b for b in brokers if b.broker_name == broker.broker_name and b.broker_id == 0), None)
        lag = "" if master is None else str(max(0, int(master.runtime.get("commitLogMaxOffset") or 0) - end))
    else:
        acks = [int(s.rpartition("@")[2]) for s in info.get("haSlaves", "").split(";") if "@" in s]
        lag = str(max(end - a for a in acks)) if acks else ""
    return role, epoch, in_sync, lag
