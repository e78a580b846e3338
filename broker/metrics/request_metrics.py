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
* ResponseQueueTimeMs: from the finished response to the moment the connection starts writing it:
  responses go out in request order, so one finished early waits for the slower ones before it,
  and for their bytes to be handed to the transport (Kafka's response queue of the processor, and
  its one send at a time per channel).
* ResponseSendTimeMs: from that start until the transport took its last byte (sendfile regions
  included), waits for a full socket (pause_writing) included.
* TotalTimeMs: arrival to that last byte, the sum of the phases. A request without a response
  (acks=0 produce) ends when its handler does, its response phases 0, as Kafka's NoOpResponse.

The connection marks where a response starts and ends in its outgoing queue (broker/network.py
`_Mark`) only while metrics are on; the marks call `ResponseTiming.dequeued` / `.sent`.

Names (the `request` label) are Kafka's ApiKeys names; a Fetch is counted under `Fetch` and also
under `FetchConsumer` or `FetchFollower`, as Kafka's RequestChannel does (a follower's fetch has a
replica id >= 0).
"""

from __future__ import annotations

import bisect
import time

# bucket bounds in ms (Prometheus histogram `le` values); the last bucket is +Inf
BOUNDS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems",
          "totaltimems")
FETCH_KEY = 1
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"


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


class ResponseTiming:
    """One request's times (time.monotonic() seconds) from arrival to its last byte sent."""

    __slots__ = ("dequeued_at", "done", "keys", "metrics", "received", "started", "suspended")

    def __init__(self, metrics: RequestMetrics, keys: tuple[int | str, ...], received: float, started: float,
                 suspended: float) -> None:
        self.metrics = metrics
        self.keys = keys
        self.received = received
        self.started = started
        self.suspended = suspended
        self.done = time.monotonic()
        self.dequeued_at = self.done

    def dequeued(self) -> None:
        """The connection starts writing the response."""
        self.dequeued_at = time.monotonic()

    def sent(self) -> None:
        """The transport took the response's last byte: every phase is known, record them."""
        self.metrics.record(self, time.monotonic())


class RequestMetrics:
    """Per API key (and Kafka's FetchConsumer / FetchFollower); written on the event loop only,
    read by the collector on the loop."""

    def __init__(self) -> None:
        self.apis: dict[int | str, ApiMetrics] = {}

    def finished(self, api_key: int, received: float, started: float, suspended: float,
                 fetch_from_follower: bool | None = None) -> ResponseTiming:
        """A request whose handler finished now: its timing, recorded when its response is sent
        (`ResponseTiming.sent`). `suspended` is 0.0 when the handler never waited;
        `fetch_from_follower` says which of Kafka's Fetch splits a Fetch also counts under."""
        if fetch_from_follower is None:
            keys: tuple[int | str, ...] = (api_key,)
        else:
            keys = (api_key, FETCH_FOLLOWER if fetch_from_follower else FETCH_CONSUMER)
        return ResponseTiming(self, keys, received, started, suspended)

    def record(self, t: ResponseTiming, end: float) -> None:
        local_end = t.suspended or t.done
        times = (max(0.0, t.started - t.received), local_end - t.started, t.done - local_end,
                 max(0.0, t.dequeued_at - t.done), max(0.0, end - t.dequeued_at), max(0.0, end - t.received))
        for key in t.keys:
            m = self.apis.get(key)
            if m is None:
                m = self.apis[key] = ApiMetrics()
            m.count += 1
            for h, seconds in zip(m.phases, times, strict=True):
                h.observe(seconds * 1000)
