"""Transactional messages: a message is delivered only if the local transaction commits.

    python examples/transaction.py --namesrv 127.0.0.1:9876 --topic DemoTx

Three orders are "placed" in a local table (a dict standing in for a database),
each inside ``send_in_transaction``: order-1 commits, order-2 rolls back, and
order-3's local transaction cannot tell yet (UNKNOW). The broker later asks the
producer group about order-3; the checker finds it in the table and commits it.
A push consumer then receives order-1 and order-3, never order-2. Each order's
line shows the local answer and the message id; the last line what was consumed.
The broker asks after ``transactionTimeOut`` (6 s by default) at its next check
round (every ``transactionCheckInterval``, 60 s by default), so with a default
broker this example waits about a minute for order-3.
"""

from __future__ import annotations

import argparse
import threading

from skiff.client import (
    ConsumeFromWhere,
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    PushConsumer,
    TransactionProducer,
)

PLACED: dict[str, str] = {}
"""The local "database": order id → state, written by the local transactions."""


def place_order(msg: Message, decision: str) -> LocalTransactionState:
    """The local transaction: record the order, and say whether the message should go out."""
    order = msg.keys[0]
    if decision == "rollback":
        return LocalTransactionState.ROLLBACK_MESSAGE
    PLACED[order] = "placed"
    if decision == "unsure":  # e.g. the database commit timed out: let the broker ask later
        return LocalTransactionState.UNKNOW
    return LocalTransactionState.COMMIT_MESSAGE


def check_order(msg: MessageExt) -> LocalTransactionState:
    """The broker asks about a transaction left open: look the order up."""
    placed = msg.keys and PLACED.get(msg.keys[0]) == "placed"
    return LocalTransactionState.COMMIT_MESSAGE if placed else LocalTransactionState.ROLLBACK_MESSAGE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoTx")
    parser.add_argument("--timeout-s", type=float, default=120.0)
    args = parser.parse_args()

    with TransactionProducer("demo-tx-producer", args.namesrv, checker=check_order) as producer:
        for order, decision in (("order-1", "commit"), ("order-2", "rollback"), ("order-3", "unsure")):
            result = producer.send_in_transaction(Message.of(args.topic, f"{order} placed", keys=order),
                                                  place_order, decision)
            print(f"{order} {result.local_transaction_state.name} id={result.msg_id}", flush=True)

        consumed: list[str] = []
        both = threading.Event()

        def on_messages(msgs: list[MessageExt], ctx: object) -> ConsumeStatus:
            consumed.extend(m.keys[0] for m in msgs)
            if len(consumed) >= 2:
                both.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("demo-tx-consumer", args.namesrv,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(args.topic, "*")
        consumer.register_listener(on_messages)
        with consumer:  # the producer stays up meanwhile: it answers the broker's check of order-3
            finished = both.wait(args.timeout_s)
    print(f"consumed {' '.join(sorted(consumed))}", flush=True)
    return 0 if finished else 1


if __name__ == "__main__":
    raise SystemExit(main())
