"""The gate: every check made before an operation, in RocketMQ's order, once for all doors.

Sends: the broker's role (a slave or a master without its lease takes none), the
broker's write permission, the topic name (legal, not a system topic), the topic's
existence (auto-created through the template when the door allows it), the topic's
write permission, the queue id (negative: any write queue; at or past the larger
queue count: SYSTEM_ERROR, as RocketMQ's msgCheck).

Settling a popped message (ack, change of invisible time, dead-lettering): the topic
(TOPIC_NOT_EXIST) and the queue id (MESSAGE_ILLEGAL), as RocketMQ's ack processors.

Consumption (pull, pop, gRPC receive and pull): the group (SUBSCRIPTION_GROUP_NOT_EXIST,
auto-created when ``autoCreateSubscriptionGroup``), its ``consumeEnable`` and the
broker's read permission (NO_PERMISSION), the topic (TOPIC_NOT_EXIST), its read
permission (NO_PERMISSION), the queue id against the read queues (SYSTEM_ERROR, as
RocketMQ's pull and pop processors).

Access (ACL 2.0, `skiff.broker.auth`): `Gate.access` is the one authorization check of every
request through either door. Each door authenticates its caller (a remoting signature, a gRPC
authorization header) and names what the request touches; the gate asks the user's policies,
and refuses with NO_PERMISSION and the reason (gRPC: FORBIDDEN). RocketMQ 4.x plain ACL is
checked instead on the remoting frames that carry its signatures (`skiff.broker.acl`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from skiff.broker.auth import AuthService, Caller, Need
from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.ha.role import Role
from skiff.broker.operations.refusal import Refusal
from skiff.broker.topics import TopicConfigManager
from skiff.common.limits import VALID_TOPIC_CACHE_SIZE
from skiff.common.names import SYSTEM_TOPICS, topic_error
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.bodies.topic import Perm, TopicConfig
from skiff.protocol.codes import ResponseCode

ANY_QUEUE = None
"""A consuming request's queue when it reads every queue of the topic (a pop of queue -1,
a gRPC receive)."""
_READ = int(Perm.READ)
_WRITE = int(Perm.WRITE)

Create = Callable[[], TopicConfig | None]
"""Makes the missing topic of a send (from its template), or says it cannot (None)."""


class Gate:
    def __init__(self, config: BrokerConfig, role: Role, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager) -> None:
        """``role``: the broker's live role (changed by failover), required so that no check
        reads a frozen copy of broker.conf's."""
        self.config = config
        self.role = role
        self.topics = topics
        self.groups = groups
        self.auth: AuthService | None = None
        """ACL 2.0 when authentication or authorization is on."""
        self._valid_topics: set[str] = set()

    def access(self, caller: Caller, needs: Sequence[Need], code: int | str, *, quiet: bool = False) -> Refusal | None:
        """Whether ``caller`` may make request ``code`` (a remoting code, a gRPC request's name),
        which touches ``needs``: the one authorization check of both doors (``quiet``: a
        refusal is logged at debug level, `AuthService.authorize`)."""
        if self.auth is None:
            return None
        why = self.auth.authorize(caller, needs, code, quiet=quiet)
        return None if why is None else Refusal(ResponseCode.NO_PERMISSION, why)

    def writable(self, topic: str, queue_id: int, create: Create | None,
                 template: str = "") -> tuple[TopicConfig, int] | Refusal:
        """The topic and the queue a send goes to, or why it may not; a missing topic is made by
        ``create`` (from ``template``), where the door allows it."""
        # a topic that passed before is in `_valid_topics`: tested here, one call fewer per send
        refusal = self._broker_writable() or (None if topic in self._valid_topics else self._topic_name_refusal(topic))
        if refusal is not None:
            return refusal
        tc = self.topics.get(topic) or (create() if create is not None else None)
        if tc is None:
            return Refusal(ResponseCode.TOPIC_NOT_EXIST, self._no_topic_reason(topic, create is not None, template))
        if not tc.perm & _WRITE:
            return Refusal(ResponseCode.NO_PERMISSION, f"the topic {topic} does not accept messages (perm {tc.perm})")
        if queue_id < 0:
            if not tc.write_queue_nums:
                return Refusal(ResponseCode.NO_PERMISSION, f"the topic {topic} has no write queue")
            return tc, random.randrange(tc.write_queue_nums)
        if queue_id >= max(tc.write_queue_nums, tc.read_queue_nums):  # msgCheck's bound: a queue still read is kept
            return Refusal(ResponseCode.SYSTEM_ERROR, f"queueId {queue_id} is illegal: topic {topic} has "
                                                      f"{tc.write_queue_nums} write and {tc.read_queue_nums} read queues",
                           bad_request=True)
        return tc, queue_id

    def consumable(self, group_name: str, topic: str, queue_id: int | None) -> SubscriptionGroupConfig | Refusal:
        """The group, if it may read ``topic``'s queue ``queue_id`` (`ANY_QUEUE` for all) here."""
        group = self.groups.find_or_create(group_name)
        if group is None:
            return Refusal(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                           f"subscription group {group_name} does not exist on this broker")
        if not group.consume_enable:
            return Refusal(ResponseCode.NO_PERMISSION, f"subscription group {group_name} may not consume")
        if not self.config.broker_permission & _READ:
            return Refusal(ResponseCode.NO_PERMISSION,
                           f"the broker {self.config.broker_name} does not serve reads now (brokerPermission)")
        tc = self.topics.get(topic)
        if tc is None:
            return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        if not tc.perm & _READ:
            return Refusal(ResponseCode.NO_PERMISSION, f"the topic {topic} may not be read (perm {tc.perm})")
        if queue_id is not ANY_QUEUE and not 0 <= queue_id < tc.read_queue_nums:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"queue {queue_id} of topic {topic} is not readable: "
                                                      f"it has {tc.read_queue_nums} read queues", bad_request=True)
        return group

    def settleable(self, group_name: str, topic: str, queue_id: int) -> TopicConfig | Refusal:
        """The topic, if a popped message of its queue ``queue_id`` may be acknowledged, hidden
        again or dead-lettered here (``topic``: the one the message was popped from, the group's
        retry topic for a retried one). As RocketMQ's ack processors, the group is not checked:
        a handle of a group that is gone names nothing in flight; ACL's check needs it."""
        return self._read_queue(topic, queue_id, ResponseCode.MESSAGE_ILLEGAL)

    def readable_queue(self, topic: str, queue_id: int) -> TopicConfig | Refusal:
        """The topic, if its queue ``queue_id`` exists here: for reads of offsets, which need
        no group (QUERY_OFFSET's and GetOffset's bounds)."""
        return self._read_queue(topic, queue_id, ResponseCode.SYSTEM_ERROR)

    def topic(self, topic: str) -> TopicConfig | Refusal:
        """The topic, if it exists here: for the admin requests that name one (consume stats, an
        offset reset, compaction), which need no permission bit of it."""
        tc = self.topics.get(topic)
        if tc is None:
            return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        return tc

    def _read_queue(self, topic: str, queue_id: int, bad_queue_code: int) -> TopicConfig | Refusal:
        tc = self.topic(topic)
        if isinstance(tc, Refusal):
            return tc
        if not 0 <= queue_id < tc.read_queue_nums:
            return Refusal(bad_queue_code, f"queue {queue_id} of topic {topic} is not readable: "
                                           f"it has {tc.read_queue_nums} read queues", bad_request=True)
        return tc

    def _broker_writable(self) -> Refusal | None:
        why = self.role.refusal()
        if why is not None:
            return Refusal(ResponseCode.SERVICE_NOT_AVAILABLE,
                           f"the broker {self.config.broker_name} (brokerId {self.role.broker_id}) {why}")
        if not self.config.broker_permission & _WRITE:
            return Refusal(ResponseCode.NO_PERMISSION,
                           f"the broker {self.config.broker_name} does not accept messages now (brokerPermission)")
        return None

    def _topic_name_refusal(self, topic: str) -> Refusal | None:
        if topic in self._valid_topics:
            return None
        why = topic_error(topic)
        if why is not None:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, why)
        if topic in SYSTEM_TOPICS:
            return Refusal(ResponseCode.NO_PERMISSION, f"sending to the system topic {topic} is forbidden")
        if len(self._valid_topics) < VALID_TOPIC_CACHE_SIZE:
            self._valid_topics.add(topic)
        return None

    def _no_topic_reason(self, topic: str, creatable: bool, template: str) -> str:
        if not creatable:
            return f"topic {topic} does not exist on broker {self.config.broker_name}"
        why = ("autoCreateTopicEnable is false" if not self.config.auto_create_topic_enable
               else f"its template topic {template!r} does not exist here or does not let topics inherit it")
        return f"topic {topic} does not exist on broker {self.config.broker_name} and cannot be created: {why}"
