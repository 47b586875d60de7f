"""Transactional producers: `AsyncTransactionProducer` (asyncio) and `TransactionProducer` (blocking).

    def check(msg: MessageExt) -> LocalTransactionState:          # the broker asks about an open one
        return COMMIT_MESSAGE if orders.exists(msg.keys[0]) else ROLLBACK_MESSAGE

    async with AsyncTransactionProducer("orders-tx", "127.0.0.1:9876", checker=check) as producer:
        result = await producer.send_in_transaction(Message.of("Orders", b"...", keys="order-17"), place_order)
        result.local_transaction_state      # what place_order(msg, arg) answered

A transaction is RocketMQ's two-phase send (docs/transactions.md):

1. the message goes to a broker as a *half message* (``TRAN_MSG=true``, ``PGROUP``,
   the PREPARED sysFlag), stored but invisible to consumers;
2. ``local_executor(msg, arg)`` runs the local transaction and answers a
   `LocalTransactionState` (it is skipped, and the message rolled back, when the
   broker stored the half message with a caveat such as FLUSH_DISK_TIMEOUT);
3. END_TRANSACTION (oneway) tells the broker that stored it to commit (deliver),
   roll back (drop) or wait (UNKNOW). An exception in the executor counts as
   UNKNOW and is returned as ``local_error``.

For a transaction left open (UNKNOW, a lost END_TRANSACTION, a crashed producer),
the broker later asks a connected producer of the same group with
CHECK_TRANSACTION_STATE; ``checker(msg)`` answers and the producer sends
END_TRANSACTION with fromTransactionCheck. Checks run on ``check_threads``
workers; at most ``check_request_hold_max`` wait (more are dropped: the broker
asks again next round).

Plain functions run on worker threads (a slow database call never stalls the
client's event loop); coroutine functions are awaited on it. The blocking
`TransactionProducer` runs ``local_executor`` in the calling thread, as Java's does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from skiff.client._impl.api import UNREACHABLE
from skiff.client.errors import ClientConfigError, NoBrokerError
from skiff.client.blocking import BlockingGroupClient
from skiff.client.producer import AsyncProducer, Producer
from skiff.client.results import SendResult, SendStatus
from skiff.common.errors import DecodeError
from skiff.common.message import Message
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.names import TBW102
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.headers.transaction import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger(__name__)

__all__ = ["AsyncTransactionProducer", "LocalTransactionState", "TransactionProducer", "TransactionSendResult"]

CHECK_REQUEST_HOLD_MAX = 2000
"""RocketMQ's checkRequestHoldMax: checks waiting for a worker before more are dropped."""


class LocalTransactionState(enum.Enum):
    """A local transaction's answer (RocketMQ's names, UNKNOW spelling included)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_DECISIONS = {
    LocalTransactionState.COMMIT_MESSAGE: int(MessageSysFlag.TRANSACTION_COMMIT),
    LocalTransactionState.ROLLBACK_MESSAGE: int(MessageSysFlag.TRANSACTION_ROLLBACK),
    LocalTransactionState.UNKNOW: 0,
}
"""END_TRANSACTION's commitOrRollback for each state (the sysFlag transaction types)."""

LocalExecutor = Callable[[Message, Any], "LocalTransactionState | Awaitable[LocalTransactionState]"]
Checker = Callable[[StoredMessage], "LocalTransactionState | Awaitable[LocalTransactionState]"]


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """The half message's `SendResult`, plus what the local transaction answered.

    ``local_error`` is the exception the local executor raised (the state is then
    UNKNOW and the broker will ask the checker).
    """

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW
    local_error: BaseException | None = None


class LocalOutcome(NamedTuple):
    state: LocalTransactionState
    error: BaseException | None = None


def _state(value: object) -> LocalTransactionState:
    if isinstance(value, LocalTransactionState):
        return value
    try:
        return LocalTransactionState(value)
    except ValueError:
        raise TypeError(f"the local transaction answered {value!r}, not a LocalTransactionState") from None


def _failed(error: Exception) -> LocalOutcome:
    log.warning("a local transaction failed (the broker will check back): %r", error)
    return LocalOutcome(LocalTransactionState.UNKNOW, error)


def settle(call: Callable[[], object]) -> LocalOutcome:
    """Run a local transaction (or a check) here; an exception or a bad answer is UNKNOW."""
    try:
        return LocalOutcome(_state(call()))
    except Exception as exc:  # noqa: BLE001 - the user's code: any failure means "unknown"
        return _failed(exc)


async def settle_async(call: Awaitable[object]) -> LocalOutcome:
    """`settle` for a call that is awaited."""
    try:
        return LocalOutcome(_state(await call))
    except Exception as exc:  # noqa: BLE001 - the user's code: any failure means "unknown"
        return _failed(exc)


async def run_user_code(fn: Callable[..., Any], args: tuple[Any, ...],
                        pool: concurrent.futures.Executor | None = None) -> Any:
    """Await a coroutine function on this loop; run a plain function on ``pool`` (the loop's
    default pool when None), awaiting what it returns if that is awaitable."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        return await fn(*args)
    value = await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
    return await value if inspect.isawaitable(value) else value


def _check_callable(local_executor: object) -> None:
    if not callable(local_executor):
        raise TypeError(f"local_executor must be a callable (msg, arg) -> LocalTransactionState, "
                        f"not {local_executor!r}")


def skipped(half: SendResult) -> LocalOutcome | None:
    """RocketMQ's rule: a half message stored with a caveat is rolled back unexecuted."""
    return None if half.send_status is SendStatus.SEND_OK else LocalOutcome(LocalTransactionState.ROLLBACK_MESSAGE)


class AsyncTransactionProducer(AsyncProducer):
    """An `AsyncProducer` that also sends transactional messages and answers the broker's checks.

    ``topics``: topics whose brokers should know this producer from the start (their
    routes are fetched at start, as TBW102's is), so that a producer restarted before
    any send already answers checks on brokers that do not auto-create topics.
    """

    def __init__(self, group: str, namesrv_addr: str = "", *, checker: Checker, check_threads: int = 1,
                 check_request_hold_max: int = CHECK_REQUEST_HOLD_MAX, topics: Sequence[str] = (),
                 **options: Any) -> None:
        super().__init__(group, namesrv_addr, **options)
        if not callable(checker):
            raise ClientConfigError("checker must be a callable: checker(msg) -> LocalTransactionState")
        if check_threads < 1 or check_request_hold_max < 1:
            raise ClientConfigError("check_threads and check_request_hold_max must be 1 or more")
        self._checker = checker
        self._check_threads = check_threads
        self._hold_max = check_request_hold_max
        self._topics = tuple(topics)
        self._checks: asyncio.Queue[tuple[str, StoredMessage, CheckTransactionStateRequestHeader]] = (
            asyncio.Queue(check_request_hold_max))
        """Checks waiting for a worker; they may arrive as soon as `start` has sent its first heartbeat."""
        self._workers: list[asyncio.Task[None]] = []
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    async def start(self) -> None:
        """Start the producer and its check workers; greet the brokers of TBW102 and ``topics``."""
        await super().start()
        self._pool = concurrent.futures.ThreadPoolExecutor(self._check_threads,
                                                           thread_name_prefix=f"skiff-check-{self.group}")
        self._workers = [asyncio.ensure_future(self._check_worker()) for _ in range(self._check_threads)]
        await self._greet_brokers()

    async def shutdown(self) -> None:
        """Stop the check workers, then unregister; checks not answered yet are dropped: the
        broker asks a producer of the group again next round."""
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        await super().shutdown()

    async def _greet_brokers(self) -> None:
        instance = self._running().instance
        for topic in (TBW102, *self._topics):
            try:
                await instance.routes.update(topic)
            except Exception as exc:  # noqa: BLE001 - greeting is best effort; sends route later
                log.info("no route for %s yet: %s", topic, exc)
        await instance.heartbeat_all_brokers()

    # -- sending ----------------------------------------------------------------

    async def send_in_transaction(self, msg: Message, local_executor: LocalExecutor,
                                  arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``local_executor(msg, arg)``, and commit or roll
        back as it answers (UNKNOW leaves the decision to the checker)."""
        _check_callable(local_executor)
        half = await self.send_half(msg)
        outcome = skipped(half) or await settle_async(run_user_code(local_executor, (msg, arg)))
        return await self.end_transaction(half, outcome)

    async def send_half(self, msg: Message) -> SendResult:
        """Phase one alone: store ``msg`` as this group's half message (retried like any send)."""
        core = self._running()
        core.check_message(msg)
        half = msg.with_properties(**{Prop.TRAN_MSG: "true", Prop.PGROUP: self.group})
        return await core.send(core.prepare(half), msg=half)

    async def end_transaction(self, half: SendResult, outcome: LocalOutcome) -> TransactionSendResult:
        """Phase two alone: END_TRANSACTION to the master that stored ``half``. A failure to
        send it is logged, not raised: the broker will ask the checker instead."""
        try:
            offset = decode_offset_msg_id(half.offset_msg_id).physical_offset
            addr = self._running().instance.routes.require_master(half.message_queue.broker_name)
        except (DecodeError, NoBrokerError) as exc:
            log.warning("END_TRANSACTION for %s not sent: %s; the broker will check back", half.msg_id, exc)
        else:
            await self._send_end(addr, half.queue_offset, offset, outcome, half.msg_id,
                                 half.transaction_id or half.msg_id, from_check=False)
        fields = {f.name: getattr(half, f.name) for f in dataclasses.fields(SendResult)}
        return TransactionSendResult(**fields, local_transaction_state=outcome.state, local_error=outcome.error)

    async def _send_end(self, addr: str, table_offset: int, commit_log_offset: int, outcome: LocalOutcome,
                        msg_id: str, transaction_id: str | None, *, from_check: bool) -> None:
        header = EndTransactionRequestHeader(self.group, table_offset, commit_log_offset, _DECISIONS[outcome.state],
                                             msg_id, from_check, transaction_id)
        remark = None if outcome.error is None else f"the local transaction failed: {outcome.error!r}"
        try:
            await self._running().instance.api.end_transaction(addr, header, remark)
        except UNREACHABLE as exc:
            log.warning("END_TRANSACTION for %s to %s failed: %s; the broker will check back", msg_id, addr, exc)

    # -- checks from brokers ------------------------------------------------------

    def check_transaction_state(self, broker_addr: str, msg: StoredMessage,
                                header: CheckTransactionStateRequestHeader) -> None:
        """Called by the client instance for CHECK_TRANSACTION_STATE: queue it for a worker."""
        try:
            self._checks.put_nowait((broker_addr, msg, header))
        except asyncio.QueueFull:
            log.warning("dropping the check of %s from %s: %d checks wait already (check_request_hold_max)",
                        msg.msg_id, broker_addr, self._hold_max)

    async def _check_worker(self) -> None:
        while True:
            addr, msg, header = await self._checks.get()
            try:
                outcome = await settle_async(run_user_code(self._checker, (msg,), self._pool))
                await self._send_end(addr, header.tran_state_table_offset, header.commit_log_offset, outcome,
                                     msg.msg_id, header.transaction_id, from_check=True)
            except Exception:  # noqa: BLE001 - one failed check must not end the worker
                log.exception("answering the check of %s from %s failed", msg.msg_id, addr)


class TransactionProducer(Producer):
    """The blocking `AsyncTransactionProducer`: same constructor and methods, and
    ``local_executor`` runs in the calling thread (a plain function) as in Java's client."""

    def __init__(self, group: str, namesrv_addr: str = "", **options: Any) -> None:
        BlockingGroupClient.__init__(self, lambda: AsyncTransactionProducer(group, namesrv_addr, **options))

    def send_in_transaction(self, msg: Message, local_executor: LocalExecutor,
                            arg: Any = None) -> TransactionSendResult:
        _check_callable(local_executor)
        half = self._run(self._async.send_half(msg))  # type: ignore[attr-defined]
        outcome = skipped(half) or settle(lambda: self._here(local_executor, msg, arg))
        return self._run(self._async.end_transaction(half, outcome))  # type: ignore[attr-defined]

    def _here(self, fn: LocalExecutor, msg: Message, arg: Any) -> object:
        value = fn(msg, arg)
        return self._run(_awaited(value)) if inspect.isawaitable(value) else value


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value
