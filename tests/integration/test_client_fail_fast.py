"""Clients fail fast, with one clear exception, when no NameServer answers: a producer's
send raises `NameServerUnavailableError` without a chain of internal frames, and a push
consumer's start() raises it instead of starting and only logging (docs/client.md)."""

from __future__ import annotations

import asyncio
import time
import traceback
from pathlib import Path

import pytest

import skiff
from skiff.client import ConsumeStatus, Message, Producer, PushConsumer
from skiff.client.errors import ClientStateError, NameServerUnavailableError
from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port

PROMPT_S = 10.0
BLOCKING_LAYER = ("blocking.py", "consumer_facade.py")
"""The blocking API's own modules: the only client frames a blocking caller's traceback shows."""
PACKAGE = Path(skiff.__file__).resolve().parent
"""Skiff's own code, wherever the checkout lives (this test file is outside it, even in a
checkout folder named `skiff`)."""


ASYNCIO = Path(asyncio.__file__).resolve().parent


def is_internal(frame: traceback.FrameSummary) -> bool:
    path = Path(frame.filename).resolve()
    return path.is_relative_to(PACKAGE) and path.name not in BLOCKING_LAYER


def is_asyncio(frame: traceback.FrameSummary) -> bool:
    return Path(frame.filename).resolve().is_relative_to(ASYNCIO)


def nobody() -> str:
    """A NameServer address where nothing listens."""
    return f"127.0.0.1:{free_port()}"


def short_and_clear(exc: BaseException) -> None:
    """The exception a user sees: its own message, no frames of the client's internals (a cause,
    if any, shown as one line), no implicit context."""
    assert exc.__suppress_context__
    cause = exc.__cause__
    while cause is not None:
        assert cause.__traceback__ is None and cause.__suppress_context__
        cause = cause.__cause__
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if is_internal(f)]
    assert inner == [] and not [f for f in frames if is_asyncio(f)], frames
    assert len(traceback.format_exception(exc)) <= 12  # a handful of lines, not a screenful


def consumer(namesrv: str, group: str, topic: str) -> PushConsumer:
    c = PushConsumer(group, namesrv)
    c.subscribe(topic, "*")
    c.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    return c


def test_producer_without_a_namesrv_raises_one_clear_exception():
    addr = nobody()
    with Producer("ff-producer", addr) as producer:
        started = time.monotonic()
        with pytest.raises(NameServerUnavailableError, match=f"no NameServer answered \\({addr}: ") as err:
            producer.send(Message.of("FF-topic", b"x"))
    assert time.monotonic() - started < PROMPT_S
    short_and_clear(err.value)


def test_push_consumer_start_without_a_namesrv_fails():
    addr = nobody()
    c = consumer(addr, "ff-group", "FF-topic")
    started = time.monotonic()
    with pytest.raises(NameServerUnavailableError, match=f"no NameServer answered \\({addr}: ") as err:
        c.start()
    assert time.monotonic() - started < PROMPT_S
    short_and_clear(err.value)
    with pytest.raises(ClientStateError):  # it shut itself down: nothing left running
        c.running_info()


def test_push_consumer_starts_before_its_topic_exists(tmp_path_factory: pytest.TempPathFactory):
    """A reachable NameServer without the topic is not a failure: the topic may come later (4.x behaviour)."""
    with Cluster(tmp_path_factory.mktemp("fail-fast")) as cluster:
        c = consumer(cluster.namesrv_addr, "ff-later", "FF-later")
        c.start()
        try:
            assert c.running_info() is not None
        finally:
            c.shutdown()
