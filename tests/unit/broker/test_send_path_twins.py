"""The compiled single-send path equals the pure-Python one, end to end: the same random
request stream, cut into the same random reads, fed to a real in-process broker once with
the compiled frame codec and header read, once with their references, gives byte-for-byte
the same answers and the same CommitLog bytes. The stream mixes what producers send (V2
and V1 headers, tags and keys, several topics and queues) with what must fail alone: a
header missing a field, an illegal topic, a queue out of range, a body over the broker's
limit (the store refuses the run; each request gets its own answer), and frames the
kernels leave to the references (ROCKETMQ binary headers, numbers written " 3")."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from skiff.broker.processors import send as send_processor
from skiff.common import kernels
from skiff.common.clock import ManualClock
from skiff.common.message import Message
from skiff.protocol import frame
from skiff.protocol.codes import RequestCode, ResponseCode, SerializeType
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, encode_frame_bytes, json_frames_py, json_head_py
from skiff.protocol.headers.send import send_fields_py
from skiff.protocol.message_codec import encode_batch, send_properties
from skiff.testing.inprocess import ServedConnection, in_process_broker
from skiff.testing.wire import send_header

MAX_BODY = 300
TOPICS = ("TwinA", "TwinB")


def request(rng: random.Random, i: int) -> bytes:
    """One send request of the kinds the module docstring names."""
    topic = rng.choice(TOPICS)
    queue_id = rng.randrange(4)
    body = rng.randbytes(rng.randrange(1, 60))
    kind = rng.choices(["v2", "v1", "batch", "missing", "topic", "queue", "big", "rocketmq", "spaced"],
                       [40, 10, 3, 2, 2, 2, 3, 3, 3])[0]
    code = RequestCode.SEND_MESSAGE if kind == "v1" else RequestCode.SEND_MESSAGE_V2
    msg = Message.of(topic, body, tags=rng.choice([None, "t1", "t2"]), keys=rng.choice([None, f"k{i}"]))
    if kind == "batch":
        code, body = RequestCode.SEND_BATCH_MESSAGE, encode_batch([msg, msg], lambda: f"{rng.getrandbits(64):032X}")
    ext = send_header(code, "bad topic!" if kind == "topic" else topic, 9 if kind == "queue" else queue_id,
                      send_properties(msg, f"{i:032X}"), batch=kind == "batch")
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
    return encode_frame_bytes(cmd)


def stream(seed: int, count: int) -> list[bytes]:
    """The requests cut into reads of 1 to 80 frames, some reads ending inside a frame."""
    rng = random.Random(seed)
    data = b"".join(request(rng, i) for i in range(count))
    reads, pos = [], 0
    while pos < len(data):
        step = rng.choice([rng.randrange(1, 400), rng.randrange(300, 30_000)])
        reads.append(data[pos:pos + step])
        pos += step
    return reads


async def serve(root: Path, reads: list[bytes], count: int) -> tuple[bytes, bytes]:
    """The answers' bytes and the CommitLog's bytes after ``reads``, the broker's own address in
    them (message ids, STOREHOST: its port is picked afresh) written as 127.0.0.1:0."""
    async with in_process_broker(root, clock=ManualClock(), store={"max_message_size": MAX_BODY}) as broker:
        for topic in TOPICS:
            broker.topics.find_or_create(topic, 4, 6)
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
    ref_answers, ref_log = asyncio.run(serve(tmp_path / "reference", reads, count))
    answers = FrameDecoder(1 << 26).feed(fast_answers)
    codes = {a.code for a in answers}
    assert len(answers) == count and {ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL} <= codes, codes
    assert sorted(a.opaque for a in answers) == list(range(1, count + 1))
    assert fast_answers == ref_answers
    assert fast_log == ref_log and len(fast_log) > count * 100
