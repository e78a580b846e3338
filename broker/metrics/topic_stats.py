"""Kafka's BrokerTopicStats as plain integers: messages in, bytes in and bytes out per topic.

Why not prometheus-client's Counter: its inc() takes a lock and resolves a label child on each
call, and these counters are bumped for every partition of every Produce and Fetch. Here the
produce/fetch paths do a dict lookup and an integer add on the event loop (the only writer), and
the Collector (broker/metrics/collector.py) copies the dicts at scrape time, on the loop too.
"""

from __future__ import annotations


class TopicCounters:
    """One topic's totals since the broker started (Kafka's per-topic BrokerTopicMetrics)."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0


class BrokerTopicStats:
    """Per-topic and all-topics counters. Kafka counts every append to a leader (internal topics
    included) as in, and only consumers' fetched bytes as out (followers' are replication)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.all = TopicCounters()

    def _of(self, topic: str) -> TopicCounters:
        c = self.topics.get(topic)
        if c is None:
            c = self.topics[topic] = TopicCounters()
        return c

    def record_append(self, topic: str, messages: int, size: int) -> None:
        c = self._of(topic)
        c.messages_in += messages
        c.bytes_in += size
        a = self.all
        a.messages_in += messages
        a.bytes_in += size

    def record_bytes_out(self, topic: str, size: int) -> None:
        self._of(topic).bytes_out += size
        self.all.bytes_out += size

    def remove_topic(self, topic: str) -> None:
        """A deleted topic's series go away (Kafka's removeMetrics on topic deletion)."""
        self.topics.pop(topic, None)
