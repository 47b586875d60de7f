"""``skiff user ...`` and ``skiff acl ...``: ACL 2.0 users and policies on the brokers (RocketMQ
5.3's AUTH_* requests, mqadmin's createUser ... listAcl), and ``skiff acl migrate``, which turns a
RocketMQ 4.x plain_acl.yml into users and policies (docs/acl.md).

    skiff user create app --password-file pw.txt [--type Super] [-c CLUSTER | -b HOST:PORT]
    skiff user update app [--password-file F] [--type T] [--status disable]
    skiff user delete app | get app | list [--filter ap]
    skiff acl create User:app -r Topic:orders,Group:billing -a Pub,Sub -d Allow [-i 10.0.0.0/8]
    skiff acl update ... | delete User:app [-r Topic:orders] | get User:app | list [-s app] [-r orders]
    skiff acl migrate conf/plain_acl.yml [--dry-run]

A password comes from ``--password-file`` or, without it, one line of standard input (never an
argument: it would show in the process list). Listings hide passwords unless ``--show-password``.
Changes go to every master (or the broker named); slaves copy them from their master.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from skiff.broker.acl.plain_config import AclConfigError
from skiff.broker.auth.migrate import migrate_plain_acl
from skiff.cli.admin import command, family, print_json, print_table, with_admin
from skiff.client import AsyncAdmin
from skiff.common.errors import ConfigError

HIDDEN = "********"


def _where(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-c", "--cluster", help="only the masters of this cluster")
    where.add_argument("-b", "--broker", metavar="HOST:PORT", help="only this broker")


def _cmd(fam: Any, name: str, help_text: str, handler: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = command(fam, name, help_text, handler)
    _where(parser)
    return parser


def register(sub: Any) -> None:
    users = family(sub, "user", "ACL 2.0 users on the brokers (docs/acl.md)")
    for name, help_text, handler in (("create", "create a user", user_create),
                                     ("update", "change a user's password, type or status", user_update)):
        cmd = _cmd(users, name, help_text, handler)
        cmd.add_argument("username")
        cmd.add_argument("--password-file", metavar="FILE", help="read the password from FILE (default: one line "
                                                                  "of standard input)" if name == "create" else
                         "read a new password from FILE")
        cmd.add_argument("--type", choices=("Normal", "Super"), default="Normal" if name == "create" else None,
                         help="a Super user passes every check (only a Super user may make one)")
        if name == "update":
            cmd.add_argument("--status", choices=("enable", "disable"), help="a disabled user is refused")
    _cmd(users, "delete", "delete a user and their ACL", user_delete).add_argument("username")
    get = _cmd(users, "get", "show a user", user_get)
    get.add_argument("username")
    get.add_argument("--show-password", action="store_true")
    listing = _cmd(users, "list", "list the users", user_list)
    listing.add_argument("--filter", default="", help="only names containing this")
    listing.add_argument("--show-password", action="store_true")

    acls = family(sub, "acl", "ACL 2.0 policies on the brokers, and migration from plain_acl.yml (docs/acl.md)")
    for name in ("create", "update"):
        cmd = _cmd(acls, name, f"{name} policy entries of a user (merged per resource)", acl_set)
        cmd.add_argument("subject", help="User:<name>")
        cmd.add_argument("-r", "--resources", required=True, help="comma list: Topic:x, Topic:pre*, Group:g, "
                                                                  "Cluster:c, Topic:*, *")
        cmd.add_argument("-a", "--actions", required=True, help="comma list of All, Pub, Sub, Create, Update, "
                                                                "Delete, Get, List")
        cmd.add_argument("-d", "--decision", required=True, choices=("Allow", "Deny"))
        cmd.add_argument("-i", "--source-ips", default="", help="comma list of addresses or CIDRs (default: any)")
        cmd.add_argument("--policy-type", choices=("Custom", "Default"), default="Custom")
    delete = _cmd(acls, "delete", "delete a user's ACL, or one entry of it", acl_delete)
    delete.add_argument("subject", help="User:<name>")
    delete.add_argument("-r", "--resource", help="only this entry")
    delete.add_argument("--policy-type", choices=("Custom", "Default"), default="Custom")
    _cmd(acls, "get", "show a user's ACL", acl_get).add_argument("subject", help="User:<name>")
    listing = _cmd(acls, "list", "list the ACLs", acl_list)
    listing.add_argument("-s", "--subject-filter", default="", help="only subjects containing this")
    listing.add_argument("-r", "--resource-filter", default="", help="only ACLs with a resource containing this")
    migrate = _cmd(acls, "migrate", "turn a RocketMQ 4.x plain_acl.yml into users and ACLs (users that exist are "
                                    "left alone)", acl_migrate)
    migrate.add_argument("file", help="the plain_acl.yml")
    migrate.add_argument("--dry-run", action="store_true", help="print what would be created, change nothing")


def _password(path: str | None, required: bool) -> str | None:
    if path:
        with open(path, encoding="utf-8") as f:
            text = f.readline().rstrip("\r\n")
    elif required:
        text = sys.stdin.readline().rstrip("\r\n")
    else:
        return None
    if not text:
        raise ConfigError("the password is empty" + (f" (first line of {path})" if path else " (standard input)"))
    return text


def _show(user: dict[str, Any], show: bool) -> dict[str, Any]:
    return user if show else {**user, "password": HIDDEN}


def _done(args: argparse.Namespace, what: str, addrs: list[str]) -> int:
    print(f"{what} on {', '.join(addrs)}")
    return 0


def user_create(args: argparse.Namespace) -> int:
    password = _password(args.password_file, required=True)
    addrs = with_admin(args, lambda a: a.create_user(args.username, password or "", user_type=args.type,
                                                     cluster=args.cluster, broker_addr=args.broker))
    return _done(args, f"user {args.username} created ({args.type})", addrs)


def user_update(args: argparse.Namespace) -> int:
    password = _password(args.password_file, required=False)
    addrs = with_admin(args, lambda a: a.update_user(args.username, password=password, user_type=args.type,
                                                     user_status=args.status, cluster=args.cluster,
                                                     broker_addr=args.broker))
    return _done(args, f"user {args.username} updated", addrs)


def user_delete(args: argparse.Namespace) -> int:
    addrs = with_admin(args, lambda a: a.delete_user(args.username, cluster=args.cluster, broker_addr=args.broker))
    return _done(args, f"user {args.username} deleted", addrs)


def user_get(args: argparse.Namespace) -> int:
    user = with_admin(args, lambda a: a.get_user(args.username, cluster=args.cluster, broker_addr=args.broker))
    return _users(args, [user])


def user_list(args: argparse.Namespace) -> int:
    return _users(args, with_admin(args, lambda a: a.users(args.filter, cluster=args.cluster,
                                                           broker_addr=args.broker)))


def _users(args: argparse.Namespace, users: list[dict[str, Any]]) -> int:
    shown = [_show(u, args.show_password) for u in users]
    if args.json:
        print_json(shown)
    else:
        print_table(("USERNAME", "TYPE", "STATUS", "PASSWORD"),
                    [(u["username"], u.get("userType", ""), u.get("userStatus", ""), u.get("password", ""))
                     for u in shown])
    return 0


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def acl_set(args: argparse.Namespace) -> int:
    create = args.acl_command == "create"
    addrs = with_admin(args, lambda a: a.set_acl(
        args.subject, _split(args.resources), _split(args.actions), args.decision,
        source_ips=_split(args.source_ips), policy_type=args.policy_type, create=create, cluster=args.cluster,
        broker_addr=args.broker))
    return _done(args, f"ACL of {args.subject}: {args.decision} {args.actions} on {args.resources}", addrs)


def acl_delete(args: argparse.Namespace) -> int:
    addrs = with_admin(args, lambda a: a.delete_acl(args.subject, args.resource, policy_type=args.policy_type,
                                                    cluster=args.cluster, broker_addr=args.broker))
    return _done(args, f"ACL of {args.subject}: {args.resource or 'all'} deleted", addrs)


def acl_get(args: argparse.Namespace) -> int:
    acl = with_admin(args, lambda a: a.get_acl(args.subject, cluster=args.cluster, broker_addr=args.broker))
    return _acls(args, [acl])


def acl_list(args: argparse.Namespace) -> int:
    return _acls(args, with_admin(args, lambda a: a.acls(args.subject_filter, args.resource_filter,
                                                         cluster=args.cluster, broker_addr=args.broker)))


def _acls(args: argparse.Namespace, acls: list[dict[str, Any]]) -> int:
    if args.json:
        print_json(acls)
        return 0
    rows = [(acl["subject"], policy.get("policyType", "Custom"), e["resource"], ",".join(e.get("actions", [])),
             ",".join(e.get("sourceIps", [])) or "*", e["decision"])
            for acl in acls for policy in acl.get("policies", []) for e in policy.get("entries", [])]
    print_table(("SUBJECT", "POLICY", "RESOURCE", "ACTIONS", "SOURCE IPS", "DECISION"), rows)
    return 0


def acl_migrate(args: argparse.Namespace) -> int:
    try:
        with open(args.file, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {args.file}: {exc.strerror}") from None
    except yaml.YAMLError:
        raise AclConfigError(f"{args.file} is not valid YAML") from None
    migrated = migrate_plain_acl(data, args.file)
    acls = {acl.subject: acl.to_json() for acl in migrated.acls}
    for item in migrated.not_migrated:
        print(f"skiff: not migrated (no ACL 2.0 form): {item}", file=sys.stderr)
    if args.dry_run:
        print_json({"users": [u.to_json(with_password=False) for u in migrated.users], "acls": list(acls.values())})
        return 0

    async def apply(admin: AsyncAdmin) -> list[tuple[str, str]]:
        existing = {u["username"] for u in await admin.users(cluster=args.cluster, broker_addr=args.broker)}
        done = []
        for user in migrated.users:
            if user.username in existing:
                done.append((user.username, "exists: left alone"))
                continue
            await admin.create_user(user.username, user.password, user_type=user.type.title, cluster=args.cluster,
                                    broker_addr=args.broker)
            acl = acls.get(user.subject)
            for policy in (acl or {}).get("policies", []):
                for entry in policy["entries"]:
                    await admin.set_acl(user.subject, [entry["resource"]], entry["actions"], entry["decision"],
                                        policy_type=policy["policyType"], create=True, cluster=args.cluster,
                                        broker_addr=args.broker)
            done.append((user.username, f"created ({user.type.title}, "
                                        f"{sum(len(p['entries']) for p in (acl or {}).get('policies', []))} entries)"))
        return done
    print_table(("USER", "MIGRATED"), with_admin(args, apply))
    return 0
