"""The blocking facade's one mechanism: a shared event loop on a background thread.

Every blocking client (`Producer`, `PushConsumer`, `LitePullConsumer`,
`PullClient`, `Admin`) wraps its async twin, made on this loop, and runs each
call there with `LoopThread.run`. One loop for all of them means one set of
connections per client instance, and any number of user threads may call in
at once (the loop serialises them; the calls themselves overlap on the wire).

The thread starts on first use (`loop_thread()`) and is a daemon; at
interpreter exit the wrappers still open are shut down (unregistering from
brokers, committing offsets) before the loop stops.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import inspect
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from skiff.client.errors import ClientStateError, ClientTimeoutError
from skiff.common.errors import SkiffError
from skiff.transport.loop import loop_factory

log = logging.getLogger(__name__)


class AsyncLifecycle(Protocol):
    """What `BlockingClient` drives: an async client started and shut down on the loop."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


class AsyncGroupMember(AsyncLifecycle, Protocol):
    """What `BlockingGroupClient` drives: an async producer or consumer of a group."""

    @property
    def group(self) -> str: ...

    @property
    def client_id(self) -> str | None: ...


T = TypeVar("T")
A = TypeVar("A")
L = TypeVar("L", bound=AsyncLifecycle)
G = TypeVar("G", bound=AsyncGroupMember)
W = TypeVar("W", bound="BlockingClient[Any]")

EXIT_TIMEOUT_S = 10.0
"""How long interpreter exit waits for the open clients to shut down."""


class LoopThread:
    """An event loop (uvloop when installed) running forever on a daemon thread."""

    def __init__(self, name: str = "skiff-client-loop") -> None:
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        loop = loop_factory()()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self._loop is not None and not self._loop.is_closed()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; the returned future is thread-safe."""
        if not self.alive:
            coro.close()
            raise ClientStateError("the client event loop has stopped (the interpreter is exiting)")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (or its exception).

        ``timeout_s`` bounds the wait and cancels ``coro`` when it passes
        (`ClientTimeoutError`); None waits as long as ``coro``'s own timeouts allow.
        Calling from the loop's own thread would deadlock and raises instead.
        """
        if self.in_loop_thread():
            coro.close()
            raise ClientStateError("a blocking client call from the client's event-loop thread would "
                                   "deadlock; use the async API (AsyncProducer, ...) in coroutines")
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ClientTimeoutError(f"the call did not finish within {timeout_s} s") from None
        except SkiffError as exc:
            # an expected failure (no NameServer, a refused send, a bad name) says all in its message;
            # the loop's frames would only bury it. Its cause stays (SendFailedError's last error),
            # as one line. Bugs keep their whole traceback.
            _without_frames(exc)
            raise exc
        except BaseException:
            future.cancel()
            raise

    def call(self, fn: Callable[[], T]) -> T:
        """Run the plain function ``fn`` on the loop's thread (to make objects bound to the loop)."""
        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.alive:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout_s)


def _without_frames(exc: BaseException) -> None:
    """Drop the client's frames from ``exc`` and its explicit causes; hide implicit context."""
    seen: BaseException | None = exc
    while seen is not None:
        seen.__traceback__ = None
        seen.__suppress_context__ = True
        seen = seen.__cause__


_lock = threading.Lock()
_shared: LoopThread | None = None
_open: weakref.WeakSet[BlockingWrapper[Any]] = weakref.WeakSet()


def loop_thread() -> LoopThread:
    """The process's shared client loop thread, started on first use."""
    global _shared
    with _lock:
        if _shared is None or not _shared.alive:
            _shared = LoopThread()
        return _shared


class BlockingWrapper(Generic[A]):
    """Base of the blocking clients: an async object made and driven on the shared loop.

    Subclasses call ``self._run(self._async.method(...))`` for each method;
    `_close_at_exit` is what interpreter exit awaits for a wrapper still open.
    """

    def __init__(self, factory: Callable[[], A]) -> None:
        self._thread = loop_thread()
        self._async: A = self._thread.call(factory)
        _open.add(self)

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return self._thread.run(coro, timeout_s)

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return self._thread.submit(coro)

    def _closed(self) -> None:
        """Subclasses call this once shut down, so exit does not shut them down again."""
        _open.discard(self)

    def _close_at_exit(self) -> Awaitable[None] | None:
        shutdown = getattr(self._async, "shutdown", None)
        return shutdown() if shutdown is not None else None


class BlockingClient(BlockingWrapper[L]):
    """A wrapper of an async client with ``start()``/``shutdown()``; also a context manager."""

    def start(self) -> None:
        self._run(self._async.start())

    def shutdown(self) -> None:
        self._run(self._async.shutdown())
        self._closed()

    def __enter__(self: W) -> W:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()


class BlockingGroupClient(BlockingClient[G]):
    """A blocking producer or consumer: a member of a group with a client id once started."""

    @property
    def group(self) -> str:
        return str(self._async.group)

    @property
    def client_id(self) -> str | None:
        return self._async.client_id


def mirror(async_cls: type, *names: str) -> Callable[[type[W]], type[W]]:
    """Class decorator for a `BlockingClient`: for each coroutine method of ``async_cls``
    named, a blocking method with the same signature and docstring that runs it on the loop."""
    def decorate(cls: type[W]) -> type[W]:
        for name in names:
            setattr(cls, name, _blocking_method(getattr(async_cls, name)))
        return cls

    return decorate


def _blocking_method(method: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    if not inspect.iscoroutinefunction(method):
        raise TypeError(f"{method.__qualname__} is not a coroutine function")

    @functools.wraps(method)
    def blocking(self: BlockingWrapper[Any], *args: Any, **kwargs: Any) -> T:
        return self._run(method(self._async, *args, **kwargs))

    return blocking


async def _close_all(wrappers: list[BlockingWrapper[Any]]) -> None:
    awaitables = [a for a in (w._close_at_exit() for w in wrappers) if a is not None]
    results = await asyncio.gather(*awaitables, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            log.warning("closing a client at exit failed: %s", result)


@atexit.register
def _at_exit() -> None:
    shared = _shared
    if shared is None or not shared.alive:
        return
    wrappers = list(_open)
    if wrappers:
        try:
            shared.run(_close_all(wrappers), EXIT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - exit goes on whatever happens
            log.warning("closing clients at exit: %s", exc)
    shared.stop()
