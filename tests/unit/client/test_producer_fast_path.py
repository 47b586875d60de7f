"""The single send's fast path gives what the general one did: the send header's extFields
built from a cached part equal the header class's `to_ext()` (same keys, same order), the
result read from the raw answer equals `make_result` of `MQClientAPI.send`'s answer, the
route is taken without a coroutine only when nothing has to be fetched or waited for, and
a producer that does not trace sends without the tracer's wrapper."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from skiff.client._impl.api import SendResponse
from skiff.client._impl.config import ClientConfig
from skiff.client._impl.producer_impl import (
    Prepared,
    ProducerCore,
    ProducerOptions,
    _send_result,
    make_result,
)
from skiff.client._impl.route import RouteCache
from skiff.client._impl.trace_hooks import SendTracer
from skiff.client.results import SendResult, SendStatus, _slot_maker, make_send_result
from skiff.client.trace import TraceSettings
from skiff.common.clock import ManualClock
from skiff.common.message import Message, MessageQueue
from skiff.common.properties import Prop
from skiff.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import ResponseError, error_for, raise_for_response
from skiff.protocol.headers.send import SendMessageResponseHeader


def core(**options) -> ProducerCore:
    return ProducerCore(ProducerOptions("PG", **options), instance=None, clock=ManualClock())  # type: ignore[arg-type]


def cases(c: ProducerCore) -> list[Prepared]:
    return [
        c.prepare(Message.of("T", b"x")),
        c.prepare(Message.of("T", b"y" * 5000, tags="A", keys="k", flag=7)),
        c.prepare(Message.of("T", b"z", properties={Prop.TRAN_MSG: "true", "PGROUP": "PG"})),
        c.prepare(Message.of("%RETRY%G", b"r", properties={Prop.RECONSUME_TIME: "3", Prop.MAX_RECONSUME_TIMES: "16"})),
        c.prepare(Message.of("%RETRY%G", b"r", properties={Prop.RECONSUME_TIME: "1"})),
        *c.prepare_batch([Message.of("T", b"a"), Message.of("T", b"b")]),
    ]


@pytest.mark.parametrize("queue", [MessageQueue("T", "b", 0), MessageQueue("T", "b", 5), MessageQueue("Other", "c", 2)])
def test_the_cached_ext_equals_the_headers_own_in_keys_and_order(queue):
    c = core(default_topic_queue_nums=8)
    for prepared in cases(c):
        for _ in range(2):  # built, then from the cache
            ext = c._send_ext(prepared, queue)
            want = c._header(prepared, queue).to_ext()
            assert list(ext.items()) == list(want.items())
        c.clock.advance(5)  # type: ignore[attr-defined]
        assert c._send_ext(prepared, queue) == c._header(prepared, queue).to_ext()


def test_each_send_gets_its_own_ext():
    c = core()
    prepared = c.prepare(Message.of("T", b"x"))
    mq = MessageQueue("T", "b", 1)
    first = c._send_ext(prepared, mq)
    first["extra"] = "signed"  # the request's dict is its own (signing adds keys to it)
    assert "extra" not in c._send_ext(prepared, mq)


def answer(code: int, ext: dict[str, str]) -> RemotingCommand:
    return RemotingCommand(code, opaque=3, flag=1, ext_fields=ext, remark="why")


@pytest.mark.parametrize("code", [ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                                  ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE])
@pytest.mark.parametrize("ext", [
    {"msgId": "0A00", "queueId": "2", "queueOffset": "17"},
    {"msgId": "0A00", "queueId": "5", "queueOffset": "17", "MSG_REGION": "east", "TRACE_ON": "false"},
    {"msgId": "0A00,0A01", "queueId": "2", "queueOffset": "0", "transactionId": "tx", "MSG_REGION": ""},
])
def test_the_result_read_from_the_answer_equals_make_result(code, ext):
    mq = MessageQueue("T", "b", 2)
    resp = answer(code, ext)
    checked = raise_for_response(resp, (code,))
    e = checked.ext_fields or {}
    want = make_result(SendResponse(checked.code, SendMessageResponseHeader.from_ext(e), e.get("MSG_REGION"),
                                    e.get("TRACE_ON")), mq, "UNIQ")
    got = _send_result(resp, mq, "UNIQ")
    assert got == want
    assert type(got.message_queue) is MessageQueue


def test_an_error_answer_raises_what_raise_for_response_raises():
    for code in (ResponseCode.SYSTEM_BUSY, ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION):
        with pytest.raises(ResponseError) as raised:
            _send_result(answer(code, {}), MessageQueue("T", "b", 0), "UNIQ")
        assert type(raised.value) is type(error_for(code, "why")) and raised.value.code == code
        assert raised.value.remark == "why"


def route(masters: tuple[str, ...] = ("a", "b")) -> TopicRouteData:
    brokers = tuple(BrokerData("C", name, {0: f"10.0.0.{i}:10911"} if name in masters else {1: f"10.0.1.{i}:10911"})
                    for i, name in enumerate(("a", "b")))
    return TopicRouteData((QueueData("a", 4, 4, 6), QueueData("b", 4, 4, 6)), brokers, {}, None)


def test_the_route_is_taken_at_once_only_when_nothing_has_to_wait():
    cache = RouteCache(None)  # type: ignore[arg-type]
    assert cache.writable_now("T") is None  # no route yet: fetch it
    cache._store("T", route())
    info = cache.writable_now("T")
    assert info is not None and len(info.queues) == 8
    assert asyncio.run(cache.writable_publish_info("T", 1.0)) is info
    cache.mark_stale("T")
    assert cache.writable_now("T") is None  # stale: fetch it again
    cache._store("U", route(masters=("a",)))
    cache._stale.discard("T")
    assert cache.writable_now("T") is None  # a group without a master: filter or wait
    cache._store("U", route())
    assert cache.writable_now("T") is info


def test_a_producer_that_does_not_trace_sends_without_a_wrapper():
    async def send():
        return None

    off = SendTracer("PG", None, ClientConfig("127.0.0.1:9876"))
    coro = send()
    assert off.timed(Message.of("T", b"x"), coro) is coro  # type: ignore[arg-type]
    coro.close()
    on = SendTracer("PG", TraceSettings(), ClientConfig("127.0.0.1:9876"))
    coro = send()
    wrapped = on.timed(Message.of("T", b"x"), coro)  # type: ignore[arg-type]
    assert wrapped is not coro
    wrapped.close()
    coro.close()


@pytest.mark.parametrize("values", [
    (SendStatus.SEND_OK, "UNIQ", "0A00", MessageQueue("T", "b", 2), 17, None, "DefaultRegion", True),
    (SendStatus.FLUSH_DISK_TIMEOUT, "A,B", "0A00,0A01", MessageQueue("T", "c", 0), 0, "tx", "east", False),
])
def test_a_made_send_result_is_the_one_its_init_makes(values):
    made, want = make_send_result(*values), SendResult(*values)
    assert type(made) is SendResult and made == want and hash(made) == hash(want) and repr(made) == repr(want)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.queue_offset = 3  # type: ignore[misc]
    assert dataclasses.replace(made, queue_offset=3).queue_offset == 3


def test_a_class_whose_init_does_more_is_not_made_by_slots():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived:
        n: int
        twice: int = dataclasses.field(init=False, default=0)

    for cls in (Checked, Derived):
        with pytest.raises(TypeError, match="does more than set"):
            _slot_maker(cls)
