"""Replication throttles (KIP-73; Kafka's ReplicationQuotaManager), so that moving replicas with
`kafka-reassign-partitions --throttle` does not take the bandwidth the clients and the in-sync
followers need.

Two managers per broker, both bounded by dynamic broker configs (per broker `/config/brokers/<id>`,
else the cluster default; unset = unlimited):
* leader (`leader.replication.throttled.rate`): a leader answers a follower's fetch of a throttled
  partition with no records while the rate of throttled bytes it served is over the bound -- unless
  that follower is in the ISR (Kafka's shouldLeaderThrottle);
* follower (`follower.replication.throttled.rate`): a follower leaves a throttled partition out of
  its fetches while the throttled bytes it appended are over the bound, unless it is caught up
  with the leader's high watermark (shouldFollowerThrottle).

Which partitions are throttled is per topic: `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas`, lists of `partition:broker` (or `*`, every replica);
a broker throttles the partitions listed with its own id (TopicConfigHandler.parseThrottledPartitions).
The rate is Kafka's: the bytes of the last `replication.quota.window.num` windows of
`replication.quota.window.size.seconds`, over at least that many windows less one -- so a throttle
starts after a burst of up to (num - 1) x size x rate bytes, as Kafka's does.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Sequence

import structlog

log = structlog.get_logger("odradek.replication_quota")

UNLIMITED = 9223372036854775807  # QuotaConfigs.QUOTA_BYTES_PER_SECOND_DEFAULT (Long.MAX_VALUE)
ALL_REPLICAS = "*"


class Rate:
    """Kafka's Rate over a SampledStat: `samples` windows of `window_ms`, the oldest reused."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._windows: deque[list[float]] = deque()  # [start ms, bytes]

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        if not self._windows or now_ms - self._windows[-1][0] >= self.window_ms:
            if len(self._windows) == self.samples:
                self._windows.popleft()
            self._windows.append([now_ms, 0.0])
        self._windows[-1][1] += value

    def measure(self, now_ms: float) -> float:
        """Bytes per second."""
        elapsed = self.window_size(now_ms)
        return sum(w[1] for w in self._windows) / (elapsed / 1000)

    def window_size(self, now_ms: float) -> float:
        """Rate.windowSize: the span in ms the rate is measured over -- since the oldest window
        started, and at least samples - 1 windows (a young rate has no start burst)."""
        self._purge(now_ms)
        elapsed = now_ms - (self._windows[0][0] if self._windows else now_ms)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        while self._windows and now_ms - self._windows[0][0] >= expire:
            self._windows.popleft()


@functools.lru_cache(maxsize=1024)
def throttled_partitions(entries: tuple[str, ...], broker_id: int) -> frozenset[int] | str:
    """The partitions a `*.replication.throttled.replicas` value throttles on `broker_id`:
    ALL_REPLICAS, or the ids listed as `partition:broker_id`."""
    if any(e.strip() == ALL_REPLICAS for e in entries):
        return ALL_REPLICAS
    out = set()
    for e in entries:
        partition, _, broker = e.strip().partition(":")
        if broker.strip() == str(broker_id):
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuotaManager:
    """One direction's throttle (see the module docstring)."""

    def __init__(self, name: str, broker_id: int, samples: int = 11, window_s: int = 1) -> None:
        self.name = name  # "leader" or "follower": the topic config and the rate's key
        self.broker_id = broker_id
        self.bound = UNLIMITED
        self.rate = Rate(samples, window_s * 1000)

    def update_quota(self, bound: int) -> None:
        if bound != self.bound:
            log.info("Replication throttle changed", direction=self.name, config=f"{self.name}.replication.throttled.rate",
                     bytes_per_second=None if bound == UNLIMITED else bound)
        self.bound = bound

    def is_throttled(self, partition: int, throttled_replicas: Sequence[str]) -> bool:
        """Whether this partition (of a topic whose `<name>.replication.throttled.replicas` is
        `throttled_replicas`) is throttled on this broker."""
        if not throttled_replicas or self.bound == UNLIMITED:
            return False
        parts = throttled_partitions(tuple(throttled_replicas), self.broker_id)
        return parts == ALL_REPLICAS or partition in parts

    def is_quota_exceeded(self, now_ms: float | None = None) -> bool:
        if self.bound == UNLIMITED:
            return False
        return self.rate.measure(time.monotonic() * 1000 if now_ms is None else now_ms) > self.bound

    def record(self, nbytes: int, now_ms: float | None = None) -> None:
        if nbytes:
            self.rate.record(nbytes, time.monotonic() * 1000 if now_ms is None else now_ms)
