"""ClientQuotaManager's decisions: record then measure, Kafka's throttle time
((rate - bound) / bound x the measured span), per-entity sharing and a change applied at once."""

from __future__ import annotations

from broker.quota.entity import DEFAULT, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from broker.quota.manager import ClientQuotaManager


def test_no_quota_no_throttle() -> None:
    m = ClientQuotaManager(PRODUCER_BYTE_RATE, {})
    assert m.record_and_get_throttle_time_ms("u", "c", 10**9, now_ms=0) == 0
    assert not m.quotas_enabled()


def test_throttle_time_is_kafkas() -> None:
    quotas = {(None, "c1"): {PRODUCER_BYTE_RATE: 1000.0}}
    m = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, samples=11, window_s=1)
    # 10 kB at t=0 is exactly the bound over the 10 s minimum span: no throttle
    assert m.record_and_get_throttle_time_ms("u", "c1", 10_000, now_ms=0) == 0
    # 20 kB over 10 s = 2000 B/s: (2000 - 1000) / 1000 x 10 000 ms
    assert m.record_and_get_throttle_time_ms("u", "c1", 10_000, now_ms=0) == 10_000
    # another client-id is not bound by c1's quota
    assert m.record_and_get_throttle_time_ms("u", "c2", 10**6, now_ms=0) == 0


def test_a_default_quota_is_one_per_client_id() -> None:
    quotas = {(None, DEFAULT): {PRODUCER_BYTE_RATE: 1000.0}}
    m = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas)
    assert m.record_and_get_throttle_time_ms("u", "a", 10_000, now_ms=0) == 0
    assert m.record_and_get_throttle_time_ms("u", "b", 10_000, now_ms=0) == 0  # b's own rate
    assert m.record_and_get_throttle_time_ms("u", "a", 1_000, now_ms=0) == 1_000


def test_a_changed_quota_applies_to_the_existing_rate() -> None:
    quotas: dict = {(None, "c1"): {PRODUCER_BYTE_RATE: 1000.0}}
    m = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas)
    assert m.record_and_get_throttle_time_ms("u", "c1", 15_000, now_ms=0) == 5_000
    quotas[(None, "c1")][PRODUCER_BYTE_RATE] = 2000.0
    assert m.record_and_get_throttle_time_ms("u", "c1", 1, now_ms=0) == 0
    del quotas[(None, "c1")]
    assert m.record_and_get_throttle_time_ms("u", "c1", 10**9, now_ms=0) == 0


def test_request_time_throttle_is_bounded_by_one_window() -> None:
    m = ClientQuotaManager(REQUEST_PERCENTAGE, {(DEFAULT, None): {REQUEST_PERCENTAGE: 1.0}}, max_throttle_ms=1000)
    assert m.record_and_get_throttle_time_ms("u", "c", 10_000.0, now_ms=0) == 1000


def test_rate_recovers_after_the_windows_pass() -> None:
    m = ClientQuotaManager(PRODUCER_BYTE_RATE, {(None, "c1"): {PRODUCER_BYTE_RATE: 1000.0}})
    assert m.record_and_get_throttle_time_ms("u", "c1", 30_000, now_ms=0) > 0
    assert m.record_and_get_throttle_time_ms("u", "c1", 100, now_ms=11_000) == 0
