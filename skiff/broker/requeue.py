"""Copying a stored message to a retry or dead-letter topic: what a consumer's
send-back (`skiff.broker.processors.send_back`) and a POP redelivery
(`skiff.broker.pop`) both do.

The copy keeps the body, flag, born time and host and every property, and adds
RocketMQ's markers: ``RETRY_TOPIC`` (the topic it was first sent to),
``ORIGIN_MESSAGE_ID`` (its first offset id), WAIT=false, reconsumeTimes + 1. Any
delay it carried is dropped; ``delay_level`` sets a new one (a send-back's retry
is parked by the timer; a POP redelivery is due at once).
"""

from __future__ import annotations

from skiff.broker.redirect import DELAY_PROPERTIES
from skiff.broker.writer import MessageWriter
from skiff.common.msgid import create_offset_msg_id
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import read_head, read_tail
from skiff.store import MessageInput


def requeue_input(writer: MessageWriter, record: bytes | memoryview, topic: str, queue_id: int,
                  delay_level: int | None = None) -> MessageInput | str:
    """The store input that copies ``record`` to ``topic``/``queue_id``, or why it cannot."""
    head = read_head(record)
    tail = read_tail(record, 0, head)
    props = decode_properties(tail.properties_raw)
    props.setdefault(Prop.RETRY_TOPIC, tail.topic)
    props.setdefault(Prop.ORIGIN_MESSAGE_ID, create_offset_msg_id(head.store_host, head.physical_offset))
    props[Prop.WAIT] = "false"
    for name in DELAY_PROPERTIES:
        props.pop(name, None)
    if delay_level is not None:
        props[Prop.DELAY] = str(delay_level)
    body = bytes(record[tail.body_pos:tail.body_pos + tail.body_length])
    return writer.message(topic, queue_id, body, props, None, head.flag, head.sys_flag,
                          head.born_timestamp, head.born_host, head.reconsume_times + 1)


def reconsume_times(record: bytes | memoryview) -> int:
    return read_head(record).reconsume_times
