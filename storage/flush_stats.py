"""Kafka's LogFlushStats (LogFlushRateAndTimeMs): how many fsyncs of log segments ran and how
long they took, for the broker's metrics. Written by the executor threads that flush (a lock: a
flush is an fsync of milliseconds, the lock costs nothing next to it), read when scraped."""

from __future__ import annotations

import bisect
import threading

# bucket bounds in ms; the last bucket is +Inf
BOUNDS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class FlushStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.buckets = [0] * (len(BOUNDS_MS) + 1)
        self.sum_ms = 0.0

    def record(self, ms: float) -> None:
        with self._lock:
            self.buckets[bisect.bisect_left(BOUNDS_MS, ms)] += 1
            self.sum_ms += ms

    def snapshot(self) -> tuple[list[int], float]:
        with self._lock:
            return list(self.buckets), self.sum_ms


LOG_FLUSH_STATS = FlushStats()  # one per process, as Kafka's LogFlushStats object
