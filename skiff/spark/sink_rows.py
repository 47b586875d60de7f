"""What the skiff sink makes of a DataFrame's rows: which columns it takes, the queue
each row goes to, and idempotent message ids (`skiff.spark.arrow_encode` encodes them).

Columns (names case-insensitive, as Spark resolves them):

| column        | type                         | meaning                                         |
|---------------|------------------------------|-------------------------------------------------|
| `body`        | binary or string (required)  | the message body (a string is sent as UTF-8)    |
| `topic`       | string                       | per-row topic; else the `topic` option          |
| `tags`        | string                       | the message's tag                               |
| `keys`        | string                       | business keys, space separated                  |
| `properties`  | map<string,string>           | user properties                                 |
| `queue_id`    | int                          | pin the queue (with `broker` on a multi-broker  |
|               |                              | topic)                                          |
| `broker`      | string                       | the broker of `queue_id`                        |
| `shardingKey` | string                       | same key, same queue (ordered per key)          |

Any other column is an error (a misspelt ``tag`` column would otherwise be
dropped without a word); select the columns to send.

Idempotent ids: with ``idempotent=true`` each row's UNIQ_KEY (its msg id) is a
hash of (scope, partition, row number in the partition), the scope being the
streaming query id and micro-batch id, or the ``writeId`` option of a batch
write. A replayed micro-batch with the same rows in the same order (any
deterministic source, e.g. skiff or Kafka) sends the same ids, and consumers
drop the ids they have seen (docs/spark.md shows how).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql.types import (
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from skiff.client import SelectByHash
from skiff.common.message import MessageQueue
from skiff.spark.errors import SparkOptionError
from skiff.spark.options import SinkOptions

_STRING = StringType()
_INTS = (ByteType(), ShortType(), IntegerType(), LongType())
COLUMN_TYPES: dict[str, tuple[DataType, ...]] = {
    "body": (BinaryType(), _STRING),
    "topic": (_STRING,),
    "tags": (_STRING,),
    "keys": (_STRING,),
    "properties": (MapType(_STRING, _STRING),),
    "queue_id": _INTS,
    "broker": (_STRING,),
    "shardingkey": (_STRING,),
}
_HASH = SelectByHash()


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """The sink's columns of a DataFrame: lower-case name -> the name as the DataFrame spells it."""

    names: dict[str, str]

    @classmethod
    def of(cls, schema: StructType, options: SinkOptions) -> SinkColumns:
        names = {}
        for field in schema.fields:
            key = field.name.lower()
            if key not in COLUMN_TYPES:
                raise SparkOptionError(f"the skiff sink has no column {field.name!r}; it takes "
                                       f"body, topic, tags, keys, properties, queue_id, broker and shardingKey")
            if not any(_same_type(field.dataType, t) for t in COLUMN_TYPES[key]):
                wanted = " or ".join(t.simpleString() for t in COLUMN_TYPES[key])
                raise SparkOptionError(f"column {field.name!r} is {field.dataType.simpleString()}; "
                                       f"the skiff sink wants {wanted}")
            names[key] = field.name
        cls._check(names, options)
        return cls(names)

    @staticmethod
    def _check(names: dict[str, str], options: SinkOptions) -> None:
        if "body" not in names:
            raise SparkOptionError("the skiff sink needs a body column (binary or string)")
        if "topic" not in names and options.topic is None:
            raise SparkOptionError("give the topic: a topic column or the topic option")
        if "queue_id" in names and "shardingkey" in names:
            raise SparkOptionError("give queue_id (pin a queue) or shardingKey (hash a key to a queue), not both")
        if "broker" in names and "queue_id" not in names:
            raise SparkOptionError("the broker column places rows only together with a queue_id column")


def _same_type(actual: DataType, wanted: DataType) -> bool:
    if isinstance(wanted, MapType):
        return isinstance(actual, MapType) and actual.keyType == wanted.keyType and \
            actual.valueType == wanted.valueType
    return type(actual) is type(wanted)


def idempotent_ids(scope: str, partition_id: int) -> Callable[[int], str]:
    """``row -> id``: 32 upper-case hex digits (a UNIQ_KEY's shape), the same on every replay."""
    prefix = f"{scope}/{partition_id}/".encode()

    def msg_id(row: int) -> str:
        return hashlib.blake2b(prefix + str(row).encode(), digest_size=16).hexdigest().upper()

    return msg_id


def place(topic: str, broker: str | None, queue_id: int | None, sharding_key: str | None,
          queues: Sequence[MessageQueue]) -> MessageQueue | None:
    """The queue a row must go to among ``topic``'s publish ``queues`` (route order), or None
    when any queue will do (the producer then picks and retries on another broker)."""
    if sharding_key is not None:
        return _HASH(queues, None, sharding_key)
    if queue_id is None:
        return None
    brokers = sorted({q.broker_name for q in queues})
    broker = broker or (brokers[0] if len(brokers) == 1 else None)
    if broker is None:
        raise SparkOptionError(f"topic {topic} is on brokers {', '.join(brokers)}: a queue_id needs a "
                               f"broker column to say which")
    mq = MessageQueue(topic, broker, int(queue_id))
    if mq not in queues:
        raise SparkOptionError(f"queue {mq} is not a writable queue of topic {topic} "
                               f"(writable: {', '.join(str(q) for q in queues)})")
    return mq
