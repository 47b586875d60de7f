"""Key/value configs by namespace (RocketMQ's KVConfigManager).

The one namespace RocketMQ itself reads is ORDER_TOPIC_CONFIG: its value for a
topic (``"broker-a:4;broker-b:4"``) becomes the route's orderTopicConf. With a
path, the table persists as ``{"configTable": {namespace: {key: value}}}``
(RocketMQ's kvConfig.json), rewritten atomically on every change.
"""

from __future__ import annotations

import logging
from pathlib import Path

import orjson

from skiff.common.errors import ConfigError
from skiff.common.files import replace_atomically

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KvConfigStore:
    """Namespaced string settings, in memory and optionally in one JSON file."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = Path(path) if path else None
        self._table: dict[str, dict[str, str]] = {}

    @property
    def path(self) -> Path | None:
        return self._path

    def load(self) -> None:
        """Read the file if there is one; `ConfigError` when it is unreadable or not the format."""
        if self._path is None or not self._path.exists():
            return
        try:
            data = orjson.loads(self._path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"kvConfigPath {self._path}: cannot load: {exc}") from exc
        table = data.get("configTable") if isinstance(data, dict) else None
        if not isinstance(table, dict) or not all(
            isinstance(kv, dict) and all(isinstance(v, str) for v in kv.values()) for kv in table.values()
        ):
            raise ConfigError(f"kvConfigPath {self._path}: not a {{\"configTable\": {{...}}}} file")
        self._table = {ns: dict(kv) for ns, kv in table.items()}

    def put(self, namespace: str, key: str, value: str) -> None:
        self._table.setdefault(namespace, {})[key] = value
        self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        table = self._table.get(namespace)
        if table is None or table.pop(key, None) is None:
            return False
        if not table:
            del self._table[namespace]
        self._persist()
        return True

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace's table, or None when it has no entries."""
        table = self._table.get(namespace)
        return dict(table) if table else None

    def _persist(self) -> None:
        if self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(self._path, orjson.dumps({"configTable": self._table}, option=orjson.OPT_INDENT_2))
