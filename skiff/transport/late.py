"""An answer a callback gives later, without a future or a task per request.

A SYNC_MASTER send is answered when a slave acknowledges it, and one
acknowledgement, read in the HA connection's callback, answers every send it
covers. With an asyncio future per send, each answer cost the future, two done
callbacks run a loop step later, and another step's flush before its bytes left
(measured with the bench's closed loop: about 3 of the 9 µs a SYNC_MASTER message
added to the master's CPU, docs/performance.md). A handler returns a `LateAnswer`
instead; the connection registers where the answer goes, and `give` writes it from
the acknowledgement's own callback.

A `LateAnswer` is also awaitable, for callers that are coroutines (the gRPC
endpoint sends through the same path). A subclass may carry what its answer is
made from (the SYNC_MASTER send's is its own acknowledgement callback), so a
pending request costs one object.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Deliver = Callable[[Any, T], None]
"""Called with the ``request`` given to `LateAnswer.then` and the answer."""


class LateAnswer(Generic[T]):
    """One request's answer, given once by whoever finishes the request: a `RemotingCommand`
    for the remoting transport, a gRPC response for the gRPC door's callers."""

    __slots__ = ("_answer", "_deliver", "_request")

    def __init__(self) -> None:
        self._answer: T | None = None
        self._deliver: Deliver[T] | None = None
        self._request: Any = None

    @property
    def given(self) -> bool:
        return self._answer is not None

    def give(self, answer: T) -> None:
        """The answer; a second one is ignored (a closed connection's timeout, say)."""
        if self._answer is None:
            self._answer = answer
            if self._deliver is not None:
                self._deliver(self._request, answer)

    def then(self, deliver: Deliver[T], request: Any = None) -> None:
        """Where the answer goes (one place), with ``request``: called at once if it was given
        already."""
        self._deliver, self._request = deliver, request
        if self._answer is not None:
            deliver(request, self._answer)

    def __await__(self) -> Generator[Any, None, T]:
        if self._answer is not None:
            return self._answer
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def settle(_: Any, answer: T) -> None:
            if not future.done():
                future.set_result(answer)

        self.then(settle)
        return (yield from future)
