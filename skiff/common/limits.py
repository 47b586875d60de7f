"""Every limit in one place, so a reader can see what Skiff refuses and why.

Values that tests or operators need to change are configuration (see the
broker and store configs); these are the defaults and the hard ceilings.
"""

FRAME_MAX_BYTES = 16 * 1024 * 1024
"""Largest remoting frame accepted, as RocketMQ's `frameMaxLength`."""

MESSAGE_MAX_BYTES = 4 * 1024 * 1024
"""Default `maxMessageSize`: the largest message body a broker stores."""

TOPIC_MAX_CHARS = 127
"""A V1 stored record keeps the topic length in one signed byte."""

GROUP_MAX_CHARS = 255

PROPERTIES_MAX_BYTES = 32767
"""The stored record keeps the properties length in a signed 16-bit field."""

COMPRESS_BODY_OVER_BYTES = 4096
"""Clients zlib-compress bodies of at least this size (RocketMQ's default)."""

PULL_MAX_MESSAGES = 1024
"""Most messages one pull answer carries, whatever the client asks."""

PULL_MAX_BYTES = 4 * 1024 * 1024
"""Most body bytes one pull answer carries (the transfer limit)."""

CONNECTION_WRITE_HIGH_BYTES = 8 * 1024 * 1024
"""Output buffered on one connection before its reader is paused."""

CONNECTION_PENDING_REQUESTS = 65536
"""Requests in flight on one connection before new ones are refused."""

QUEUES_PER_TOPIC_MAX = 1024
"""Most read or write queues a topic may have on one broker: every queue is a directory
of mapped files, and a process may only map so many (vm.max_map_count)."""

BATCH_MAX_MESSAGES = 4096
"""Most messages in one batch send."""

LONG_POLL_MAX_SUSPENDED = 100_000
"""Most pull requests a broker holds at once."""

FILTER_EXPRESSION_MAX_CHARS = 16384
"""Longest tag or SQL92 subscription expression a broker or client compiles."""

FILTER_NESTING_MAX_DEPTH = 100
"""Deepest SQL92 expression tree accepted; compiling and printing recurse this deep."""

FILTER_CACHE_MAX_ENTRIES = 1024
"""Compiled filters kept per process, keyed by (expression type, expression)."""

TRACE_BUFFER_MAX_RECORDS = 2048
"""Trace records a client holds before sending; more are dropped (and counted), so tracing
never blocks or fails a send or a listener (RocketMQ's trace dispatcher holds 1024 contexts)."""

TRACE_MESSAGE_MAX_BYTES = 118_000
"""Trace data per trace message: RocketMQ's 128,000-byte trace producer limit less its
10,000-byte margin."""

TRACE_KEYS_MAX_BYTES = 16_384
"""The KEYS of one trace message (every traced msg id and key): half of what a record's
properties may hold, so a batch of traces always fits."""

POP_MAX_MSG_NUMS = 32
"""Most messages one POP_MESSAGE takes (RocketMQ's limit, also the gRPC receive batch cap)."""

VALID_TOPIC_CACHE_SIZE = 65536
"""Topic names a broker remembers as checked (legal, not a system topic), so a send skips
the name check; past this many, new names are checked on every send instead of growing
the set without bound."""

TELEMETRY_QUEUED_MAX = 1024
"""Commands queued for one gRPC client's Telemetry stream (replies to its settings, transaction
checks): a client that sends but stops reading is no longer read from once this many wait,
and checks for it are skipped until it reads (they are asked again next round)."""

LONG_POLL_DEFAULT_MS = 20_000
"""How long a consumer's read waits for a message by default: RocketMQ's pull consumer
suspend time and the 5.x clients' long-polling timeout (20 s)."""

LITE_TOPIC_MAX_BYTES = 64
"""Longest lite topic name (RocketMQ 5.5): the Settings' ``max_lite_topic_size``, the 5.x Java
client's default when Settings name none; longer names are ILLEGAL_LITE_TOPIC."""

LITE_SUBSCRIPTION_QUOTA_DEFAULT = 2000
"""Lite topics one client may subscribe when its group sets no ``lite.sub.client.quota``
(5.5's default); sent to lite clients as ``lite_subscription_quota``."""

LITE_SUBSCRIPTION_QUOTA_MARGIN = 300
"""A SyncLiteSubscription may exceed the quota by this much before it is refused
(LITE_SUBSCRIPTION_QUOTA_EXCEEDED), as the 5.5 proxy allows: clients check the quota themselves."""

LITE_CLIENT_EVENTS_DEFAULT = 400
"""Lite topics one client may hold un-acknowledged batches of at once when its group sets no
``lite.sub.client.max.event.cnt`` (5.5's default for that attribute: the capacity of a client's
queue of ready lite topics); the rest go to the group's other clients (skiff.broker.grpc.lite)."""

LITE_WAKE_MAX_S = 1.0
"""Longest a waiting lite receive sleeps before it looks at its lite topics again (a batch whose
invisible time passed is served again without any send or ack to wake it)."""

LITE_ROUTE_CACHE_S = 5.0
"""How long a broker reuses a lite parent's route to place its lite topics on their owner brokers
(skiff.broker.grpc.lite_peers) before asking the NameServers again: a route changes when a broker
group joins or leaves, and a send should not wait for a NameServer each time."""

GRPC_ENDPOINTS_CACHE_S = 5.0
"""How long a broker reuses the NameServers' table of gRPC endpoints (skiff.broker.grpc.routes) before
reading it again (a route naming a master the table lacks reads it at once): endpoints change only
when a broker restarts on another port, and a route lookup should not cost a second request each time."""

LITE_FORWARD_TIMEOUT_S = 5.0
"""Longest a broker waits for another broker to take a lite message or subscription it forwards
(the proxy's default request timeout is 3 s; a forwarded send then waits its flush too)."""

COALESCED_MAX_BYTES = 1024 * 1024
"""Bodies appended in one write when single-message sends that arrived together are
coalesced (skiff.broker.operations.send_requests): past this a new run starts, so one
run never nears a CommitLog file's end-of-file margin or holds the append lock long."""

TIER_SEGMENT_MAX_MESSAGES = 100_000
"""Messages in one tiered Parquet file (one queue, one offset range): a file stays small
enough to be fetched whole by a broker that serves a read through the tier."""

TIER_SEGMENT_MAX_BYTES = 64 * 1024 * 1024
"""Stored bytes of the records one tiered file holds at most (the same reason)."""

TIER_ROW_GROUP_MESSAGES = 4096
"""Rows per Parquet row group of a tiered file: the unit a read through the tier decodes
and caches."""

TIER_CACHE_MAX_BYTES = 64 * 1024 * 1024
"""Bytes of fetched tier files a broker keeps in memory for reads through the tier (least
recently used first out)."""

TIER_COMPACTED_MERGE_MAX_BYTES = 16 * 1024 * 1024
"""Bytes (of Parquet) of one file a compacted queue's adjacent small tiered files are merged into
(`skiff.tier.tier.merge_groups`), as Kafka's log cleaner groups small segments up to a segment's
size: compacted rewrites shrink files, and each upload fetches every older file sharing a key, so
unmerged they pile up. A quarter of the file cache (TIER_CACHE_MAX_BYTES), so a read through the
tier still caches several, and about what a full upload's file is (TIER_SEGMENT_MAX_BYTES of
records, compressed). The default of the broker key tierCompactedMergeMaxBytes."""

TIER_MANIFEST_MAX_BYTES = 64 * 1024 * 1024
"""A topic's tier manifest: larger is refused as corrupt rather than parsed."""

TIER_MANIFEST_PART_SEGMENTS = 256
"""Segments a manifest part holds (`skiff.tier.manifest_parts`): the manifest its uploader
rewrites after each file lists fewer than twice as many of its own (~1.4 MB at most, at ~2.7 KB
per segment listed with its row groups' ranges), and a history of a million files is ~4,000
parts named in it (~0.6 MB)."""

TIER_QUERY_MAX_FILES = 256
"""Tiered files (newest first within the asked time range) whose key index one query by key
reads: each is a request to the bucket, so a query over years of history answers from the
newest files in the range; a narrower range reaches older ones."""

SPARK_TIER_BATCH_ROWS = 16 * TIER_ROW_GROUP_MESSAGES
"""Rows per Arrow batch a Spark task decodes from a tiered file and hands to the JVM (pyarrow's
streaming reader, across row groups): the JVM's CPU per row of a Python source fell by about a
fifth from batches of 4,096 or 16,384 rows of 100 B to 65,536 (docs/performance.md); a batch
is held whole by the Python worker and the JVM, and never holds more than its file
(TIER_SEGMENT_MAX_BYTES)."""

TIER_INDEX_OLD_MAX_FILES = 16
"""Files uploaded before key indexes existed that one upload pass indexes (each is fetched
whole): a tier of years of such files is indexed over many passes, and uploads go on between."""

TIER_TOMBSTONE_LEARN_MAX_FILES = 16
"""A compacted topic's files uploaded before their oldest tombstone was recorded that one upload
pass reads to record it (each is fetched whole), as TIER_INDEX_OLD_MAX_FILES: the tombstones of a
long history expire over several passes, and uploads go on between."""

TIER_UNTIERED_LOOKUP_MAX_TOPICS = 16
"""Topics with tiered.storage off whose manifest one upload pass looks for in the tier (once each
after a start), so a topic turned off while its master was down still has its retired files
deleted: each is a request to the bucket, and a broker of thousands of topics asks a few a pass."""

TIER_COMPACTED_MERGE_LIMIT_BYTES = TIER_CACHE_MAX_BYTES
"""The largest tierCompactedMergeMaxBytes (whose default is TIER_COMPACTED_MERGE_MAX_BYTES): a
merged file is fetched whole into the file cache by reads through the tier and by each upload that
rewrites it, and a file the size of the cache already pushes every other file out."""

TIER_SETTLE_WAIT_S = 2.0
"""Longest a move to the dead-letter queue (gRPC ForwardMessageToDeadLetterQueue) waits for the
tier to fetch a popped message whose CommitLog copy retention deleted: under the 3 s request
timeout of RocketMQ 5's clients, so the client gets an answer and not a timeout; a fetch that
takes longer is refused as busy (the client forwards again later), and the next try finds the
file cached."""

TIER_PULL_HOLD_MAX_MS = 1000
"""Longest the remoting door holds a pull whose offset the tier is fetching or rebuilding (it is
answered as soon as that ends, typically in tens to hundreds of ms). Without the hold its client
pulls again at once, hundreds of times a first read. Held for a second at most, then answered
"retry at once" as before: well under any client's pull timeout (10 s for Java's pull consumer,
the suspend timeout for push consumers), whether or not the pull asked to be suspended."""

KAFKA_BATCH_INFLATED_MAX_BYTES = 64 * 1024 * 1024
"""Largest a compressed Kafka record batch may inflate to: a few bytes of zstd can claim
gigabytes, and a producer's batch is bounded by its max.request.size (1 MiB by default)."""

KAFKA_FRAME_MAX_BYTES = 100 * 1024 * 1024
"""Largest Kafka request read (Kafka's socket.request.max.bytes default): a bigger size
prefix is a client speaking something else, and the connection is closed."""

AUTH_CLOCK_SKEW_MS = 5 * 60 * 1000
"""How far a gRPC call's signed x-mq-date-time may be from the broker's clock (ACL 2.0): wide
enough for unsynchronised hosts, narrow enough that a captured call is soon useless.
RocketMQ itself never checks it."""

TLS_SNIFF_TIMEOUT_S = 10.0
"""How long a TLS-capable server waits for a new connection's first byte (which tells TLS
from plaintext) before closing it: a socket that says nothing holds a descriptor and no
idle timeout covers it yet."""

TLS_HANDSHAKE_TIMEOUT_S = 10.0
"""How long a server gives a client to finish the TLS handshake."""

TLS_REFUSAL_MAX_BYTES = 64 * 1024
"""What an enforcing TLS server reads of a plaintext client's first request to answer it
with the reason it is refused; a larger frame is not read, the connection just closes."""

KAFKA_PRODUCER_BATCHES_KEPT = 5
"""The batches of an idempotent producer remembered per partition to recognise a retry:
Kafka's NUM_BATCHES_TO_RETAIN, the most a client keeps in flight (max.in.flight 5)."""

KAFKA_PRODUCER_STATES_MAX = 100_000
"""Most (topic, partition, producer id) sequence states a broker holds; past it the oldest
is forgotten (its producer is then treated as new, as Kafka does after
producer.id.expiration.ms)."""

DEDUP_WINDOW_MAX_KEYS = 200_000
"""Most UNIQ_KEYs a topic's duplicate window (``dedup.window.ms``) holds; past it the oldest
are forgotten first, so the window is shorter than its span. About 250 bytes each in
memory (50 MB at the limit); a window read back after a restart reads at most this many
messages in all (each queue's newest, its even share), on the broker's loop."""

KAFKA_CLUSTER_VIEW_TTL_MS = 1_000
"""How long a broker's Kafka door reuses what the NameServers said (the broker groups'
masters and Kafka listeners, a topic's queues per group) before asking again: Produce and
Fetch map every partition through it, and the NameServers' own routes trail brokers by up
to a registration period anyway."""

KAFKA_GROUP_SESSION_MIN_MS = 6_000
KAFKA_GROUP_SESSION_MAX_MS = 1_800_000
"""The session timeouts a Kafka consumer group member may ask for (Kafka's
group.min/max.session.timeout.ms defaults); others are INVALID_SESSION_TIMEOUT."""

KAFKA_INITIAL_REBALANCE_DELAY_MS = 500
"""How long a Kafka group leaving Empty waits for more members before its first generation
(Kafka's group.initial.rebalance.delay.ms is 3 s): consumers started together then join one
generation instead of rebalancing once per arrival; shorter than Kafka's so a lone consumer
starts reading sooner."""

KAFKA_FAILED_AUTH_CLOSE_DELAY_MS = 100
"""How long the Kafka listener keeps a connection whose SASL authentication failed open after
its answer, unless the client closes first (Kafka's connection.failed.authentication.delay.ms
default): a client that reads an end of stream before the answer (kafka-python) would report
a lost connection instead of the authentication error, and a guesser is slowed down."""

AUTH_DECISIONS_CACHED = 10_000
"""ACL 2.0 decisions remembered per (user, what a request needs, peer host) until the users or
ACLs change; past it the memory starts again (a client asks the same few questions repeatedly)."""

AUTH_ADDRESSES_CACHED = 1024
"""Peer hosts whose parsed IP address ACL 2.0 keeps (parsing one costs more than the rest of a check)."""

AUTH_NEEDS_CACHED = 4096
"""What a remoting request needs (a topic or group and its actions), kept per name: sends and
pulls name the same few topics and groups over and over."""

HA_LISTEN_BACKLOG = 100
"""Connections the HA port queues before accepting them: a master has a few slaves, which
reconnect one at a time (asyncio's default backlog, kept when the port serves TLS)."""

HA_SLAVE_GONE_GRACE_S = 1.0
"""Controller mode: how long a SyncStateSet member whose HA connection is closed stays in the
set before the master shrinks it, instead of `haMaxTimeSlaveNotCatchup` (15 s). A closed
connection cannot acknowledge, so until the shrink is in etcd every SYNC_MASTER send waits:
a killed slave held sends for 8-9 s in the chaos runs. The shrink is safe at any time (the
slave can no longer be elected); the grace absorbs a reconnect after a blip."""

H2_RECEIVE_WINDOW_BYTES = 16 * 1024 * 1024
"""The gRPC door's (skiff.protocol.h2) HTTP/2 receive window, per stream and per connection,
replenished when half is used: large so a 5.x client's sends are never throttled by it (the
default 64 KiB would stall 64 in-flight calls), small enough to bound what one connection
can have in flight before a request is read."""

H2_MAX_FRAME_BYTES = 1024 * 1024
"""The largest HTTP/2 frame the gRPC door takes (its SETTINGS_MAX_FRAME_SIZE): fewer frames per
large message than the 16 KiB default; larger frames close the connection (FRAME_SIZE_ERROR)."""

H2_HEADER_LIST_MAX_BYTES = 64 * 1024
"""Largest request header list (and header block) on the gRPC door (SETTINGS_MAX_HEADER_LIST_SIZE):
a 5.x client's metadata is under 1 KiB; past it the connection closes."""

H2_STREAMS_MAX = 1024
"""Calls open at once on one gRPC connection (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused
(REFUSED_STREAM, which clients retry). A 5.x client holds its Telemetry stream, its long polls and
its in-flight sends (64 in the benchmark) on one connection."""

HPACK_STRINGS_CACHED = 4096
"""Huffman-coded header strings a gRPC connection remembers decoded (Python's bit-by-bit decode
is the costliest part of a header block; clients repeat their strings); past it it starts again."""

HPACK_BLOCKS_CACHED = 1024
"""Request header blocks a gRPC connection remembers decoded while its HPACK table is unchanged,
and header lists the gRPC door remembers parsed (skiff.protocol.h2): a client repeating a call
sends the same bytes; past it the memory starts again."""

GRPC_PEERS_PARSED = 4096
"""Peer strings (``ipv4:host:port``) whose (host, port) the gRPC door keeps parsed
(skiff.broker.grpc.server): every call of a connection names the same one."""

SERVER_MALLOC_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""Server processes (`skiff.transport.allocator`): blocks below this come from the heap, not a
fresh mmap. glibc's default (128 KiB, raised only after a large block is freed) mapped each
MiB-sized Kafka Fetch batch and produce frame anew, and the kernel faulted and zeroed its pages
on first touch. 32 MiB is glibc's ceiling for this setting on 64-bit."""

SERVER_MALLOC_TRIM_BYTES = 64 * 1024 * 1024
"""Server processes: free memory at the top of the heap kept for the next requests before it is
given back to the kernel. glibc's default gave back the 8 MiB of a Fetch's answer after every
Fetch and faulted it in again for the next; 64 MiB holds a Fetch at librdkafka's 50 MiB
fetch.max.bytes, at the price of up to that much more resident memory when idle."""
