"""RequestMetrics' phase split and Prometheus' cumulative buckets, without a server."""

from __future__ import annotations

import time

from broker.metrics.request_metrics import BOUNDS_MS, RequestMetrics, cumulative


def test_a_request_that_waited_splits_local_and_remote() -> None:
    m = RequestMetrics()
    now = time.monotonic()
    m.record(0, received=now - 0.5, started=now - 0.4, suspended=now - 0.3)
    queue, local, remote, total = m.apis[0].phases
    assert 99 <= queue.sum <= 110 and 99 <= local.sum <= 110
    assert 299 <= remote.sum <= 320 and 499 <= total.sum <= 520
    m.record(0, received=now, started=now, suspended=0.0)  # never waited: remote 0, all local
    assert m.apis[0].count == 2 and m.apis[0].phases[2].buckets[0] == 1


def test_cumulative_buckets_end_with_inf_and_the_count() -> None:
    buckets = [0] * (len(BOUNDS_MS) + 1)
    buckets[0], buckets[3], buckets[-1] = 2, 1, 4
    pairs = cumulative(BOUNDS_MS, buckets)
    assert pairs[0] == (str(BOUNDS_MS[0]), 2.0) and pairs[3][1] == 3.0
    assert pairs[-1] == ("+Inf", 7.0) and len(pairs) == len(BOUNDS_MS) + 1
