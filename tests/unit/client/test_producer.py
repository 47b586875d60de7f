"""The producer's kernel: validation, encoding, batch splitting, and what a send
does on each kind of broker answer. Sends go over real sockets to an in-process
NameServer and in-process remoting servers that answer SEND the way the test
scripts them (tests/integration has the same features against real brokers)."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from skiff.client import AsyncProducer, Message, MessageQueue, SelectByHash, SendStatus
from skiff.client._impl.config import ClientConfig
from skiff.client._impl.producer_impl import ProducerCore, ProducerOptions
from skiff.client.errors import ClientConfigError, ClientStateError, MessageValidationError, SendFailedError
from skiff.common.msgid import UniqIdGenerator
from skiff.common.properties import Prop, decode_properties
from skiff.namesrv import NamesrvConfig, NamesrvServer
from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import MessageIllegalError
from skiff.protocol.headers.send import SendMessageRequestHeaderV2, SendMessageResponseHeader
from skiff.protocol.message_codec import decode_batch, encode_batch
from skiff.transport import RemotingServer
from skiff.transport.loop import run_coroutine
from tests.unit.transport._support import wait_until


def core(**options) -> ProducerCore:
    return ProducerCore(ProducerOptions("PG", **options), instance=None)  # type: ignore[arg-type]


def test_prepare_sets_uniq_key_wait_and_compresses_large_bodies():
    c = core()
    small = c.prepare(Message.of("T", b"x" * 4095, tags="A", keys=["k1", "k2"], properties={"u": "1"}))
    props = decode_properties(small.properties)
    assert props[Prop.UNIQ_KEY] == small.msg_id and len(small.msg_id) == 32
    assert props[Prop.WAIT] == "true" and props[Prop.TAGS] == "A" and props[Prop.KEYS] == "k1 k2" and props["u"] == "1"
    assert small.sys_flag == 0 and small.body == b"x" * 4095
    big = c.prepare(Message.of("T", b"y" * 4096))
    assert big.sys_flag & 1 and zlib.decompress(big.body) == b"y" * 4096
    mine = c.prepare(Message.of("T", b"z", properties={Prop.UNIQ_KEY: "MYID"}))
    assert mine.msg_id == "MYID"
    assert not core(compress_body_over_bytes=1 << 20).prepare(Message.of("T", b"y" * 4096)).sys_flag & 1
    retry = c.prepare(Message.of("%RETRY%G", b"z", properties={Prop.RECONSUME_TIME: "3", Prop.MAX_RECONSUME_TIMES: "16"}))
    assert (retry.reconsume_times, retry.max_reconsume_times) == (3, 16)


@pytest.mark.parametrize(("msg", "reason"), [
    (Message.of("T", b""), "body is empty"),
    (Message.of("T", b"x" * 101), "more than max_message_size"),
    (Message.of("bad topic", b"x"), "characters"),
    (Message.of("", b"x"), "topic is empty"),
    (Message.of("TBW102", b"x"), "system topic"),
    (Message.of("T" * 128, b"x"), "more than the 127"),
    (Message.of("T", b"x", properties={"a\x01b": "c"}), "separator"),
    (Message.of("%RETRY%G", b"x", properties={Prop.RECONSUME_TIME: "x"}), "not a whole number"),
])
def test_bad_messages_are_refused_with_the_reason(msg, reason):
    with pytest.raises(MessageValidationError, match=reason):
        core(max_message_size=100).prepare(msg)


def test_an_empty_body_with_keys_is_a_tombstone():
    prepared = core().prepare(Message.of("T", b"", keys="k1"))
    assert prepared.body == b"" and "k1" in prepared.properties


def test_bad_options_are_refused():
    with pytest.raises(ClientConfigError, match="group"):
        ProducerOptions("")
    with pytest.raises(ClientConfigError, match="send_timeout_ms"):
        ProducerOptions("G", send_timeout_ms=0)


def test_batches_split_to_the_size_limit_and_keep_every_message():
    c = core(max_message_size=10_000)
    msgs = [Message.of("T", bytes([i]) * 1000, tags=f"t{i}", keys=f"k{i}") for i in range(25)]
    chunks = c.prepare_batch(msgs)
    assert len(chunks) > 1 and all(len(ch.body) <= 10_000 for ch in chunks)
    decoded = [m for ch in chunks for m in decode_batch(ch.body, "T")]
    assert [m.body for m in decoded] == [m.body for m in msgs]
    assert [m.tags for m in decoded] == [f"t{i}" for i in range(25)]
    ids = [i for ch in chunks for i in ch.msg_id.split(",")]
    assert ids == [m.properties[Prop.UNIQ_KEY] for m in decoded] and len(set(ids)) == 25
    assert all(ch.batch and decode_properties(ch.properties) == {Prop.WAIT: "true"} for ch in chunks)


def test_a_batch_of_bare_messages_is_encoded_as_the_general_path_encodes_it():
    c = ProducerCore(ProducerOptions("PG"), instance=None,  # type: ignore[arg-type]
                     uniq_ids=UniqIdGenerator(ip=b"\x0a\x00\x00\x01", pid=7))
    msgs = [Message("T", bytes([i % 256]) * (i + 1), flag=i) for i in range(300)]
    (chunk,) = c.prepare_batch(msgs)
    ids = chunk.msg_id.split(",")
    assert len(set(ids)) == 300 and all(len(i) == 32 and i.startswith("0A0000010007") for i in ids)
    assert chunk.body == encode_batch(msgs, iter(ids).__next__)
    decoded = decode_batch(chunk.body, "T")
    assert [(m.body, m.flag, m.properties[Prop.UNIQ_KEY]) for m in decoded] == [
        (m.body, m.flag, i) for m, i in zip(msgs, ids)]
    mixed = [*msgs[:2], Message.of("T", b"own", keys="k", properties={Prop.UNIQ_KEY: "OWN"})]
    (general,) = c.prepare_batch(mixed)
    assert general.msg_id.split(",")[2] == "OWN" and decode_batch(general.body, "T")[2].keys == ["k"]


@pytest.mark.parametrize(("msgs", "reason"), [
    ([Message("A", b"1"), Message("A", b"")], "body is empty"),
    ([Message("A", b"1"), Message("A", b"x" * 11)], "more than max_message_size"),
    ([Message("A", b"1"), "not a message"], "expected a Message"),
    ([Message("A", b"1"), Message("B", b"2")], "one topic"),
])
def test_a_batch_that_fails_the_screen_is_refused_for_what_is_wrong(msgs, reason):
    with pytest.raises(MessageValidationError, match=reason):
        core(max_message_size=10).prepare_batch(msgs)


def test_batches_split_to_the_count_limit():
    chunks = core().prepare_batch([Message.of("T", b"m") for _ in range(4097)])
    assert [len(ch.msg_id.split(",")) for ch in chunks] == [4096, 1]


@pytest.mark.parametrize(("msgs", "reason"), [
    ([], "empty"),
    ([Message.of("A", b"1"), Message.of("B", b"2")], "one topic"),
    ([Message.of("A", b"1", delay_level=3)], "delayed"),
    ([Message.of("%RETRY%G", b"1")], "retry topic"),
    ([Message.of("A", b"1"), Message.of("A", b"2", properties={Prop.WAIT: "false"})], "WAIT"),
])
def test_bad_batches_are_refused(msgs, reason):
    with pytest.raises(MessageValidationError, match=reason):
        core().prepare_batch(msgs)


class ScriptedBroker:
    """Answers SEND with the code ``answer(header)`` returns; records what it got."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sends: list[tuple[int, SendMessageRequestHeaderV2, bytes]] = []
        self.answer = lambda header: ResponseCode.SUCCESS
        self.delay_s = 0.0
        self.offset = 0
        ok = lambda conn, req: req.response()  # noqa: E731
        self.server = RemotingServer("127.0.0.1", 0, {
            RequestCode.SEND_MESSAGE_V2: self.send, RequestCode.SEND_BATCH_MESSAGE: self.send,
            RequestCode.HEART_BEAT: ok, RequestCode.UNREGISTER_CLIENT: ok,
        })

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def send(self, conn, req: RemotingCommand) -> RemotingCommand:
        header = SendMessageRequestHeaderV2.from_ext(req.ext_fields)
        self.sends.append((req.code, header, bytes(req.body)))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        code = self.answer(header)
        if code not in (0, 10, 11, 12):
            return req.response(code, f"{self.name} says no")
        self.offset += 1
        ext = SendMessageResponseHeader("00" * 16, header.queue_id, self.offset - 1).to_ext()
        return req.response(code, ext_fields={**ext, "MSG_REGION": "R1"})


def with_brokers(test, *, names=("a", "b"), queues=2):
    async def main():
        namesrv = NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
        await namesrv.start()
        brokers = {n: ScriptedBroker(n) for n in names}
        for b in brokers.values():
            await b.server.start()
            wrapper = TopicConfigSerializeWrapper({"T": TopicConfig("T", queues, queues)}, DataVersion(1, 1))
            namesrv.routes.register_broker("C", b.addr, b.name, 0, b.addr, wrapper)
        try:
            await test(f"127.0.0.1:{namesrv.port}", brokers)
        finally:
            for b in brokers.values():
                await b.server.stop(0.2)
            await namesrv.stop(0.2)

    run_coroutine(main())


def producer(namesrv: str, **options) -> AsyncProducer:
    config = ClientConfig(namesrv, instance_name="unit-producer", client_ip="127.0.0.1")
    return AsyncProducer("PG", client_config=config, **options)


def test_send_fills_the_header_and_the_result():
    async def test(namesrv, brokers):
        async with producer(namesrv) as p:
            result = await p.send(Message.of("T", b"hello", tags="A", flag=3))
        assert result.send_status is SendStatus.SEND_OK and result.region_id == "R1"
        (code, header, body), = [s for b in brokers.values() for s in b.sends]
        assert code == RequestCode.SEND_MESSAGE_V2 and body == b"hello"
        assert (header.producer_group, header.topic, header.default_topic, header.flag) == ("PG", "T", "TBW102", 3)
        assert result.msg_id == decode_properties(header.properties)[Prop.UNIQ_KEY]
        assert result.message_queue == MessageQueue("T", brokers_of(brokers, header), header.queue_id)
        assert result.offset_msg_id == "00" * 16 and result.queue_offset == 0

    with_brokers(test)


def brokers_of(brokers, header):
    return next(b.name for b in brokers.values() if any(s[1] is header for s in b.sends))


def test_a_failed_send_moves_to_another_broker_and_isolates_the_first():
    async def test(namesrv, brokers):
        brokers["a"].answer = lambda h: ResponseCode.SYSTEM_BUSY
        async with producer(namesrv) as p:
            results = [await p.send(Message.of("T", f"m{i}")) for i in range(6)]
        assert {r.message_queue.broker_name for r in results} == {"b"}
        assert len(brokers["b"].sends) == 6
        assert len(brokers["a"].sends) <= 1  # tried at most once, then avoided

    with_brokers(test)


def test_when_every_attempt_fails_the_error_lists_them():
    async def test(namesrv, brokers):
        for b in brokers.values():
            b.answer = lambda h: ResponseCode.SERVICE_NOT_AVAILABLE
        async with producer(namesrv, retry_times_when_send_failed=2) as p:
            with pytest.raises(SendFailedError) as info:
                await p.send(Message.of("T", b"x"))
        assert len(info.value.attempts) == 3 and info.value.retriable
        assert {name for name, _ in info.value.attempts} == {"a", "b"}
        assert "says no" in str(info.value)

    with_brokers(test)


def test_an_error_another_broker_would_repeat_is_raised_at_once():
    async def test(namesrv, brokers):
        for b in brokers.values():
            b.answer = lambda h: ResponseCode.MESSAGE_ILLEGAL
        async with producer(namesrv) as p:
            with pytest.raises(MessageIllegalError, match="says no"):
                await p.send(Message.of("T", b"x"))
        assert sum(len(b.sends) for b in brokers.values()) == 1

    with_brokers(test)


def test_pinned_and_selected_queues_get_one_attempt():
    async def test(namesrv, brokers):
        async with producer(namesrv) as p:
            for i in range(8):
                r = await p.send(Message.of("T", f"{i}"), selector=SelectByHash(), arg="order-17")
                assert r.message_queue == MessageQueue("T", "a", 1)  # 1234255109 % 4 == 1
            brokers["b"].answer = lambda h: ResponseCode.SYSTEM_BUSY
            with pytest.raises(Exception, match="says no"):
                await p.send(Message.of("T", b"x"), queue=MessageQueue("T", "b", 0))
        assert len(brokers["b"].sends) == 1

    with_brokers(test)


def test_stored_with_a_caveat_is_a_result_unless_asked_to_retry():
    async def test(namesrv, brokers):
        brokers["a"].answer = lambda h: ResponseCode.FLUSH_DISK_TIMEOUT
        brokers["b"].answer = lambda h: ResponseCode.FLUSH_DISK_TIMEOUT
        async with producer(namesrv) as p:
            r = await p.send(Message.of("T", b"x"))
        assert r.send_status is SendStatus.FLUSH_DISK_TIMEOUT
        brokers["b"].answer = lambda h: ResponseCode.SUCCESS
        async with producer(namesrv, retry_another_broker_when_not_store_ok=True, latency_fault_enabled=False) as p:
            statuses = {(await p.send(Message.of("T", b"x"))).send_status for _ in range(4)}
        assert statuses == {SendStatus.SEND_OK}

    with_brokers(test)


def test_one_timeout_covers_every_attempt():
    async def test(namesrv, brokers):
        for b in brokers.values():
            b.delay_s = 0.6
        async with producer(namesrv, send_timeout_ms=400, latency_fault_enabled=False) as p:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(SendFailedError, match="timeout"):
                await p.send(Message.of("T", b"x"))
            assert loop.time() - started < 2.0

    with_brokers(test)


def test_batch_async_and_oneway_sends():
    async def test(namesrv, brokers):
        async with producer(namesrv, max_message_size=3000) as p:
            results = await p.send_batch([Message.of("T", bytes([65 + i]) * 1000) for i in range(6)])
            done: list = []
            task = p.send_async(Message.of("T", b"async"), lambda r, e: done.append((r, e)))
            async_result = await task
            await p.send_oneway(Message.of("T", b"oneway"))
            await wait_until(lambda: any(s[2] == b"oneway" for b in brokers.values() for s in b.sends))
        sends = [s for b in brokers.values() for s in b.sends]
        batches = [s for s in sends if s[0] == RequestCode.SEND_BATCH_MESSAGE]
        assert len(results) == len(batches) == 3 and all(h.batch for _, h, _ in batches)
        got = sorted(m.body for _, h, body in batches for m in decode_batch(body, "T"))
        assert got == [bytes([65 + i]) * 1000 for i in range(6)]
        assert sum(len(r.msg_ids) for r in results) == 6
        assert done == [(async_result, None)]

    with_brokers(test)


def test_send_before_start_or_after_shutdown_is_refused():
    async def test(namesrv, brokers):
        p = producer(namesrv)
        with pytest.raises(ClientStateError, match="start"):
            await p.send(Message.of("T", b"x"))
        await p.start()
        await p.shutdown()
        with pytest.raises(ClientStateError, match="shut down"):
            await p.send(Message.of("T", b"x"))
        with pytest.raises(ClientStateError):
            await p.start()

    with_brokers(test)


def test_an_encoded_batch_is_checked_as_a_whole():
    body = encode_batch([Message.of("T", b"a"), Message.of("T", b"b")], iter(["ID1", "ID2"]).__next__)
    prepared = core().prepare_encoded_batch("T", body, ["ID1", "ID2"])
    assert (prepared.topic, prepared.body, prepared.msg_id, prepared.batch) == ("T", body, "ID1,ID2", True)
    with pytest.raises(MessageValidationError, match="the batch is empty"):
        core().prepare_encoded_batch("T", b"", [])
    with pytest.raises(MessageValidationError, match="over the limits"):
        core(max_message_size=10).prepare_encoded_batch("T", body, ["ID1", "ID2"])
    with pytest.raises(MessageValidationError, match="retry topic"):
        core().prepare_encoded_batch("%RETRY%G", body, ["ID1", "ID2"])
