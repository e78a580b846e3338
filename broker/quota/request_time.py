"""request_percentage (Kafka's ClientRequestQuotaManager): the share of one handler the client's
requests may take, in percent per second.

Kafka measures the time request handler threads spend on a client's requests. Odradek has no
handler threads: what it measures is the time the event loop spends *running* the request's
handler -- each step of its coroutine, from decoding to the response object, not the time it
waits (purgatories, appends' fsync in the executor, replication) -- which is the share of the
broker's one event loop the client takes. The time is recorded as Kafka's percentage (ns x 100 /
1e9) against the client's request quota when the response is ready; over it the response's
throttle_time_ms is raised to the throttle time (at most one window, boundedThrottleTime) and the
connection muted. Exempt as in Kafka: the requests between brokers (ClusterAction) and followers'
fetches; acks=0 produce has no response and is not recorded.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any

# LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers, AlterPartition
CLUSTER_ACTION_APIS = frozenset({4, 5, 6, 7, 27, 56})
NANOS_TO_PERCENTAGE = 100.0 / 1e9


class HandlerTime:
    """Await a handler's coroutine and add up the time each of its steps ran (`ns`)."""

    __slots__ = ("coro", "ns")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter_ns()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self.ns += time.perf_counter_ns() - start
                return done.value
            except BaseException:
                self.ns += time.perf_counter_ns() - start
                raise
            self.ns += time.perf_counter_ns() - start
            try:
                value, error = (yield yielded), None
            except BaseException as e:  # a cancellation or a future's exception: into the handler
                value, error = None, e


def exempt(api_key: int, request: Any) -> bool:
    return api_key in CLUSTER_ACTION_APIS or (api_key == 1 and getattr(request, "replica_id", -1) >= 0)
