"""Half-message records and the records the transaction service writes for them.

A half message sits in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its target in
``REAL_TOPIC`` / ``REAL_QID`` and its producer group in ``PGROUP`` (see
`skiff.broker.redirect`). Its sysFlag has the NOT transaction type, so the half
topic's ConsumeQueue indexes it (RocketMQ's TransactionalMessageBridge does the
same); the producer's own sysFlag said PREPARED.

Each check re-puts the half message at the end of the half queue (a *copy*) with
``TRANSACTION_CHECK_TIMES`` = the checks so far and ``TRAN_PREPARED_QUEUE_OFFSET`` =
the queue offset of the first half message (the transaction's *origin*), so the
count survives restarts in the CommitLog and every copy names its transaction.

| record | topic, queue | content |
|---|---|---|
| commit | REAL_TOPIC, REAL_QID | the half message with the COMMIT type, preparedTransactionOffset = the half's CommitLog offset, the bookkeeping properties removed |
| op | RMQ_SYS_TRANS_OP_HALF_TOPIC, 0 | tag ``d``, body = the origin's queue offset as decimal text |
| copy | RMQ_SYS_TRANS_HALF_TOPIC, 0 | the half message plus the two properties above |
| discard | TRANS_CHECK_MAX_TIME_TOPIC, 0 | the half message as stored |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from skiff.broker.writer import MessageWriter
from skiff.common.errors import DecodeError
from skiff.common.msgid import create_offset_msg_id
from skiff.common.names import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from skiff.common.properties import Prop, decode_properties, encode_properties
from skiff.common.record import RecordHead, RecordTail, read_head, read_tail, record_size, write_record
from skiff.common.sysflag import MessageSysFlag, with_transaction_type
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.transaction import CheckTransactionStateRequestHeader
from skiff.store import MessageInput

OP_TAG = "d"
"""RocketMQ's REMOVETAG: the tag of every op record."""
BOOKKEEPING = frozenset({
    Prop.REAL_TOPIC, Prop.REAL_QID, Prop.TRAN_MSG, Prop.TRANSACTION_CHECK_TIMES, Prop.TRAN_PREPARED_QUEUE_OFFSET,
    Prop.CHECK_IMMUNITY_TIME_IN_SECONDS,
})
"""Properties a committed message loses (PGROUP stays, as in RocketMQ)."""
_COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT)


class HalfRecord(NamedTuple):
    """What the service needs to know of one record in the half queue."""

    queue_offset: int
    commit_log_offset: int
    origin: int
    """Queue offset of the transaction's first half message (this one's, unless it is a copy)."""
    check_times: int
    store_timestamp: int
    group: str
    real_topic: str
    real_queue_id: int
    immunity_ms: int | None
    """CHECK_IMMUNITY_TIME_IN_SECONDS in ms, when the producer set a valid one."""
    uniq_key: str | None
    properties: dict[str, str]

    @property
    def is_copy(self) -> bool:
        return self.origin != self.queue_offset


class _Parts(NamedTuple):
    head: RecordHead
    tail: RecordTail
    props: dict[str, str]
    body: bytes


def _parts(record: bytes | memoryview) -> _Parts:
    head = read_head(record)
    tail = read_tail(record, 0, head)
    body = bytes(record[tail.body_pos : tail.body_pos + tail.body_length])
    return _Parts(head, tail, decode_properties(tail.properties_raw), body)


def parse_half(record: bytes | memoryview) -> HalfRecord | str:
    """The half record's transaction facts, or why it cannot be one (a corrupt or foreign record)."""
    try:
        head, tail, props, _ = _parts(record)
    except DecodeError as exc:
        return f"the record does not decode: {exc}"
    if tail.topic != TRANS_HALF_TOPIC:
        return f"the record at CommitLog offset {head.physical_offset} is in topic {tail.topic}, not a half message"
    real_topic, real_qid = props.get(Prop.REAL_TOPIC, ""), props.get(Prop.REAL_QID, "")
    if not real_topic or not real_qid.isdigit():
        return (f"the half message at CommitLog offset {head.physical_offset} names no target "
                f"(REAL_TOPIC={real_topic!r}, REAL_QID={real_qid!r})")
    return HalfRecord(
        head.queue_offset, head.physical_offset,
        _whole(props.get(Prop.TRAN_PREPARED_QUEUE_OFFSET), head.queue_offset),
        _whole(props.get(Prop.TRANSACTION_CHECK_TIMES), 0), head.store_timestamp, props.get(Prop.PGROUP, ""),
        real_topic, int(real_qid), _immunity_ms(props.get(Prop.CHECK_IMMUNITY_TIME_IN_SECONDS)),
        props.get(Prop.UNIQ_KEY), props,
    )


def _whole(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() else default


def _immunity_ms(text: str | None) -> int | None:
    seconds = _whole(text, 0)
    return seconds * 1000 if seconds > 0 else None


def _input(parts: _Parts, topic: str, queue_id: int, props: Mapping[str, str], sys_flag: int) -> MessageInput:
    head = parts.head
    return MessageInput(
        topic=topic, queue_id=queue_id, body=parts.body, properties=encode_properties(props), flag=head.flag,
        sys_flag=sys_flag, born_timestamp=head.born_timestamp, born_host=head.born_host,
        reconsume_times=head.reconsume_times, prepared_transaction_offset=0, tags=props.get(Prop.TAGS),
        keys=props.get(Prop.KEYS), uniq_key=props.get(Prop.UNIQ_KEY),
    )


def commit_input(record: bytes | memoryview, half: HalfRecord, writer: MessageWriter) -> MessageInput | str:
    """The message a commit makes consumable, through the writer (so a DELAY on it still
    delays it, as RocketMQ delays COMMIT-type messages); or why it cannot be made."""
    head = read_head(record)
    tail = read_tail(record, 0, head)
    kept = {k: v for k, v in half.properties.items() if k not in BOOKKEEPING}
    made = writer.message(
        half.real_topic, half.real_queue_id, bytes(record[tail.body_pos : tail.body_pos + tail.body_length]), kept,
        None, head.flag, with_transaction_type(head.sys_flag, _COMMIT), head.born_timestamp, head.born_host,
        head.reconsume_times,
    )
    if isinstance(made, str):
        return made
    return made._replace(prepared_transaction_offset=head.physical_offset)


def copy_input(record: bytes | memoryview, origin: int, check_times: int) -> MessageInput:
    """The half message re-put at the end of the half queue after a check (or a round without a producer)."""
    parts = _parts(record)
    props = {**parts.props, Prop.TRANSACTION_CHECK_TIMES: str(check_times),
             Prop.TRAN_PREPARED_QUEUE_OFFSET: str(origin)}
    return _input(parts, TRANS_HALF_TOPIC, 0, props, parts.head.sys_flag)


def discard_input(record: bytes | memoryview) -> MessageInput:
    """The half message as an operator finds it in TRANS_CHECK_MAX_TIME_TOPIC."""
    parts = _parts(record)
    return _input(parts, TRANS_CHECK_MAX_TIME_TOPIC, 0, parts.props, parts.head.sys_flag)


def op_input(origin: int, now_ms: int, host: bytes) -> MessageInput:
    """The op record that closes the transaction whose first half message is at ``origin``."""
    props = {Prop.TAGS: OP_TAG, Prop.WAIT: "false"}
    return MessageInput(topic=TRANS_OP_HALF_TOPIC, queue_id=0, body=str(origin).encode(),
                        properties=encode_properties(props), flag=0, sys_flag=0, born_timestamp=now_ms, born_host=host,
                        tags=OP_TAG)


def parse_op(record: bytes | memoryview) -> int | None:
    """The origin an op record closes, or None when its body is not a queue offset."""
    head = read_head(record)
    tail = read_tail(record, 0, head)
    text = bytes(record[tail.body_pos : tail.body_pos + tail.body_length])
    return int(text) if text.isdigit() else None


def check_command(record: bytes | memoryview, half: HalfRecord) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE for ``half``: its ids in the header, the stored message with
    its real topic and queue in the body (the client finds its producer by PGROUP)."""
    head = read_head(record)
    header = CheckTransactionStateRequestHeader(
        half.queue_offset, half.commit_log_offset, half.uniq_key, half.uniq_key,
        create_offset_msg_id(head.store_host, head.physical_offset))
    body = retarget(record, half.real_topic, half.real_queue_id)
    return RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), body, oneway=True)


def retarget(record: bytes | memoryview, topic: str, queue_id: int) -> bytes:
    """The stored record with another topic and queue id; every other field as stored."""
    head = read_head(record)
    tail = read_tail(record, 0, head)
    topic_raw = topic.encode()
    out = bytearray(record_size(head.body_length, len(topic_raw), len(tail.properties_raw), len(head.born_host),
                                len(head.store_host)))
    write_record(
        out, 0, queue_id, head.flag, head.queue_offset, head.physical_offset, head.sys_flag, head.born_timestamp,
        head.born_host, head.store_timestamp, head.store_host, head.reconsume_times, head.prepared_transaction_offset,
        record[tail.body_pos : tail.body_pos + tail.body_length], topic_raw, tail.properties_raw, head.body_crc,
    )
    return bytes(out)
