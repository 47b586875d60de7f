"""The brokers under test, each run as a child process on 127.0.0.1.

Each server gets free ports, its own temporary data directory and its own
configuration; no system service is used. Peers run with their documented
defaults plus the one durability setting the durable table names, and each
server describes its settings in `settings` so the report can print them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from skiff.bench.compare.procs import CHILDREN, Child, free_port, log_tail, port_open, wait_port, wait_until

READY_TIMEOUT_S = 90.0
"""RabbitMQ boots an Erlang VM and its plugins; give every server the same long bound."""

IMPORT_ROOT = Path(__file__).resolve().parents[3]
"""The directory `skiff` is imported from (the checkout, in an editable install): the
working directory of every child, so that `python -m skiff...` finds this same code."""


def binary(name: str, *fallbacks: str) -> str | None:
    """Where ``name`` is installed, also looking in sbin and the given paths."""
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if found:
        return found
    return next((p for p in fallbacks if os.access(p, os.X_OK)), None)


def command_output(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (proc.stdout + proc.stderr).strip()


def dpkg_version(package: str) -> str:
    return command_output(["dpkg-query", "-W", "-f=${Version}", package]) or "unknown"


class Server(ABC):
    """One broker process (tree) with a data directory and an endpoint for clients."""

    name: str = "server"

    def __init__(self, work_dir: Path, durable: bool) -> None:
        self.work_dir = work_dir
        self.durable = durable
        self.children: list[Child] = []

    @property
    def data_dir(self) -> Path:
        return self.work_dir / "data"

    @property
    def pids(self) -> list[int]:
        """Root pids of the broker trees whose CPU and memory the report counts."""
        return [c.pid for c in self.children]

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def endpoint(self) -> dict[str, Any]:
        """What a worker needs to connect (JSON-serialisable)."""

    @abstractmethod
    def settings(self) -> str:
        """The configuration in force, in words, for the report."""

    @staticmethod
    @abstractmethod
    def version() -> str: ...

    @classmethod
    def same_when_durable(cls) -> str:
        """Why the durable table reuses the normal rows ('' when a durable setting exists)."""
        return ""

    def stop(self) -> None:
        for child in reversed(self.children):
            CHILDREN.stop(child)
        self.children.clear()

    def _spawn(self, name: str, argv: list[str], **kwargs: Any) -> Child:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        child = CHILDREN.spawn(name, argv, self.work_dir / f"{name}.log", **kwargs)
        self.children.append(child)
        return child


class RedisServer(Server):
    name = "redis"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        exe = binary("redis-server")
        assert exe, "redis-server is not installed"
        argv = [exe, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.data_dir),
                "--appendonly", "yes", "--appendfsync", self._fsync()]
        child = self._spawn("redis-server", argv)
        wait_port(self.port, child, READY_TIMEOUT_S)

    def _fsync(self) -> str:
        return "always" if self.durable else "everysec"

    def endpoint(self) -> dict[str, Any]:
        return {"host": "127.0.0.1", "port": self.port}

    def settings(self) -> str:
        return f"redis-server defaults, appendonly yes, appendfsync {self._fsync()}"

    @staticmethod
    def version() -> str:
        out = command_output([binary("redis-server") or "redis-server", "--version"])
        match = re.search(r"v=(\S+)", out)
        return match.group(1) if match else "unknown"


class NatsServer(Server):
    name = "nats"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        exe = binary("nats-server")
        assert exe, "nats-server is not installed"
        conf = self._write_conf(self.work_dir / "nats.conf", self.port, self.data_dir, self.durable)
        child = self._spawn("nats-server", [exe, "-c", str(conf)])
        log = self.work_dir / "nats-server.log"
        wait_until(lambda: "Server is ready" in log_tail(log, 200), READY_TIMEOUT_S, child, what="ready")

    @staticmethod
    def _write_conf(path: Path, port: int, data_dir: Path, sync_always: bool) -> Path:
        sync = "  sync_interval: always\n" if sync_always else ""
        path.write_text(f'listen: "127.0.0.1:{port}"\n'
                        f'jetstream {{\n  store_dir: "{data_dir}"\n{sync}}}\n')
        return path

    @classmethod
    def same_when_durable(cls) -> str:
        """`sync_interval: always` exists from nats-server 2.10; ask this binary with `-t`."""
        with tempfile.TemporaryDirectory(prefix="nats-probe-") as tmp:
            probe = cls._write_conf(Path(tmp) / "probe.conf", 4222, Path(tmp), sync_always=True)
            argv = [binary("nats-server") or "nats-server", "-c", str(probe), "-t"]
            if subprocess.run(argv, capture_output=True, timeout=30).returncode == 0:
                return ""
        return (f"nats-server {cls.version()} rejects jetstream.sync_interval (added in 2.10), so it has no "
                "fsync-per-write setting: these are the normal rows, JetStream syncing every 2 minutes")

    def endpoint(self) -> dict[str, Any]:
        return {"url": f"nats://127.0.0.1:{self.port}"}

    def settings(self) -> str:
        sync = "sync_interval always" if self.durable else "default sync_interval (2 min)"
        return f"nats-server defaults, JetStream file storage, {sync}"

    @staticmethod
    def version() -> str:
        out = command_output([binary("nats-server") or "nats-server", "--version"])
        return out.removeprefix("nats-server: v") or "unknown"


RABBIT_SCRIPT = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class RabbitServer(Server):
    """One RabbitMQ node serving both the stream and the quorum-queue workloads.

    Runs the node script directly (not the service wrapper) with its own
    Erlang port mapper on a free loopback port, so nothing binds beyond
    127.0.0.1 and nothing is left behind.
    """

    name = "rabbitmq"

    def start(self) -> None:
        self.amqp_port, self.stream_port = free_port(), free_port()
        env = self._env()
        epmd = binary("epmd")
        assert epmd, "epmd (erlang) is not installed"
        self._spawn("epmd", [epmd, "-address", "127.0.0.1", "-port", env["ERL_EPMD_PORT"]], env=env)
        child = self._spawn("rabbitmq-server", [RABBIT_SCRIPT], env=env)
        wait_port(self.stream_port, child, READY_TIMEOUT_S)
        log = self.work_dir / "rabbitmq-server.log"
        wait_until(lambda: "Server startup complete" in log_tail(log, 400), READY_TIMEOUT_S, child, "started")

    def _env(self) -> dict[str, str]:
        home, mnesia, logs = (self.work_dir / d for d in ("home", "mnesia", "log"))
        for d in (home, mnesia, logs):
            d.mkdir(parents=True, exist_ok=True)
        conf = self.work_dir / "rabbitmq.conf"
        conf.write_text(f"listeners.tcp.1 = 127.0.0.1:{self.amqp_port}\n"
                        f"stream.listeners.tcp.1 = 127.0.0.1:{self.stream_port}\n"
                        f"stream.advertised_host = 127.0.0.1\nstream.advertised_port = {self.stream_port}\n")
        plugins = self.work_dir / "enabled_plugins"
        plugins.write_text("[rabbitmq_stream].\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            HOME=str(home), ERL_EPMD_PORT=str(free_port()), ERL_EPMD_ADDRESS="127.0.0.1",
            RABBITMQ_NODENAME=f"skiffbench{self.amqp_port}@localhost", RABBITMQ_MNESIA_BASE=str(mnesia),
            RABBITMQ_LOG_BASE=str(logs), RABBITMQ_LOGS="-", RABBITMQ_CONFIG_FILE=str(conf),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(plugins), RABBITMQ_DIST_PORT=str(free_port()),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        )
        return env

    @property
    def data_dir(self) -> Path:
        return self.work_dir / "mnesia"

    def endpoint(self) -> dict[str, Any]:
        return {"host": "127.0.0.1", "amqp_port": self.amqp_port, "stream_port": self.stream_port}

    @classmethod
    def same_when_durable(cls) -> str:
        return ("a quorum queue fsyncs its Ra log before it confirms, by default, and a stream has no fsync "
                "setting (its durability is replication): the normal rows are already the durable ones")

    def settings(self) -> str:
        return ("rabbitmq-server defaults, rabbitmq_stream plugin; quorum queue (Ra log fsyncs before "
                "publisher confirms) and stream (no fsync setting), both with publisher confirms")

    @staticmethod
    def version() -> str:
        return f"{dpkg_version('rabbitmq-server')} (erlang {dpkg_version('erlang-base')})"


class SkiffServer(Server):
    """A NameServer and one broker: `skiff up` where the CLI has it, else `skiff namesrv` + `skiff broker`.

    Settings are passed as RocketMQ-named `--key=value` overrides, which every
    `skiff` server command accepts. With two processes only the broker's tree
    is measured, as `skiff up` is one process that holds both.
    """

    name = "skiff"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.namesrv_port, self.broker_port, self.kafka_port = free_port(), free_port(), free_port()
        flush = f"--flushDiskType={self.flush_type()}"
        kafka = f"--kafkaListenPort={self.kafka_port}"  # the skiff-kafka rows; idle for the others
        if skiff_has("up"):
            child = self._spawn("skiff", [*skiff_command(), "up", "--dir", str(self.data_dir), "--namesrv-port",
                                          str(self.namesrv_port), "--broker-port", str(self.broker_port), flush,
                                          "--kafka-port", str(self.kafka_port),
                                          "--metricsPort=0",  # no peer exports metrics in this comparison
                                          "--namesrv-metrics-port", "0",  # nor on its fixed 5558 (runs collide)
                                          "--no-dashboard",  # no peer serves a UI; 8080 is a fixed port
                                          "--grpcServerPort=0"],
                                cwd=IMPORT_ROOT)
            self._broker = child
            wait_port(self.namesrv_port, child, READY_TIMEOUT_S)
        else:
            namesrv = self._spawn("skiff-namesrv", [*skiff_command(), "namesrv", f"--listenPort={self.namesrv_port}",
                                                    "--listenHost=127.0.0.1"], cwd=IMPORT_ROOT)
            wait_port(self.namesrv_port, namesrv, READY_TIMEOUT_S)
            self._broker = self._spawn("skiff-broker", [
                *skiff_command(), "broker", f"--listenPort={self.broker_port}", "--brokerIP1=127.0.0.1",
                f"--namesrvAddr=127.0.0.1:{self.namesrv_port}", f"--storePathRootDir={self.data_dir}", flush, kafka,
                "--grpcServerPort=0",  # the comparison drives remoting; no gRPC port to collide on
            ], cwd=IMPORT_ROOT)
        wait_port(self.broker_port, self._broker, READY_TIMEOUT_S)
        wait_port(self.kafka_port, self._broker, READY_TIMEOUT_S)

    @property
    def pids(self) -> list[int]:
        return [self._broker.pid]

    def flush_type(self) -> str:
        return "SYNC_FLUSH" if self.durable else "ASYNC_FLUSH"

    def endpoint(self) -> dict[str, Any]:
        return {"namesrv_addr": f"127.0.0.1:{self.namesrv_port}", "broker_port": self.broker_port,
                "kafka_bootstrap": f"127.0.0.1:{self.kafka_port}"}

    def settings(self) -> str:
        return f"skiff defaults, flushDiskType={self.flush_type()}, Kafka listener on (kafkaListenPort)"

    @staticmethod
    def version() -> str:
        """The run's header names Skiff's package version and commit instead (see run.py)."""
        return "this repository"


def skiff_has(command: str) -> bool:
    """Whether this checkout's `skiff` has ``command`` (its `--help` succeeds)."""
    argv = [*skiff_command(), command, "--help"]
    return subprocess.run(argv, capture_output=True, timeout=60, cwd=IMPORT_ROOT).returncode == 0


def skiff_command() -> list[str]:
    """The `skiff` entry point next to this interpreter, else `python -m skiff`."""
    exe = Path(sys.executable).with_name("skiff")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "skiff"]
