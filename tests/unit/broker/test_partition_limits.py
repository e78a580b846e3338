"""broker.partition_limits: the per-request and per-broker bounds (pure logic) and the raise of
the soft open-files limit."""

from __future__ import annotations

import resource

import pytest

from broker.partition_limits import (
    FD_RESERVE,
    check_broker_partitions,
    check_request_partitions,
    raise_open_files_limit,
)
from protocol.errors import ErrorCode, KafkaProtocolError


def test_request_bound_counts_only_positive_counts() -> None:
    check_request_partitions([5_000, 5_000, -1, 0], 10_000)
    with pytest.raises(KafkaProtocolError) as e:
        check_request_partitions([5_000, 5_001], 10_000)
    assert e.value.code == ErrorCode.POLICY_VIOLATION
    assert "Excessively large number of partitions per request" in (e.value.message or "")


def test_broker_bound_and_open_files_headroom() -> None:
    check_broker_partitions(7, 1, 8, 0)
    check_broker_partitions(100, 0, 8, 10**9)  # nothing added: nothing to refuse
    with pytest.raises(KafkaProtocolError, match=r"max\.broker\.partitions=8"):
        check_broker_partitions(7, 2, 8, 0)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert soft != resource.RLIM_INFINITY
    check_broker_partitions(0, soft - FD_RESERVE - 10, 10**9, 10)
    with pytest.raises(KafkaProtocolError, match="ulimit -n") as e:
        check_broker_partitions(0, soft - FD_RESERVE - 9, 10**9, 10)
    assert e.value.code == ErrorCode.POLICY_VIOLATION


def test_raise_open_files_limit_reaches_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        was, now, got_hard = raise_open_files_limit()
        assert was == min(soft, 256) and got_hard == hard
        assert now == (hard if hard != resource.RLIM_INFINITY else 1 << 20)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == now
        assert raise_open_files_limit() == (now, now, hard)  # already there: unchanged
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
