"""controller_mutation_rate's TokenBucket (KIP-599): a burst of quota x window.num x window.size
partitions, strict requests refused while the bucket is below zero (nothing taken), permissive
ones recorded with the throttle time, and the refill."""

from __future__ import annotations

import pytest

from broker.quota.controller_mutation import ControllerMutationQuotaManager
from broker.quota.entity import CONTROLLER_MUTATION_RATE, DEFAULT
from protocol.errors import ErrorCode, KafkaProtocolError


def manager() -> ControllerMutationQuotaManager:
    return ControllerMutationQuotaManager({(None, DEFAULT): {CONTROLLER_MUTATION_RATE: 2.0}}, samples=11, window_s=1)


def test_no_quota_is_unbounded() -> None:
    assert ControllerMutationQuotaManager({}).new_quota_for("u", "c", strict=True) is None


def test_strict_takes_the_burst_then_refuses_until_refilled() -> None:
    m = manager()
    q = m.new_quota_for("u", "c", strict=True)
    assert q is not None
    q.record(20, now_ms=0)  # 22 tokens: 2 left
    q.record(10, now_ms=0)  # allowed while not below zero: -8
    assert q.throttle_time_ms == 0
    with pytest.raises(KafkaProtocolError) as e:
        q.record(1, now_ms=0)
    assert e.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert q.throttle_time_ms == 4000  # 8 tokens at 2 per second
    again = m.new_quota_for("u", "c", strict=True)
    assert again is not None
    again.record(1, now_ms=4000)  # refilled to zero: allowed
    other = m.new_quota_for("u", "other-client", strict=True)  # a <default> quota is per client-id
    assert other is not None
    other.record(22, now_ms=0)


def test_permissive_records_and_reports_the_throttle() -> None:
    q = manager().new_quota_for("u", "c", strict=False)
    assert q is not None
    q.record(30, now_ms=0)
    assert q.throttle_time_ms == 4000
