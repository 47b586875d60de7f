"""The shared loop thread behind every blocking client."""

from __future__ import annotations

import asyncio
import threading

import pytest

from skiff.client.blocking import BlockingWrapper, LoopThread, loop_thread
from skiff.client.errors import ClientStateError, ClientTimeoutError


def test_one_shared_thread_runs_coroutines_for_many_callers():
    shared = loop_thread()
    assert loop_thread() is shared

    async def where(i: int) -> tuple[int, str]:
        await asyncio.sleep(0.001)
        return i, threading.current_thread().name

    results: list[tuple[int, str]] = []
    lock = threading.Lock()

    def caller(base: int) -> None:
        for i in range(base, base + 20):
            got = shared.run(where(i))
            with lock:
                results.append(got)

    threads = [threading.Thread(target=caller, args=(n * 100,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(i for i, _ in results) == sorted(n * 100 + i for n in range(4) for i in range(20))
    assert {name for _, name in results} == {"skiff-client-loop"}


def test_exceptions_cross_over_and_timeouts_cancel():
    thread = LoopThread("test-loop")
    try:
        async def boom() -> None:
            raise KeyError("x")

        with pytest.raises(KeyError):
            thread.run(boom())
        cancelled = asyncio.Event()

        async def slow() -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        with pytest.raises(ClientTimeoutError):
            thread.run(slow(), timeout_s=0.05)

        async def was_cancelled() -> bool:
            await asyncio.wait_for(cancelled.wait(), 5)
            return True

        assert thread.run(was_cancelled())
    finally:
        thread.stop()
    assert not thread.alive
    with pytest.raises(ClientStateError, match="stopped"):
        thread.run(asyncio.sleep(0))


def test_a_blocking_call_from_the_loop_thread_is_refused():
    shared = loop_thread()

    async def nested() -> None:
        shared.run(asyncio.sleep(0))

    with pytest.raises(ClientStateError, match="deadlock"):
        shared.run(nested())


class Counter:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.value = 0
        self.shut = False

    async def add(self, n: int) -> int:
        self.value += n
        return self.value

    async def shutdown(self) -> None:
        self.shut = True


class BlockingCounter(BlockingWrapper[Counter]):
    def __init__(self) -> None:
        super().__init__(Counter)

    def add(self, n: int) -> int:
        return self._run(self._async.add(n))


def test_wrappers_make_their_async_object_on_the_loop():
    counter = BlockingCounter()
    assert counter._async.loop is loop_thread().loop
    assert [counter.add(1) for _ in range(3)] == [1, 2, 3]
    assert counter._submit(counter._async.add(10)).result(5) == 13


def test_clients_left_open_are_shut_down_at_interpreter_exit():
    import subprocess
    import sys

    script = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format='%(name)s %(message)s')\n"
        "from skiff.client import Admin\n"
        "admin = Admin('127.0.0.1:1', instance_name='left-open')\n"
        "admin.start()\n"
        "print('started', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "started\n"
    assert "left-open shut down" in done.stderr and "Traceback" not in done.stderr
