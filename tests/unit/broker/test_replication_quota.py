"""The replication throttle's pure logic (broker.replication_quota): Kafka's sampled Rate (a young
rate measured over the full span, so a throttle starts after a bounded burst), the
`partition:broker` lists of the topic configs, and the quota's decisions."""

from __future__ import annotations

import pytest

from broker.replication_quota import (
    ALL_REPLICAS,
    UNLIMITED,
    Rate,
    ReplicationQuotaManager,
    throttled_partitions,
)
from storage.config import LogConfig


def test_a_young_rate_is_measured_over_the_whole_span() -> None:
    r = Rate(samples=11, window_ms=1000)
    r.record(10_000, now_ms=0)
    assert r.measure(0) == pytest.approx(1000)  # 10 kB over the 10 s minimum span
    r.record(10_000, now_ms=500)
    assert r.measure(500) == pytest.approx(20_000 / 10.5)  # 0.5 s elapsed + 10 windows


def test_a_steady_rate_and_its_expiry() -> None:
    r = Rate(samples=11, window_ms=1000)
    for s in range(30):
        r.record(5_000, now_ms=s * 1000)
    # 11 windows kept, the oldest started 10 s ago: 55 kB / 10 s
    assert r.measure(29_000) == pytest.approx(5_500)
    assert r.measure(29_000 + 11_000) == 0  # every window older than 11 s is gone


def test_throttled_partitions_of_a_broker() -> None:
    assert throttled_partitions(("0:1", "0:2", "1:2", " 3:1 "), 1) == frozenset({0, 3})
    assert throttled_partitions(("0:1",), 3) == frozenset()
    assert throttled_partitions(("*",), 3) == ALL_REPLICAS


def test_the_quota_throttles_listed_partitions_only_when_bounded_and_exceeded() -> None:
    q = ReplicationQuotaManager("leader", broker_id=2, samples=11, window_s=1)
    assert not q.is_throttled(0, ("0:2",))  # unlimited: nothing is throttled
    q.update_quota(1000)
    assert q.is_throttled(0, ("0:2",)) and not q.is_throttled(1, ("0:2",)) and not q.is_throttled(0, ())
    assert not q.is_quota_exceeded(now_ms=0)
    q.record(10_000, now_ms=0)  # exactly the 10 s burst: not over
    assert not q.is_quota_exceeded(now_ms=0)
    q.record(1, now_ms=0)
    assert q.is_quota_exceeded(now_ms=0)
    assert not q.is_quota_exceeded(now_ms=12_000)  # the windows expired
    q.update_quota(UNLIMITED)
    q.record(10**9, now_ms=12_000)
    assert not q.is_quota_exceeded(now_ms=12_000)


def test_topic_configs_refuse_a_malformed_replica_list() -> None:
    assert LogConfig.from_props({"leader.replication.throttled.replicas": "0:1,1:2"}
                                ).leader_replication_throttled_replicas == ("0:1", "1:2")
    assert LogConfig.from_props({"follower.replication.throttled.replicas": "*"}
                                ).follower_replication_throttled_replicas == ("*",)
    with pytest.raises(ValueError, match="must be the literal"):
        LogConfig.from_props({"leader.replication.throttled.replicas": "0-1"})
