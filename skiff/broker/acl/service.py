"""AclService: plain_acl.yml loaded at start, reloaded when it changes, and a guard
in front of every request handler of the broker.

The file is checked every ``aclReloadInterval`` ms (its mtime, size and inode). A
changed file that parses replaces the accounts at once; one that does not is
logged and the previous accounts stay, so a half-saved edit never opens the
broker. A missing or bad file at start is a `ConfigError`: the broker does not
start without the ACL it was told to enforce.

Refusals answer NO_PERMISSION (16) with the reason and are logged at WARNING
with the peer's address.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from skiff.broker.acl.plain_config import AclConfigError, PlainAclConfig, parse_plain_acl
from skiff.broker.acl.validator import refusal
from skiff.common.service import Periodic
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.transport.connection import Connection, Handler, HandlerResult

log = logging.getLogger(__name__)

FileStamp = tuple[int, int, int]


class AclService:
    """Holds the current accounts; `guard` wraps handlers so each request is checked first."""

    def __init__(self, path: str, reload_interval_ms: int) -> None:
        self.path = path
        self.reload_interval_ms = reload_interval_ms
        self.config = PlainAclConfig()
        self.refused = 0
        """Requests refused since start (a metric)."""
        self._stamp: FileStamp | None = None
        self._watch: Periodic | None = None
        self.on_load: Callable[[PlainAclConfig, Any], None] = lambda config, data: None
        """Told each config that loads, with its YAML document (the gRPC door's copy of the
        accounts, as ACL 2.0 users and policies)."""
        self.data: Any = None
        """The YAML document in force."""

    def load(self) -> None:
        """Read the file now; `AclConfigError` (a `ConfigError`) says why it cannot be used."""
        stamp = _stamp(self.path)
        if stamp is None:
            raise AclConfigError(f"aclEnable=true but the ACL file {self.path} does not exist (plainAclFile)")
        try:
            with open(self.path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except OSError as exc:
            raise AclConfigError(f"cannot read the ACL file {self.path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise AclConfigError(f"the ACL file {self.path} is not valid YAML{where}") from None
        self.config = parse_plain_acl(data, self.path)
        self.data = data
        self._stamp = stamp
        self.on_load(self.config, data)
        log.info("ACL loaded from %s: %d accounts, %d global white addresses", self.path,
                 len(self.config.accounts), len(self.config.global_white))

    def start(self) -> None:
        self._watch = Periodic("acl-reload", self.reload_interval_ms / 1000.0, self.reload_if_changed)
        self._watch.start()

    async def stop(self) -> None:
        if self._watch is not None:
            await self._watch.stop()
            self._watch = None

    def reload_if_changed(self) -> None:
        if _stamp(self.path) == self._stamp:
            return
        try:
            self.load()
        except AclConfigError as exc:
            self._stamp = _stamp(self.path)
            log.error("ACL file changed but is not used, the previous accounts stay: %s", exc)

    def guard(self, handlers: Mapping[int, Handler]) -> dict[int, Handler]:
        """Every handler behind the ACL check."""
        return {code: self._guarded(handler) for code, handler in handlers.items()}

    def _guarded(self, handler: Handler) -> Handler:
        def checked(conn: Connection, cmd: RemotingCommand) -> HandlerResult:
            reason = refusal(self.config, str(conn.peer[0]), cmd)
            if reason is None:
                return handler(conn, cmd)
            self.refused += 1
            log.warning("ACL refused request code %d from %s: %s", cmd.code, conn.peer_addr, reason)
            return cmd.response(ResponseCode.NO_PERMISSION, reason)
        return checked


def _stamp(path: str) -> FileStamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
