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

COALESCED_MAX_BYTES = 1024 * 1024
"""Bodies appended in one write when single-message sends that arrived together are
coalesced (skiff.broker.operations.send_requests): past this a new run starts, so one
run never nears a CommitLog file's end-of-file margin or holds the append lock long."""
