"""DescribeClientQuotas / AlterClientQuotas pure logic (broker.quota.admin): request entities,
Kafka's errors, the filters (EXACT / DEFAULT / SPECIFIED, strict) and ops on stored configs."""

from __future__ import annotations

import pytest

from broker.quota.admin import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    Component,
    apply_ops,
    check_filter,
    entity_of,
    entity_parts,
    matches,
)
from broker.quota.entity import DEFAULT
from protocol.errors import ErrorCode, KafkaProtocolError


def test_entities_of_a_request() -> None:
    assert entity_of([("user", "CN=a b"), ("client-id", None)]) == ("CN%3Da%20b", DEFAULT)
    assert entity_parts(("CN%3Da%20b", DEFAULT)) == [("client-id", None), ("user", "CN=a b")]
    assert entity_of([("user", "a"), ("user", "b")]) == ("b", None)  # Kafka's map: the last wins
    for bad in ([], [("group", "g")], [("ip", "1.2.3.4")]):
        with pytest.raises(KafkaProtocolError) as e:
            entity_of(bad)
        assert e.value.code == ErrorCode.INVALID_REQUEST


def test_ops_as_zk_admin_manager_writes_them() -> None:
    stored = {"SCRAM-SHA-256": "s", "consumer_byte_rate": "5"}
    assert apply_ops(stored, [("producer_byte_rate", 1024.0, False), ("request_percentage", 12.5, False),
                              ("consumer_byte_rate", 0.0, True)]) == {
        "SCRAM-SHA-256": "s", "producer_byte_rate": "1024", "request_percentage": "12.5"}
    for ops, message in (([("producer_byte_rate", 1.5, False)], "must be a Long value"),
                         ([("x_rate", 1.0, False)], "Unrecognized configuration key x_rate"),
                         ([("request_percentage", 1.0, False), ("request_percentage", 2.0, True)], "Duplicate")):
        with pytest.raises(KafkaProtocolError, match=message):
            apply_ops({}, ops)


def test_filters() -> None:
    alice_c1, alice, default_users, c1 = ("alice", "c1"), ("alice", None), (DEFAULT, None), (None, "c1")
    user_exact = [Component("user", MATCH_EXACT, "alice")]
    assert matches(alice, user_exact, strict=True) and matches(alice_c1, user_exact, strict=False)
    assert not matches(alice_c1, user_exact, strict=True) and not matches(c1, user_exact, strict=False)
    assert matches(default_users, [Component("user", MATCH_DEFAULT, None)], strict=True)
    assert not matches(default_users, [Component("user", MATCH_SPECIFIED, None)], strict=True)
    assert matches(c1, [], strict=False) and not matches(c1, [], strict=True)
    for bad in ([Component("user", 0, "a"), Component("user", 1, None)], [Component("topic", 0, "t")],
                [Component("user", MATCH_EXACT, None)]):
        with pytest.raises(KafkaProtocolError):
            check_filter(bad)
