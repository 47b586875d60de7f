"""A warning, once, when the broker's queues come near its open-file limit.

Every ConsumeQueue file holds a descriptor (RocketMQ's docs ask for ``ulimit -n
655350``), so a broker with more queues than its limit fails with "Too many open
files" as they fill. A low limit alone is nothing to act on (a try-out broker with
a dozen topics is fine at 1,024), so the warning comes only when the queues the
broker has reach `QUEUE_SHARE` of the limit, checked at start and whenever a topic
changes, and only once per process: an operator acts on it once.
"""

from __future__ import annotations

import logging
import resource

from skiff.broker.topics import TopicConfigManager

log = logging.getLogger(__name__)

QUEUE_SHARE = 0.5
"""Warn when the queues reach this share of the limit: the rest is for CommitLog and
index files, sockets and the queues a burst of new topics brings."""


def open_file_limit() -> int | None:
    """This process's soft limit of open files; None when unlimited."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def queue_count(topics: TopicConfigManager) -> int:
    """The ConsumeQueues the broker's topics can have (each topic's larger queue count)."""
    total = 0
    for name in topics.topics():
        tc = topics.get(name)
        if tc is not None:
            total += max(tc.read_queue_nums, tc.write_queue_nums)
    return total


class OpenFileWatch:
    def __init__(self, topics: TopicConfigManager, limit: int | None = None) -> None:
        self.topics = topics
        self.limit = open_file_limit() if limit is None else limit
        self.warned = False

    def check(self) -> bool:
        """Warn if the queues reached `QUEUE_SHARE` of the limit (once); True when they did."""
        if self.limit is None:
            return False
        queues = queue_count(self.topics)
        if queues < self.limit * QUEUE_SHARE:
            return False
        if not self.warned:
            self.warned = True
            log.warning("this broker has %d queues and may open at most %d files (one per ConsumeQueue file, "
                        "plus CommitLog, index and sockets): raise the limit (ulimit -Hn, systemd LimitNOFILE) "
                        "before more topics fail with 'Too many open files'", queues, self.limit)
        return True
