"""The compiled single-send path equals the pure-Python one, end to end: the same random
request stream, cut into the same random reads, fed to a real in-process broker once with
the compiled frame codec and header read, once with their references, gives byte-for-byte
the same answers and the same CommitLog bytes. The stream mixes what producers send (V2
and V1 headers, tags and keys, several topics and queues) with what must fail alone: a
header missing a field, an illegal topic, a queue out of range, a body over the broker's
limit (the store refuses the run; each request gets its own answer), and frames the
kernels leave to the references (ROCKETMQ binary headers, numbers written " 3").

A read of plain single sends takes its own path (`plain_sends` reads it into store rows in
one pass, `sent_answers` encodes a stored run's answers): their compiled twins equal their
references on random reads, and the plain path answers and stores byte for byte what the
request-by-request path (`send_requests`) does for the same stream, also with sends that
are not plain (delays, odd property texts, one-way sends, WAIT=false) mixed in."""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from skiff.broker.processors import send as send_processor
from skiff.common import kernels
from skiff.common.clock import ManualClock
from skiff.common.message import Message
from skiff.common.properties import decode_properties
from skiff.protocol import frame
from skiff.broker.operations.send import CLIENT_FLAGS, FlushedAnswer, FlushedRun, Sent
from skiff.broker.operations.send_requests import NOT_PLAIN, PLAIN_INDEXED
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import DEDUP_WINDOW_MS
from skiff.protocol.codes import SKIFF_VERSION, RequestCode, ResponseCode, SerializeType
from skiff.store import MessageInput, PutResult, PutStatus
from skiff.store.dispatcher import NOT_CONSUMABLE
from skiff.protocol.command import RPC_ONEWAY, RemotingCommand
from skiff.protocol.frame import FrameDecoder, encode_frame_bytes, json_frames_py, json_head_py
from skiff.protocol.headers.send import send_fields_py
from skiff.protocol.message_codec import encode_batch, send_properties
from skiff.testing.inprocess import ServedConnection, in_process_broker
from skiff.testing.wire import send_header

MAX_BODY = 300
TOPICS = ("TwinA", "TwinB")


KINDS = ["v2", "v1", "batch", "missing", "topic", "queue", "big", "rocketmq", "spaced", "delay", "odd", "nowait",
         "oneway"]
MIXED = [40, 10, 3, 2, 2, 2, 3, 3, 3, 0, 0, 0, 0]
"""Every kind of the module docstring, some of which send a whole read request by request."""
MOSTLY_PLAIN = [300, 30, 1, 1, 4, 4, 4, 4, 1, 1, 10, 10, 6]
"""Mostly reads the plain path takes (refusals and a failed run's retries among them)."""
ODD_PROPERTIES = ("TAGS\x01a\x02TAGS\x01b\x02KEYS\x01k\x01x\x02\x01v\x02UNIQ_KEY\x01\u00e9\u4e2d\x02WAIT\x01false",
                  "KEYS\x01 k1  k2 \x02TAGS\x01\x02junk\x02WAIT\x01true\x02",
                  "WAIT\x01false\x02\x02\x02TAGS\x01\"quoted\\\"\x02",
                  "")


def request(rng: random.Random, i: int, weights: list[int] = MIXED, uniq: str | None = None) -> bytes:
    """One send request of the kinds the module docstring names (``uniq``: its UNIQ_KEY, else one of its own)."""
    topic = rng.choice(TOPICS)
    queue_id = rng.randrange(4)
    body = rng.randbytes(rng.randrange(1, 60))
    kind = rng.choices(KINDS, weights)[0]
    code = RequestCode.SEND_MESSAGE if kind == "v1" else RequestCode.SEND_MESSAGE_V2
    msg = Message.of(topic, body, tags=rng.choice([None, "t1", "t2"]), keys=rng.choice([None, f"k{i}"]))
    if kind == "delay":
        msg = Message.of(topic, body, delay_level=2)
    if kind == "nowait":
        msg = Message.of(topic, body, properties={"WAIT": "false"})
    if kind == "batch":
        code, body = RequestCode.SEND_BATCH_MESSAGE, encode_batch([msg, msg], lambda: f"{rng.getrandbits(64):032X}")
    properties = rng.choice(ODD_PROPERTIES) if kind == "odd" else send_properties(msg, uniq or f"{i:032X}")
    ext = send_header(code, "bad topic!" if kind == "topic" else topic, 9 if kind == "queue" else queue_id,
                      properties, batch=kind == "batch")
    ext["g" if code != RequestCode.SEND_MESSAGE else "bornTimestamp"] = str(1_700_000_000_000 + i)
    if kind == "missing":
        del ext["b"]
    if kind == "spaced":
        ext["e"] = f" {queue_id}"
    if kind == "big":
        body = b"x" * (MAX_BODY + 1)
    cmd = RemotingCommand.request(code, ext, body)
    cmd.opaque = i + 1
    if kind == "rocketmq":
        cmd.serialize_type = SerializeType.ROCKETMQ
    if kind == "oneway":
        cmd.flag |= RPC_ONEWAY
    return encode_frame_bytes(cmd)


def stream(seed: int, count: int, weights: list[int] = MIXED) -> list[bytes]:
    """The requests cut into reads of 1 to 80 frames, some reads ending inside a frame."""
    rng = random.Random(seed)
    data = b"".join(request(rng, i, weights) for i in range(count))
    reads, pos = [], 0
    while pos < len(data):
        step = rng.choice([rng.randrange(1, 400), rng.randrange(300, 30_000)])
        reads.append(data[pos:pos + step])
        pos += step
    return reads


def answered(reads: list[bytes]) -> int:
    """How many of the requests in ``reads`` get an answer (all but the one-way ones)."""
    return sum(not c.flag & RPC_ONEWAY for c in FrameDecoder(1 << 26).feed(b"".join(reads)))


async def serve(root: Path, reads: list[bytes], count: int, sync_flush: bool = False,
                attributes: dict[str, str] | None = None) -> tuple[bytes, bytes]:
    """The answers' bytes and the CommitLog's bytes after ``reads``, the broker's own address in
    them (message ids, STOREHOST: its port is picked afresh) written as 127.0.0.1:0.
    ``attributes``: the topics' attributes (a duplicate window)."""
    async with in_process_broker(root, clock=ManualClock(), store={"max_message_size": MAX_BODY},
                                 sync_flush=sync_flush) as broker:
        for topic in TOPICS:
            broker.topics.put(TopicConfig(topic, 4, 4, attributes=attributes or {}))
        served = ServedConnection(broker)
        for data in reads:
            served.feed(data)
        await served.wait_answers(count)
        log = broker.store.commitlog
        host, own = b"\x7f\x00\x00\x01", broker.port.to_bytes(4, "big")
        answers = bytes(served.transport.out).replace((host + own).hex().upper().encode(), (host + bytes(4)).hex().upper().encode())
        return answers, b"".join(bytes(v) for v in log.views(0, log.write_pos)).replace(host + own, host + bytes(4))


@pytest.mark.parametrize("seed", [1, 2])
def test_compiled_and_reference_paths_answer_and_store_the_same(tmp_path: Path, seed: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if kernels.compiled("json_frames", "skiff.protocol._frames") is None or kernels.DISABLED:
        pytest.skip("the compiled kernels are not built here, or switched off")
    count = 300
    reads = stream(seed, count)
    fast_answers, fast_log = asyncio.run(serve(tmp_path / "fast", reads, count))
    monkeypatch.setattr(frame, "_json_frames", json_frames_py)
    monkeypatch.setattr(frame, "_json_head_kernel", json_head_py)
    monkeypatch.setattr(send_processor, "send_fields", send_fields_py)
    monkeypatch.setattr(send_processor, "plain_sends", send_processor.plain_sends_py)
    monkeypatch.setattr(send_processor, "sent_answers", send_processor.sent_answers_py)
    ref_answers, ref_log = asyncio.run(serve(tmp_path / "reference", reads, count))
    answers = FrameDecoder(1 << 26).feed(fast_answers)
    codes = {a.code for a in answers}
    assert len(answers) == count and {ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL} <= codes, codes
    assert sorted(a.opaque for a in answers) == list(range(1, count + 1))
    assert fast_answers == ref_answers
    assert fast_log == ref_log and len(fast_log) > count * 100


def _compiled_send_kernels() -> None:
    if kernels.DISABLED or kernels.compiled("plain_sends", "skiff.protocol._frames") is None:
        pytest.skip("the compiled kernels are not built here, or switched off")


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_plain_sends_kernel_equals_its_reference(seed: int) -> None:
    """Random reads of decoded requests: the same rows, groups (in order), waits, or None."""
    _compiled_send_kernels()
    compiled = kernels.compiled("plain_sends", "skiff.protocol._frames")
    rng = random.Random(seed)
    weights = [300, 30, 5, 5, 4, 4, 4, 4, 5, 5, 10, 10, 6]  # more that are not plain than MOSTLY_PLAIN
    cmds = FrameDecoder(1 << 26).feed(b"".join(request(rng, i, weights) for i in range(600)))
    host = b"\x7f\x00\x00\x01\x00\x00\x9c\x40"
    args = (MessageInput, CLIENT_FLAGS, NOT_CONSUMABLE, NOT_PLAIN, PLAIN_INDEXED)
    taken = declined = 0
    pos = 0
    while pos < len(cmds):
        read = cmds[pos:pos + rng.choice([1, 2, rng.randrange(1, 80)])]
        pos += len(read)
        got, want = compiled(read, host, *args), send_processor.plain_sends_py(read, host, *args)
        if want is None:
            assert got is None
            declined += 1
            continue
        assert got is not None
        taken += 1
        assert list(got[0].items()) == list(want[0].items())
        assert got[1] == want[1] and got[2] == want[2]
        assert all(type(r) is MessageInput for r in got[1])
        assert not any(map(gc.is_tracked, got[1]))  # rows of plain fields: never in a cycle
    assert taken > 5 and declined > 5, (taken, declined)


def test_plain_sends_declines_what_is_not_plain() -> None:
    """Each thing that keeps a send off the plain path, alone in a read of otherwise plain sends."""
    _compiled_send_kernels()
    compiled = kernels.compiled("plain_sends", "skiff.protocol._frames")
    args = (b"\x7f\x00\x00\x01\x00\x00\x9c\x40", MessageInput, CLIENT_FLAGS, NOT_CONSUMABLE, NOT_PLAIN,
            PLAIN_INDEXED)

    def cmd(queue_id: int = 0, properties: str = "UNIQ_KEY\x01a\x02", sys_flag: int = 0, template: str = "TBW102",
            body: bytes = b"x", code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
        ext = send_header(code, "T", queue_id, properties, sys_flag=sys_flag)
        ext["c" if code != RequestCode.SEND_MESSAGE else "defaultTopic"] = template
        return RemotingCommand.request(code, ext, body)

    plain = [cmd(), cmd(code=RequestCode.SEND_MESSAGE)]
    for impl in (compiled, send_processor.plain_sends_py):
        groups, rows, waits = impl(plain, *args)
        assert list(groups) == [("T", 0)] and groups["T", 0][2] == [0, 1] and waits == [True, True]
        assert rows[0].uniq_key == "a" and rows[0].properties == b"UNIQ_KEY\x01a\x02"
        for odd in (cmd(-1), cmd(properties="DELAY\x012\x02"), cmd(properties="TIMER_ID\x01x\x02"),
                    cmd(properties="_SYS_MSG_PRIORITY_\x011\x02"), cmd(properties="TRAN_MSG\x01true\x02"),
                    cmd(sys_flag=4), cmd(template="Other"), cmd(properties="TAGS\x01\ud800\x02"),
                    cmd(body=bytearray(b"x")), RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, b"x")):
            assert impl([*plain, odd], *args) is None, odd
        assert impl([cmd(properties="WAIT\x01false\x02")], *args)[2] == [False]
        assert impl([cmd(properties="DELAY\x01x\x01y\x02")], *args) is not None  # not a pair: no delay


@pytest.mark.parametrize("seed", [6, 7])
def test_sent_answers_kernel_equals_its_reference(seed: int) -> None:
    """Random runs of JSON and ROCKETMQ requests, ids, offsets and extra fields (escapes and
    non-ASCII text among them): the same frames at the same indices, the same count left."""
    _compiled_send_kernels()
    compiled = kernels.compiled("sent_answers", "skiff.protocol._frames")
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randrange(1, 70)
        reqs = [RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}, b"") for _ in range(n)]
        for r in reqs:
            r.opaque = rng.randrange(-2**31, 2**31)
            if rng.random() < 0.1:
                r.serialize_type = SerializeType.ROCKETMQ
        indices = sorted(rng.sample(range(n), rng.randrange(1, n + 1)))
        ids = [f"{rng.getrandbits(128):032X}" for _ in indices]
        extra = rng.choice([{}, {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"},
                            {"MSG_REGION": "r\u00e9gion \"1\"\\\n", "TRACE_ON": "false", "\u4e2d": "\x01"}])
        queue_id, first = rng.randrange(0, 1 << 20), rng.choice([0, rng.randrange(1 << 62)])
        call = (reqs, indices, ids, queue_id, first, ResponseCode.SUCCESS, "PYTHON", SKIFF_VERSION, 1, extra)
        got: list[object] = [None] * n
        want: list[object] = [None] * n
        assert compiled(*call, got) == send_processor.sent_answers_py(*call, want)
        assert got == want
        for i in indices:
            if want[i] is not None:  # what answer_frame makes of put_fields' answer
                assert FrameDecoder(1 << 20).feed(want[i])[0].ext_fields["queueId"] == str(queue_id)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            compiled(*call[:-1], {"msgId": "x"}, got)


def test_sent_answers_kernel_follows_fields_changed_between_calls() -> None:
    """The kernel keeps the parts its answers share for the next call: the same call again,
    the same extra dict changed in place (a value, then its order), another language, another
    code, each gives the reference's frames."""
    _compiled_send_kernels()
    compiled = kernels.compiled("sent_answers", "skiff.protocol._frames")
    reqs = [RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}, b"") for _ in range(3)]
    extra = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    frames = []

    def same_as_reference(code: int, language: str) -> None:
        call = (reqs, [0, 2], ["A" * 32, "B" * 32], 3, 77, code, language, SKIFF_VERSION, 1, extra)
        got: list[object] = [None] * 3
        want: list[object] = [None] * 3
        assert compiled(*call, got) == send_processor.sent_answers_py(*call, want) == 0
        assert got == want and got[1] is None
        frames.append(got[2])

    same_as_reference(ResponseCode.SUCCESS, "PYTHON")
    same_as_reference(ResponseCode.SUCCESS, "PYTHON")
    extra["TRACE_ON"] = "fals"
    same_as_reference(ResponseCode.SUCCESS, "PYTHON")
    extra["MSG_REGION"] = extra.pop("MSG_REGION")  # the same fields, the other order
    same_as_reference(ResponseCode.SUCCESS, "PYTHON")
    same_as_reference(ResponseCode.SUCCESS, "JAVA")
    same_as_reference(ResponseCode.SYSTEM_ERROR, "JAVA")
    assert frames[0] == frames[1] and len(set(frames[1:])) == 5


@pytest.mark.parametrize(("seed", "sync_flush"), [(8, False), (9, False), (10, True)])
def test_plain_path_answers_and_stores_as_request_by_request(tmp_path: Path, seed: int, sync_flush: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain path against `send_requests` on the same stream: the same answers (in order;
    by opaque under SYNC_FLUSH, whose answers come from the flusher's callback) and CommitLog."""
    count = 400
    reads = stream(seed, count, MOSTLY_PLAIN)
    expected = answered(reads)
    taken = spy_on_plain_sends(monkeypatch)
    plain_answers, plain_log = asyncio.run(serve(tmp_path / "plain", reads, expected, sync_flush))
    assert taken.count(True) > 3 and taken.count(False) > 0, taken  # both paths ran
    monkeypatch.setattr(send_processor, "plain_sends", lambda *args: None)
    ref_answers, ref_log = asyncio.run(serve(tmp_path / "requests", reads, expected, sync_flush))
    answers = FrameDecoder(1 << 26).feed(plain_answers)
    codes = {a.code for a in answers}
    assert len(answers) == expected < count
    assert {ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SYSTEM_ERROR} <= codes, codes
    if sync_flush:
        def by_opaque(data: bytes) -> list[bytes]:
            frames = FrameDecoder(1 << 26).feed(data)
            return [encode_frame_bytes(c) for c in sorted(frames, key=lambda c: c.opaque)]
        assert by_opaque(plain_answers) == by_opaque(ref_answers)
    else:
        assert plain_answers == ref_answers
    assert plain_log == ref_log and len(plain_log) > count * 100


@pytest.mark.parametrize("status", [PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT])
def test_a_flushed_run_answers_each_send_as_it_would_be_answered_alone(status: PutStatus) -> None:
    """SYNC_FLUSH: a run's late answers, given when its fsync is done, are what each send's own
    `FlushedAnswer` gives: its id and queue offset in the run; after a late fsync,
    FLUSH_DISK_TIMEOUT with that result, answered one by one."""
    result = PutResult(PutStatus.PUT_OK, "", 100, ("A" * 32, "B" * 32, "C" * 32), 7, 3, 0, 300, None)
    members = [0, 2, 5]

    def answers(i: int) -> Callable[[Sent], tuple[object, ...]]:
        return lambda sent: (i, sent.msg_ids, sent.queue_offset, sent.result.status, sent.result.reason)

    def answer_run(indices: list[int], r: PutResult, queue_id: int, into: list[object]) -> None:
        for k, i in enumerate(indices):  # as answers(i) of the k-th member would answer it
            into[i] = (i, r.offset_msg_ids[k:k + 1], r.queue_offset + k, r.status, r.reason)

    run = FlushedRun(result, 3, members, answer_run, answers)
    given: list[tuple[int, object]] = []
    for i, late in zip(members, run.lates):
        late.then(lambda request, answer: given.append((request, answer)), i)
    run.settle(status)
    alone = [FlushedAnswer(Sent(result, 3, k), answers(i)) for k, i in enumerate(members)]
    for late in alone:
        late.settle(status)
    assert given == [(i, late._answer) for i, late in zip(members, alone)]
    assert [a[2] for _, a in given] == [7, 8, 9]  # type: ignore[index]
    assert {a[3] for _, a in given} == {status}  # type: ignore[index]


def dedup_stream(seed: int, count: int) -> tuple[list[bytes], dict[int, tuple[str, str]]]:
    """`stream` with UNIQ_KEYs that repeat: a third of the sends reuse one of the last 40
    sends' keys (in the same read, in another read, on another queue), as a producer's retries
    and a replay do; and by opaque the topic and key of each single send a window covers (its
    properties carry the key, no delay: a delayed message is parked in the timer's topic).
    Each topic has its window: a key sent to both is stored in each."""
    rng = random.Random(seed)
    uniq: dict[int, str] = {}
    frames = []
    for i in range(count):
        uniq[i + 1] = uniq[rng.randrange(max(1, i - 40), i + 1)] if i and rng.random() < 0.33 else f"{i:032X}"
        frames.append(request(rng, i, MOSTLY_PLAIN, uniq[i + 1]))
    keys = {}
    for cmd in FrameDecoder(1 << 26).feed(b"".join(frames)):
        props = decode_properties(cmd.ext_fields.get("i") or cmd.ext_fields.get("properties") or "")
        topic = cmd.ext_fields.get("b") or cmd.ext_fields.get("topic")
        if cmd.code != RequestCode.SEND_BATCH_MESSAGE and topic and "DELAY" not in props and "UNIQ_KEY" in props:
            keys[cmd.opaque] = (topic, props["UNIQ_KEY"])
    data, reads, pos = b"".join(frames), [], 0
    while pos < len(data):
        step = rng.choice([rng.randrange(1, 400), rng.randrange(300, 30_000)])
        reads.append(data[pos:pos + step])
        pos += step
    return reads, keys


@pytest.mark.parametrize(("seed", "sync_flush"), [(11, False), (12, True)])
def test_plain_path_keeps_a_duplicate_window_as_request_by_request(tmp_path: Path, seed: int, sync_flush: bool,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Topics with a duplicate window take the plain path too: the same answers and CommitLog as
    the request-by-request path on a stream whose UNIQ_KEYs repeat, and in both every key is
    stored once: each of its successful answers names the same queue, offset and message id."""
    count = 400
    reads, keys = dedup_stream(seed, count)
    expected = answered(reads)
    window = {DEDUP_WINDOW_MS: "600000"}
    taken = spy_on_plain_sends(monkeypatch)
    plain_answers, plain_log = asyncio.run(serve(tmp_path / "plain", reads, expected, sync_flush, window))
    assert taken.count(True) > 3 and taken.count(False) > 0, taken  # both paths ran
    monkeypatch.setattr(send_processor, "plain_sends", lambda *args: None)
    ref_answers, ref_log = asyncio.run(serve(tmp_path / "requests", reads, expected, sync_flush, window))
    answers = sorted(FrameDecoder(1 << 26).feed(plain_answers), key=lambda c: c.opaque)
    assert len(answers) == expected < count
    if sync_flush:
        assert answers == sorted(FrameDecoder(1 << 26).feed(ref_answers), key=lambda c: c.opaque)
    else:
        assert plain_answers == ref_answers
    assert plain_log == ref_log
    where: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for a in answers:
        if a.code == ResponseCode.SUCCESS and a.opaque in keys:
            where.setdefault(keys[a.opaque], set()).add(
                (a.ext_fields["queueId"], a.ext_fields["queueOffset"], a.ext_fields["msgId"]))
    repeated = [k for k in where if sum(keys.get(a.opaque) == k and a.code == ResponseCode.SUCCESS for a in answers) > 1]
    assert len(repeated) > 20
    assert all(len(places) == 1 for places in where.values()), [p for p in where.values() if len(p) > 1][:3]
    stored = {(topic, *place[:2]) for (topic, _), places in where.items() for place in places}
    assert len(stored) == len(where)  # no two keys answered with one place


def spy_on_plain_sends(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each read took the plain path (`plain_sends` answered it) or fell back."""
    taken: list[bool] = []
    real = send_processor.plain_sends

    def plain_sends(*args: object) -> object:
        plain = real(*args)
        taken.append(plain is not None)
        return plain
    monkeypatch.setattr(send_processor, "plain_sends", plain_sends)
    return taken
