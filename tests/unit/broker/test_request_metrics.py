"""RequestMetrics' phase split (Kafka's RequestChannel: request queue, local, remote, response
queue, response send, total), the Fetch split, and Prometheus' cumulative buckets, without a server."""

from __future__ import annotations

import time

from broker.metrics.request_metrics import (
    BOUNDS_MS,
    FETCH_CONSUMER,
    FETCH_FOLLOWER,
    PHASES,
    RequestMetrics,
    cumulative,
)


def phase(m: RequestMetrics, key: int | str, name: str) -> float:
    return m.apis[key].phases[PHASES.index(name)].sum


def test_each_phase_is_the_time_between_its_two_steps() -> None:
    m = RequestMetrics()
    now = time.monotonic()
    t = m.finished(0, received=now - 0.5, started=now - 0.4, suspended=now - 0.3)
    t.done, t.dequeued_at = now, now + 0.2  # finished now, writing started 200 ms later
    m.record(t, now + 0.7)  # its last byte taken 500 ms after that
    assert 99 <= phase(m, 0, "requestqueuetimems") <= 101
    assert 99 <= phase(m, 0, "localtimems") <= 101
    assert 299 <= phase(m, 0, "remotetimems") <= 301
    assert 199 <= phase(m, 0, "responsequeuetimems") <= 201
    assert 499 <= phase(m, 0, "responsesendtimems") <= 501
    assert 1199 <= phase(m, 0, "totaltimems") <= 1201, "total is arrival to the last byte"
    assert m.apis[0].count == 1


def test_a_request_that_never_waited_has_no_remote_time() -> None:
    m = RequestMetrics()
    now = time.monotonic()
    m.finished(0, received=now, started=now, suspended=0.0).sent()  # no response: sent at once
    assert m.apis[0].phases[PHASES.index("remotetimems")].buckets[0] == 1
    assert m.apis[0].phases[PHASES.index("responsesendtimems")].buckets[0] == 1


def test_fetches_count_under_fetch_and_their_split() -> None:
    m = RequestMetrics()
    now = time.monotonic()
    m.finished(1, now, now, 0.0, fetch_from_follower=True).sent()
    m.finished(1, now, now, 0.0, fetch_from_follower=False).sent()
    m.finished(1, now, now, 0.0, fetch_from_follower=False).sent()
    assert m.apis[1].count == 3
    assert m.apis[FETCH_FOLLOWER].count == 1 and m.apis[FETCH_CONSUMER].count == 2
    m.finished(0, now, now, 0.0).sent()
    assert set(m.apis) == {0, 1, FETCH_FOLLOWER, FETCH_CONSUMER}


def test_cumulative_buckets_end_with_inf_and_the_count() -> None:
    buckets = [0] * (len(BOUNDS_MS) + 1)
    buckets[0], buckets[3], buckets[-1] = 2, 1, 4
    pairs = cumulative(BOUNDS_MS, buckets)
    assert pairs[0] == (str(BOUNDS_MS[0]), 2.0) and pairs[3][1] == 3.0
    assert pairs[-1] == ("+Inf", 7.0) and len(pairs) == len(BOUNDS_MS) + 1
