"""Cluster: a real NameServer and brokers as `skiff` processes on 127.0.0.1, for tests.

    with Cluster(tmp_path, brokers=2, broker_args=["--flushDiskType=SYNC_FLUSH"]) as cluster:
        cluster.namesrv_addr, cluster.broker_addr(0)
        cluster.restart_broker(0)       # SIGTERM, then the same port and store again
        cluster.kill_broker(1)          # SIGKILL: what a crash leaves
        cluster.start_broker(1)

Every process picks a free port itself on first start (port 0) and prints it; a
restarted broker asks for the port it had, so clients' routes stay valid.
Broker ``i`` is named ``broker-<letter>`` and stores under ``root/broker-<letter>``.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from skiff.testing.processes import START_TIMEOUT_S, SkiffProcess, start_broker, start_namesrv


class Cluster:
    def __init__(self, root: str | Path, *, brokers: int = 1, broker_args: Sequence[str] = (),
                 namesrv_args: Sequence[str] = ()) -> None:
        self.root = Path(root)
        self.broker_count = brokers
        self.broker_extra = list(broker_args)
        self.namesrv_extra = list(namesrv_args)
        self.namesrv: SkiffProcess | None = None
        self.brokers: list[SkiffProcess | None] = [None] * brokers
        self._ports = [0] * brokers

    @staticmethod
    def broker_name(i: int) -> str:
        return f"broker-{string.ascii_lowercase[i]}"

    def store_dir(self, i: int) -> Path:
        return self.root / self.broker_name(i)

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None, "the cluster is not started"
        return self.namesrv.addr

    def broker_addr(self, i: int = 0) -> str:
        return f"127.0.0.1:{self._ports[i]}"

    def broker(self, i: int = 0) -> SkiffProcess:
        proc = self.brokers[i]
        assert proc is not None, f"broker {i} is not running"
        return proc

    def start(self) -> Cluster:
        self.namesrv = start_namesrv(*self.namesrv_extra)
        for i in range(self.broker_count):
            self.start_broker(i)
        return self

    def start_broker(self, i: int, *extra: str, timeout_s: float = START_TIMEOUT_S) -> SkiffProcess:
        proc = start_broker(self.store_dir(i), self.namesrv_addr, *self.broker_extra, *extra,
                            port=self._ports[i], name=self.broker_name(i), timeout_s=timeout_s)
        self._ports[i] = proc.port
        self.brokers[i] = proc
        return proc

    def stop_broker(self, i: int) -> int:
        """SIGTERM and wait: the broker unregisters, drains and flushes."""
        code = self.broker(i).stop()
        self.brokers[i] = None
        return code

    def kill_broker(self, i: int) -> int:
        """SIGKILL: no flush, no unregistration (a crash)."""
        code = self.broker(i).kill()
        self.brokers[i] = None
        return code

    def restart_broker(self, i: int, *extra: str) -> SkiffProcess:
        self.stop_broker(i)
        return self.start_broker(i, *extra)

    def stop(self) -> None:
        """Stop every process (brokers first); a process that will not stop is killed."""
        errors = []
        for i, proc in enumerate(self.brokers):
            if proc is not None:
                try:
                    self.stop_broker(i)
                except AssertionError as exc:
                    errors.append(exc)
        if self.namesrv is not None:
            self.namesrv.stop()
            self.namesrv = None
        if errors:
            raise errors[0]

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            self._kill_all()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self._kill_all()
        else:
            self.stop()

    def _kill_all(self) -> None:
        for proc in [*self.brokers, self.namesrv]:
            if proc is not None and proc.popen.poll() is None:
                proc.kill()
