"""The start/shutdown shape every async client shares, as an ``async with`` block."""

from __future__ import annotations

import enum
from types import TracebackType
from typing import TypeVar

C = TypeVar("C", bound="AsyncClient")


class ClientState(enum.Enum):
    """Where a client is in its life: made, started, shut down (a shut-down client is not
    started again: make a new one). Its value is what error messages say."""

    CREATED = "created"
    RUNNING = "running"
    SHUT_DOWN = "shut down"

    def __str__(self) -> str:
        return self.value


class AsyncClient:
    """Base of the async clients: ``async with Client(...) as c`` starts it and shuts it down."""

    async def start(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: C) -> C:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.shutdown()
