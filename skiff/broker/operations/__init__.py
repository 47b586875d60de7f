"""The broker's operations: one typed core under every protocol door.

Each operation takes a request dataclass and returns its outcome or one `Refusal`;
the remoting processors (`skiff.broker.processors`) and the gRPC handlers
(`skiff.broker.grpc`) are adapters that decode their wire shape, call the
operation and encode the answer. Every check made before an operation is the
`Gate`'s. docs/operations-layer.md traces a send and a pull through both doors.
"""

from dataclasses import dataclass

from skiff.broker.operations.auth import AclDeletion, AuthAdminOperation, UserChange
from skiff.broker.operations.broker_info import BrokerInfoOperation, BrokerProperties
from skiff.broker.operations.compaction import CompactionOperation, CompactionState
from skiff.broker.operations.connections import ConnectionsOperation
from skiff.broker.operations.consume_stats import ConsumeStatsOperation, ConsumeStatsRequest
from skiff.broker.operations.gate import ANY_QUEUE, Gate
from skiff.broker.operations.groups import GroupDeletion, GroupsOperation
from skiff.broker.operations.locks import LockRequest, LocksOperation
from skiff.broker.operations.membership import Heartbeat, Leaving, MembershipOperation
from skiff.broker.operations.messages import KeyMatches, KeyQuery, MessagesOperation
from skiff.broker.operations.offset_reset import LATEST, OffsetReset, OffsetResetOperation
from skiff.broker.operations.offsets import OffsetsOperation, QueueEdge
from skiff.broker.operations.pop import AckRequest, ChangeInvisibleRequest, PopOperation, PopOutcome, PopRequest
from skiff.broker.operations.pull import PullOperation, PullRequest, Pulled
from skiff.broker.operations.refusal import Refusal
from skiff.broker.operations.send import Outgoing, SendOperation, SendRequest, Sent, born_host
from skiff.broker.operations.subscription import compile_subscription, properties_of, record_filter
from skiff.broker.operations.tier import TierOperation
from skiff.broker.operations.timer import CancelOperation, TimerState, TimerStateOperation
from skiff.broker.operations.topic_stats import TopicStatsOperation
from skiff.broker.operations.topics import TopicChange, TopicsOperation
from skiff.broker.operations.transaction import EndTransactionOperation



@dataclass(frozen=True, slots=True)
class Operations:
    """The operations one broker serves, shared by its doors."""

    gate: Gate
    send: SendOperation
    pull: PullOperation
    end_transaction: EndTransactionOperation
    cancel: CancelOperation
    offsets: OffsetsOperation
    topics: TopicsOperation
    pop: PopOperation
    groups: GroupsOperation
    consume_stats: ConsumeStatsOperation
    offset_reset: OffsetResetOperation
    connections: ConnectionsOperation
    membership: MembershipOperation
    locks: LocksOperation
    messages: MessagesOperation
    timer: TimerStateOperation
    compaction: CompactionOperation
    topic_stats: TopicStatsOperation
    broker_info: BrokerInfoOperation
    tier: TierOperation
    auth_admin: AuthAdminOperation


__all__ = [
    "ANY_QUEUE", "LATEST", "AckRequest", "AclDeletion", "AuthAdminOperation", "BrokerInfoOperation",
    "BrokerProperties", "CancelOperation", "ChangeInvisibleRequest", "CompactionOperation",
    "CompactionState", "ConnectionsOperation", "ConsumeStatsOperation", "ConsumeStatsRequest",
    "EndTransactionOperation", "Gate", "GroupDeletion", "GroupsOperation", "Heartbeat", "KeyMatches", "KeyQuery",
    "Leaving", "LockRequest", "LocksOperation", "MembershipOperation", "MessagesOperation", "OffsetReset",
    "OffsetResetOperation", "OffsetsOperation", "Operations", "Outgoing", "PopOperation", "PopOutcome", "PopRequest",
    "PullOperation", "PullRequest", "Pulled", "QueueEdge", "Refusal", "SendOperation", "SendRequest", "Sent",
    "TierOperation", "TimerState", "TimerStateOperation", "TopicChange", "TopicStatsOperation", "TopicsOperation",
    "UserChange", "born_host", "compile_subscription",
    "properties_of", "record_filter",
]
