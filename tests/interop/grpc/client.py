"""Scenarios of the official RocketMQ 5.x Python client (PyPI rocketmq-python-client 5.1.2)
against Skiff's gRPC endpoint; run under that client's own interpreter (SKIFF_RMQ5_PYTHON).

Usage: client.py SPEC_JSON, SPEC = {"endpoint": "host:port", "scenarios": [names...], ...}.
Prints one JSON object: scenario name -> what it saw (the test asserts on it).
"""

from __future__ import annotations

import threading
import time

import grpc
from rocketmq import (ConsumeResult, FilterExpression, Message, MessageListener, Producer, PushConsumer,
                      SimpleConsumer, TransactionChecker, TransactionResolution)
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as rpc
from rocketmq.v5.model.filter_expression import FilterType
from scenario import CFG, SPEC, main

DEADLINE_S = 30


def message(topic, body, *, tag=None, keys=(), props=None, group=None, deliver_at=None):
    m = Message()
    m.topic, m.body = topic, body
    if tag:
        m.tag = tag
    if keys:
        type(m).keys.fset(m, *keys)  # the setter takes several keys; assignment passes one
    for k, v in (props or {}).items():
        m.add_property(k, v)
    if group:
        m.message_group = group
    if deliver_at:
        m.delivery_timestamp = deliver_at
    return m


def seen(m):
    return {"body": m.body.decode(), "tag": m.tag, "keys": sorted(m.keys or ()), "props": dict(m.properties or {}),
            "id": m.message_id, "attempt": m.delivery_attempt, "group": m.message_group, "topic": m.topic,
            "delivery": m.delivery_timestamp}


def receive(consumer, n, invisible_s=10, ack=True, deadline_s=DEADLINE_S):
    """Receive until ``n`` messages came (acknowledging them unless told not to)."""
    got, end = [], time.time() + deadline_s
    while len(got) < n and time.time() < end:
        for m in consumer.receive(32, invisible_s):
            got.append(m)
            if ack:
                consumer.ack(m)
    return got


def simple(group, topic, expression="*", kind=FilterType.TAG):
    c = SimpleConsumer(CFG, group, {topic: FilterExpression(expression, kind)}, await_duration=2)
    c.startup()
    return c


def send_receive():
    p = Producer(CFG, ("GNormal",))
    p.startup()
    sync = p.send(message("GNormal", b"n0", tag="TagA", keys=["k0", "k1"], props={"color": "red"}))
    future = p.send_async(message("GNormal", b"n1", tag="TagA"))
    async_id = future.result(timeout=10).message_id
    p.shutdown()
    c = simple("G-normal", "GNormal")
    got = receive(c, 2)
    again = c.receive(32, 10)
    c.shutdown()
    return {"sent": [sync.message_id, async_id], "got": [seen(m) for m in got], "again": len(again)}


def fifo():
    p = Producer(CFG, ("GFifo",))
    p.startup()
    for i in range(6):
        for group in ("g1", "g2"):
            p.send(message("GFifo", f"{group}-{i}".encode(), group=group))
    p.shutdown()
    c = simple("G-fifo", "GFifo")
    got = receive(c, 12)
    c.shutdown()
    return {"got": [seen(m) for m in got]}


def delay():
    p = Producer(CFG, ("GDelay",))
    p.startup()
    at = int(time.time()) + 3
    receipt = p.send(message("GDelay", b"later", deliver_at=at))
    recall_at = int(time.time()) + 60
    recalled = p.send(message("GDelay", b"recalled", deliver_at=recall_at))
    recall_id = p.recall_message("GDelay", recalled.recall_handle)
    c = simple("G-delay", "GDelay")
    early = [m.body.decode() for m in c.receive(32, 10)]
    got = receive(c, 1)
    arrived = time.time()
    p.shutdown()
    c.shutdown()
    return {"id": receipt.message_id, "at": at, "early": early, "got": [seen(m) for m in got], "arrived": arrived,
            "recalled": [recalled.message_id, recall_id]}


class Checker(TransactionChecker):
    def __init__(self):
        self.checked = []

    def check(self, message):
        self.checked.append(message.body.decode())
        return TransactionResolution.COMMIT


def transaction():
    checker = Checker()
    p = Producer(CFG, ("GTx",), checker)
    p.startup()
    for body, end in (("commit", "commit"), ("rollback", "rollback"), ("unknown", None)):
        tx = p.begin_transaction()
        p.send(message("GTx", body.encode()), tx)
        if end == "commit":
            tx.commit()
        elif end == "rollback":
            tx.rollback()
    c = simple("G-tx", "GTx")
    got = receive(c, 2)
    time.sleep(1)
    extra = c.receive(32, 10)
    p.shutdown()
    c.shutdown()
    return {"got": sorted(m.body.decode() for m in got + extra), "checked": checker.checked}


def invisible():
    p = Producer(CFG, ("GInv",))
    p.startup()
    p.send(message("GInv", b"again"))
    p.send(message("GInv", b"changed"))
    p.shutdown()
    c = simple("G-inv", "GInv")
    first = receive(c, 2, invisible_s=2, ack=False)
    taken = time.time()
    changed = next(m for m in first if m.body == b"changed")
    c.change_invisible_duration(changed, 1)
    back = receive(c, 2, invisible_s=30, ack=False)
    returned = time.time()
    for m in back:
        c.ack(m)
    c.shutdown()
    return {"first": [seen(m) for m in first], "back": [seen(m) for m in back], "after_s": returned - taken}


def filters():
    p = Producer(CFG, ("GFilter",))
    p.startup()
    for i in range(6):
        p.send(message("GFilter", f"f{i}".encode(), tag="even" if i % 2 == 0 else "odd", props={"n": str(i)}))
    p.shutdown()
    tags = simple("G-tag", "GFilter", "even")
    sql = simple("G-sql", "GFilter", "n > 2 AND n < 5", FilterType.SQL)
    by_tag = receive(tags, 3)
    by_sql = receive(sql, 2)
    tags.shutdown()
    sql.shutdown()
    return {"tag": sorted(m.body.decode() for m in by_tag), "sql": sorted(m.body.decode() for m in by_sql)}


def share():
    p = Producer(CFG, ("GShare",))
    p.startup()
    for i in range(20):
        p.send(message("GShare", f"s{i}".encode()))
    p.shutdown()
    a, b = simple("G-share", "GShare"), simple("G-share", "GShare")
    got_a, got_b, end = [], [], time.time() + DEADLINE_S
    while len(got_a) + len(got_b) < 20 and time.time() < end:
        for consumer, got in ((a, got_a), (b, got_b)):
            for m in consumer.receive(4, 30):
                got.append(m.body.decode())
    a.shutdown()
    b.shutdown()
    return {"a": got_a, "b": got_b}


class Undecided(TransactionChecker):
    def check(self, message):
        return TransactionResolution.UNKNOWN


def restart_before():
    """Take four messages; acknowledge two; leave the rest in flight across the broker restart.
    Leave a transaction open too: the next process commits it by its id."""
    c = simple("G-restart", "GRestart")
    got = receive(c, 4, invisible_s=3, ack=False)
    for m in got[:2]:
        c.ack(m)
    c.shutdown()
    p = Producer(CFG, ("GRestart",), Undecided())
    p.startup()
    half = p.send(message("GRestart", b"open-tx"), p.begin_transaction())
    p.shutdown()
    return {"acked": [m.body.decode() for m in got[:2]], "left": [m.body.decode() for m in got[2:]],
            "tx": half.transaction_id, "tx_message": half.message_id}


def restart_after():
    commit = raw("EndTransaction", rpc.EndTransactionRequest(
        topic=pb.Resource(name="GRestart"), message_id=SPEC["tx_message"], transaction_id=SPEC["tx"],
        resolution=pb.COMMIT, source=pb.SOURCE_CLIENT), rpc.EndTransactionResponse)
    c = simple("G-restart", "GRestart")
    got = receive(c, 3)
    time.sleep(1)
    more = c.receive(32, 10)
    c.shutdown()
    return {"got": sorted(m.body.decode() for m in got + more), "commit": commit}


class Listener(MessageListener):
    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def consume(self, m):
        with self.lock:
            self.calls.append((m.body.decode(), m.delivery_attempt))
        if m.body == b"slow":  # longer than the invisible time: only renewals keep it hidden
            time.sleep(SPEC.get("slow_s", 3))
        return ConsumeResult.FAILURE if m.body.startswith(b"fail") else ConsumeResult.SUCCESS


def push():
    p = Producer(CFG, ("GPush",))
    p.startup()
    for i in range(5):
        p.send(message("GPush", f"ok{i}".encode()))
    p.send(message("GPush", b"fail-always"))
    p.send(message("GPush", b"slow"))
    p.shutdown()
    listener = Listener()
    c = PushConsumer(CFG, "G-push", listener, {"GPush": FilterExpression()})
    c.startup()
    end, want = time.time() + DEADLINE_S, SPEC.get("max_attempts", 3)
    while time.time() < end and sum(b == "fail-always" for b, _ in listener.calls) < want:
        time.sleep(0.2)
    time.sleep(1.5)
    c.shutdown()
    return {"calls": listener.calls}


class FailingFirst(MessageListener):
    """Fails the first delivery of every tenth message; succeeds otherwise."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def consume(self, m):
        body = m.body.decode()
        with self.lock:
            self.calls.append((body, m.delivery_attempt))
        failing = int(body[1:]) % 10 == 0 and m.delivery_attempt == 1
        return ConsumeResult.FAILURE if failing else ConsumeResult.SUCCESS


def push_many():
    """A PushConsumer of 1,000 messages whose listener fails 100 of them once."""
    topic, n = SPEC["topic"], SPEC.get("count", 1000)
    p = Producer(CFG, (topic,))
    p.startup()
    for future in [p.send_async(message(topic, f"m{i:04d}".encode())) for i in range(n)]:
        future.result(timeout=30)
    p.shutdown()
    listener = FailingFirst()
    c = PushConsumer(CFG, SPEC["group"], listener, {topic: FilterExpression()})
    c.startup()
    end = time.time() + DEADLINE_S * 2

    def succeeded():
        with listener.lock:
            return {b for b, a in listener.calls if int(b[1:]) % 10 or a > 1}
    while time.time() < end and len(succeeded()) < n:
        time.sleep(0.2)
    c.shutdown()
    return {"calls": listener.calls}


def push_fifo():
    p = Producer(CFG, ("GPushFifo",))
    p.startup()
    for i in range(5):
        for group in ("g1", "g2"):
            p.send(message("GPushFifo", f"{group}-{i}".encode(), group=group))
    p.send(message("GPushFifo", b"fail-fifo", group="g3"))
    p.shutdown()
    listener = Listener()
    c = PushConsumer(CFG, "G-push-fifo", listener, {"GPushFifo": FilterExpression()})
    c.startup()
    end, want = time.time() + DEADLINE_S, 10 + SPEC.get("max_attempts", 3)
    while time.time() < end and len(listener.calls) < want:
        time.sleep(0.2)
    time.sleep(1.5)
    c.shutdown()
    return {"calls": listener.calls}


def fifo_groups():
    """20 message groups x 50 messages to an orderly group's topic; consumer A acks in order,
    then stops with half of its last batch un-acked (a consumer restart); consumer B, new,
    takes the rest. Every receipt and ack is logged in order."""
    topic, group, groups, per_group = SPEC["topic"], SPEC["group"], 20, 50
    p = Producer(CFG, (topic,))
    p.startup()
    for i in range(per_group):
        for g in range(groups):
            p.send(message(topic, f"q{g:02d}-{i:02d}".encode(), group=f"q{g:02d}"))
    p.shutdown()
    log, acked, total = [], set(), groups * per_group

    def consume(consumer, until, invisible_s):
        end = time.time() + DEADLINE_S * 2
        while not until() and time.time() < end:
            batch = consumer.receive(32, invisible_s)
            for m in batch:
                log.append(("recv", m.body.decode(), m.delivery_attempt))
            yield batch

    a = simple(group, topic)
    for batch in consume(a, lambda: len(acked) >= total * 2 // 5, 2):
        for m in batch:
            a.ack(m)
            acked.add(m.body)
            log.append(("ack", m.body.decode(), 0))
    left = []
    while not left:
        last = a.receive(32, 2)
        for m in last:
            log.append(("recv", m.body.decode(), m.delivery_attempt))
        for m in last[:len(last) // 2]:
            a.ack(m)
            acked.add(m.body)
            log.append(("ack", m.body.decode(), 0))
        left = [m.body.decode() for m in last[len(last) // 2:]]
    a.shutdown()
    restart_at = len(log)
    b = simple(group, topic)
    for batch in consume(b, lambda: len(acked) >= total, 10):
        for m in batch:
            b.ack(m)
            acked.add(m.body)
            log.append(("ack", m.body.decode(), 0))
    b.shutdown()
    return {"log": log, "left": left, "restart_at": restart_at}


def priority_backlog():
    """40 messages of priorities 0-3 (interleaved) to a PRIORITY topic; take one batch of 4
    and leave one of it un-acked, to come back as a retry."""
    topic = SPEC["topic"]
    p = Producer(CFG, (topic,))
    p.startup()
    for i in range(40):
        m = message(topic, f"p{i % 4}-{i:02d}".encode())
        m.priority = i % 4
        p.send(m)
    p.shutdown()
    c = simple(SPEC["group"], topic)
    got, end = [], time.time() + DEADLINE_S
    while len(got) < 4 and time.time() < end:
        got += c.receive(4 - len(got), 1)
    for m in got[1:]:
        c.ack(m)
    c.shutdown()
    return {"got": [(m.body.decode(), m.priority, m.delivery_attempt) for m in got]}


def priority_rest():
    c = simple(SPEC["group"], SPEC["topic"])
    got = receive(c, SPEC["left"])
    c.shutdown()
    return {"got": [(m.body.decode(), m.priority, m.delivery_attempt) for m in got]}


def cross():
    """Receive what the C++ client sent (GCrossIn); send for it to pull (GCrossOut)."""
    c = simple("G-cross", "GCrossIn")
    got = receive(c, 1)
    c.shutdown()
    p = Producer(CFG, ("GCrossOut",))
    p.startup()
    sent = p.send(message("GCrossOut", b"from-grpc", tag="GT", keys=["gk"], props={"color": "green"}))
    p.shutdown()
    return {"got": [seen(m) for m in got], "sent": sent.message_id}


def spread():
    """Through one broker's endpoint: a topic on two brokers, and one only on the other broker."""
    p = Producer(CFG, ("GSpread", "GOnlyB"))
    p.startup()
    for i in range(12):
        p.send(message("GSpread", f"sp{i}".encode()))
    for i in range(2):
        p.send(message("GOnlyB", f"b{i}".encode()))
    p.shutdown()
    both, only_b = simple("G-spread", "GSpread"), simple("G-only-b", "GOnlyB")
    got = {"spread": sorted(m.body.decode() for m in receive(both, 12)),
           "only_b": sorted(m.body.decode() for m in receive(only_b, 2))}
    both.shutdown()
    only_b.shutdown()
    return got


def raw(method, request, response_type, metadata=(("x-mq-client-id", "raw-client"),), field=None):
    with grpc.insecure_channel(SPEC["endpoint"]) as channel:
        call = channel.unary_unary(f"/apache.rocketmq.v2.MessagingService/{method}",
                                   request_serializer=lambda r: r if isinstance(r, bytes) else r.SerializeToString(),
                                   response_deserializer=response_type.FromString)
        try:
            reply = call(request, timeout=5, metadata=metadata)
            out = {"code": pb.Code.Name(reply.status.code), "message": reply.status.message}
            if field:
                out[field] = getattr(reply, field)
            return out
        except grpc.RpcError as exc:
            return {"grpc": exc.code().name}


def errors():
    out = {}
    p = Producer(CFG)
    p.startup()
    try:
        p.send(message("NoSuchTopic", b"x"))
    except Exception as exc:  # noqa: BLE001 - the class name is the result
        out["unknown_topic"] = f"{type(exc).__name__}: {exc}"
    p.shutdown()

    def msg(body, topic="GNormal", **sp):
        return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(
            message_id=sp.pop("message_id", "01ABC"), body_encoding=pb.IDENTITY, message_type=pb.NORMAL, **sp))

    send = lambda *m: raw("SendMessage", rpc.SendMessageRequest(messages=list(m)), rpc.SendMessageResponse)
    out["too_large"] = send(msg(b"x" * (4 * 1024 * 1024 + 1)))
    out["empty_body"] = send(msg(b""))
    out["bad_tag"] = send(msg(b"x", tag="a|b"))
    out["no_messages"] = send()
    out["unknown_topic_raw"] = send(msg(b"x", topic="NoSuchTopic"))
    out["no_client_id"] = raw("SendMessage", rpc.SendMessageRequest(messages=[msg(b"x")]), rpc.SendMessageResponse,
                              metadata=())
    out["malformed"] = raw("SendMessage", b"\xff\xff\xff", rpc.SendMessageResponse)
    out["bad_handle"] = raw("AckMessage", rpc.AckMessageRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name="GNormal"),
        entries=[rpc.AckMessageEntry(message_id="x", receipt_handle="not a handle")]), rpc.AckMessageResponse)
    out["route_unknown"] = raw("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")),
                               rpc.QueryRouteResponse)
    out["unimplemented"] = raw("SyncLiteSubscription", rpc.SyncLiteSubscriptionRequest(), rpc.QueryRouteResponse)
    out["offsets"] = offsets()
    return out


def offsets():
    """The pull-style RPCs (no official client calls them), over GFifo's 4 queues."""
    group = pb.Resource(name="G-raw")
    mq = lambda i: pb.MessageQueue(topic=pb.Resource(name="GFifo"), id=i)
    query = lambda i, policy: raw("QueryOffset", rpc.QueryOffsetRequest(message_queue=mq(i),
                                                                        query_offset_policy=policy),
                                  rpc.QueryOffsetResponse, field="offset")
    out = {"begin": [query(i, pb.BEGINNING)["offset"] for i in range(4)],
           "end": [query(i, pb.END)["offset"] for i in range(4)],
           "before_update": raw("GetOffset", rpc.GetOffsetRequest(group=group, message_queue=mq(0)),
                                rpc.GetOffsetResponse),
           "update": raw("UpdateOffset", rpc.UpdateOffsetRequest(group=group, message_queue=mq(0), offset=1),
                         rpc.UpdateOffsetResponse),
           "after_update": raw("GetOffset", rpc.GetOffsetRequest(group=group, message_queue=mq(0)),
                               rpc.GetOffsetResponse, field="offset"),
           "bad_queue": raw("QueryOffset", rpc.QueryOffsetRequest(message_queue=mq(99)), rpc.QueryOffsetResponse),
           "pull": []}
    with grpc.insecure_channel(SPEC["endpoint"]) as channel:
        pull = channel.unary_stream("/apache.rocketmq.v2.MessagingService/PullMessage",
                                    request_serializer=rpc.PullMessageRequest.SerializeToString,
                                    response_deserializer=rpc.PullMessageResponse.FromString)
        for i in range(4):
            frames = list(pull(rpc.PullMessageRequest(group=group, message_queue=mq(i), offset=0, batch_size=32),
                               timeout=5, metadata=(("x-mq-client-id", "raw-client"),)))
            out["pull"].append({"status": pb.Code.Name(frames[0].status.code), "next": frames[-1].next_offset,
                                "bodies": [f.message.body.decode() for f in frames
                                           if f.WhichOneof("content") == "message"]})
    return out


if __name__ == "__main__":
    main((send_receive, fifo, delay, transaction, invisible, filters, share, restart_before, restart_after, push,
          push_fifo, cross, spread, errors, fifo_groups, push_many, priority_backlog, priority_rest))
