"""What the push and the lite pull consumers' public classes share: the group
check, the client config, the created → running → shut down states, and the
context-manager and blocking-wrapper plumbing."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from skiff.client._impl.config import ClientConfig, client_config_for
from skiff.client.credentials import Credentials
from skiff.client.blocking import BlockingWrapper
from skiff.client.errors import ClientConfigError, ClientStateError
from skiff.client._impl.lifecycle import ClientState
from skiff.common.names import group_error


class _HasInstance(Protocol):
    @property
    def instance(self) -> Any: ...


class AsyncConsumerBase:
    """``_impl`` is the running engine (None before start and after shutdown)."""

    _impl: _HasInstance | None

    def __init__(self, group: str, namesrv_addr: str, instance_name: str, client_config: ClientConfig | None,
                 credentials: Credentials | None = None) -> None:
        problem = group_error(group)
        if problem:
            raise ClientConfigError(f"consumer group: {problem}")
        self.group = group
        self.client_config = client_config_for(namesrv_addr, instance_name, client_config, credentials)
        self._impl = None
        self._state = ClientState.CREATED

    @property
    def client_id(self) -> str | None:
        return self._impl.instance.client_id if self._impl is not None else None

    def _check_created(self, what: str) -> None:
        if self._state is not ClientState.CREATED:
            raise ClientStateError(f"cannot {what}: the consumer is {self._state}")

    async def start(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.shutdown()


C = TypeVar("C", bound=AsyncConsumerBase)


class BlockingConsumerBase(BlockingWrapper[C], Generic[C]):
    """start/shutdown/with of a blocking consumer, run on the shared client loop."""

    @property
    def group(self) -> str:
        return self._async.group

    @property
    def client_id(self) -> str | None:
        return self._async.client_id

    def start(self) -> None:
        self._run(self._async.start())

    def shutdown(self) -> None:
        self._run(self._async.shutdown())
        self._closed()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()
