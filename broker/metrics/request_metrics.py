"""Kafka's RequestMetrics per API: request counts and the time histograms of each phase of a
request in our pipeline, recorded with integer adds into fixed buckets (no locks, no labels
resolved per request) and exported at scrape time.

Kafka's phases and what they are here (broker/network.py):

* RequestQueueTimeMs: from the arrival of the connection's last bytes to the dispatch of the
  request; 0 when a frame is dispatched in the read callback that completed it, longer for frames
  held while the connection was muted (too many in flight, unsent responses, memory pool).
* LocalTimeMs: the handler running until it first waits (eager handlers, Produce and Fetch, which
  run in the read callback) or until it finishes (the other handlers run in a task of their own:
  their awaits -- executor I/O, coordinator writes -- count as local time).
* RemoteTimeMs: from that first wait to the response (the purgatory: acks=all produce waiting for
  followers, a fetch waiting for min.bytes); 0 for handlers that never waited.
* TotalTimeMs: arrival to finished response. ResponseQueueTimeMs / ResponseSendTimeMs are not
  measured yet (a response's chunks are not tracked once they join the connection's queue).
"""

from __future__ import annotations

import bisect
import time

# bucket bounds in ms (Prometheus histogram `le` values); the last bucket is +Inf
BOUNDS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "totaltimems")


class Histogram:
    """Counts per bucket (not cumulative) and the sum, in ms."""

    __slots__ = ("buckets", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BOUNDS_MS) + 1)
        self.sum = 0.0

    def observe(self, ms: float) -> None:
        self.buckets[bisect.bisect_left(BOUNDS_MS, ms)] += 1
        self.sum += ms

    def cumulative(self) -> list[tuple[str, float]]:
        return cumulative(BOUNDS_MS, self.buckets)


def cumulative(bounds: tuple[float, ...], buckets: list[int]) -> list[tuple[str, float]]:
    """Per-bucket counts as Prometheus' cumulative (le, count) pairs, +Inf last."""
    out = []
    total = 0
    for bound, n in zip((*map(str, bounds), "+Inf"), buckets, strict=True):
        total += n
        out.append((bound, float(total)))
    return out


class ApiMetrics:
    __slots__ = ("count", "phases")

    def __init__(self) -> None:
        self.count = 0
        self.phases = tuple(Histogram() for _ in PHASES)


class RequestMetrics:
    """Per API key; written on the event loop only, read by the collector on the loop."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiMetrics] = {}

    def record(self, api_key: int, received: float, started: float, suspended: float) -> None:
        """One request whose handler finished now; times are time.monotonic() seconds,
        `suspended` 0.0 when the handler never waited."""
        done = time.monotonic()
        m = self.apis.get(api_key)
        if m is None:
            m = self.apis[api_key] = ApiMetrics()
        m.count += 1
        queue, local, remote, total = m.phases
        queue.observe(max(0.0, started - received) * 1000)
        if suspended:
            local.observe((suspended - started) * 1000)
            remote.observe((done - suspended) * 1000)
        else:
            local.observe((done - started) * 1000)
            remote.observe(0.0)
        total.observe(max(0.0, done - received) * 1000)
