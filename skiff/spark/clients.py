"""One started client of each kind per process, shared by every task and micro-batch,
and one small thread pool to overlap their calls.

Spark reuses its Python workers across tasks, batches and queries, so a client
opened once per process saves a NameServer round trip and a connection per
task. The cache lives at module level, never in a reader or writer object:
those are pickled to the executors and must stay free of sockets and threads.

The clients are Skiff's blocking clients (imported through the ``skiff.client``
facade): any number of threads may call them at once and the calls overlap on
the wire, which is what `pool` is for (a task keeps several pulls or sends in
flight). A forked child (a fresh Python worker) starts with an empty cache.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from skiff.client import Admin, Producer, PullClient

T = TypeVar("T")

POOL_THREADS = 8
"""Calls one process keeps in flight at once (pulls of a read task, sends of a write task)."""

_lock = threading.Lock()
_cache: dict[tuple[str, ...], Any] = {}
_pid = os.getpid()


def _shared(key: tuple[str, ...], factory: Callable[[], T]) -> T:
    global _pid
    with _lock:
        if os.getpid() != _pid:
            _cache.clear()
            _pid = os.getpid()
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = factory()
        return value  # type: ignore[no-any-return]


def _started(client: T) -> T:
    client.start()  # type: ignore[attr-defined]
    return client


def admin(namesrv_addr: str) -> Admin:
    return _shared(("admin", namesrv_addr), lambda: _started(Admin(namesrv_addr)))


def pull_client(namesrv_addr: str) -> PullClient:
    return _shared(("pull", namesrv_addr), lambda: _started(PullClient(namesrv_addr)))


def producer(namesrv_addr: str, group: str) -> Producer:
    return _shared(("producer", namesrv_addr, group), lambda: _started(Producer(group, namesrv_addr)))


def pool() -> ThreadPoolExecutor:
    return _shared(("pool",), lambda: ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="skiff-spark"))
