"""Copying a stored message to a retry or dead-letter topic: what a consumer's
send-back (`skiff.broker.processors.send_back`) and a POP redelivery
(`skiff.broker.pop`) both do, through `requeue`.

A message retried its group's most times already (or with no retry offered) goes
to ``%DLQ%<group>`` (one queue), else to the retry topic the caller names. The
copy keeps the body, flag, born time and host and every property, and adds
RocketMQ's markers: ``RETRY_TOPIC`` (the topic it was first sent to),
``ORIGIN_MESSAGE_ID`` (its first offset id), WAIT=false, reconsumeTimes + 1. Any
delay it carried is dropped; the retry's delay level sets a new one (a send-back's
retry is parked by the timer; a POP redelivery is due at once).
"""

from __future__ import annotations

import random
from typing import NamedTuple

from skiff.broker.redirect import DELAY_PROPERTIES
from skiff.broker.topics import READ_WRITE, TopicConfigManager
from skiff.broker.writer import MessageWriter
from skiff.common.msgid import create_offset_msg_id
from skiff.common.names import dlq_topic
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import RecordHead, read_head, read_tail
from skiff.store import MessageInput

FIRST_RETRY_LEVEL = 3
"""A send-back that names no level is retried at level 3 + reconsumeTimes (10 s, 30 s, 1 min, ...)."""
DLQ_QUEUE_NUMS = 1


class Retry(NamedTuple):
    """Where a message that may be retried once more goes."""

    topic: str
    queue_nums: int = 1
    """The retry topic is created with this many queues; the copy goes to a random one."""
    delay_level: int | None = None
    """None: due at once; 0: ``FIRST_RETRY_LEVEL`` + reconsumeTimes (RocketMQ's rule when a
    consumer names no level); more: that level."""
    queue_id: int | None = None
    """The copy's queue instead (a priority topic's retry keeps its priority's queue)."""


def requeue(writer: MessageWriter, topics: TopicConfigManager, record: bytes | memoryview, group: str,
            retry: Retry | None, max_times: int) -> MessageInput | str:
    """The store input that moves ``record`` to ``retry``, or to ``group``'s dead-letter topic
    when it was retried ``max_times`` already or ``retry`` is None; or why it cannot. Creates
    the target topic if missing."""
    head = read_head(record)
    if retry is None or head.reconsume_times >= max_times:
        topic, queue_nums, queue_id, level = dlq_topic(group), DLQ_QUEUE_NUMS, 0, None
    else:
        topic, queue_nums, queue_id = retry.topic, retry.queue_nums, random.randrange(retry.queue_nums)
        level = retry.delay_level
        if level == 0:
            level = FIRST_RETRY_LEVEL + head.reconsume_times
    made = topics.find_or_create(topic, queue_nums, READ_WRITE)
    if retry is not None and retry.queue_id is not None and topic == retry.topic:
        queue_id = max(0, min(retry.queue_id, made.write_queue_nums - 1))
    return _copy(writer, record, head, topic, queue_id, level)


def _copy(writer: MessageWriter, record: bytes | memoryview, head: RecordHead, topic: str, queue_id: int,
          delay_level: int | None) -> MessageInput | str:
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
