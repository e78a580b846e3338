"""Kafka's client quota precedence (DefaultQuotaCallback in ZooKeeper mode), which entity's quota a
(user, client-id) gets and who shares it, the ZooKeeper entity names, and Kafka's Sanitizer."""

from __future__ import annotations

import pytest

from broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    desanitize,
    find_quota,
    parse_entity,
    parse_quota_config,
    sanitize,
    user_name,
    zk_entity,
)

ALL = {
    ("alice", "c1"): 1.0, ("alice", DEFAULT): 2.0, ("alice", None): 3.0,
    (DEFAULT, "c1"): 4.0, (DEFAULT, DEFAULT): 5.0, (DEFAULT, None): 6.0,
    (None, "c1"): 7.0, (None, DEFAULT): 8.0,
}


@pytest.mark.parametrize("removed, expected, tags", [
    (0, 1.0, ("alice", "c1")),
    (1, 2.0, ("alice", "c1")),
    (2, 3.0, ("alice", "")),
    (3, 4.0, ("alice", "c1")),
    (4, 5.0, ("alice", "c1")),
    (5, 6.0, ("alice", "")),
    (6, 7.0, ("", "c1")),
    (7, 8.0, ("", "c1")),
])
def test_each_level_wins_over_the_ones_below(removed: int, expected: float, tags: tuple[str, str]) -> None:
    """Removing the `removed` highest entities leaves the next one in Kafka's order."""
    entities = list(ALL)[removed:]
    quotas = {e: {PRODUCER_BYTE_RATE: ALL[e]} for e in entities}
    assert find_quota(quotas, PRODUCER_BYTE_RATE, "alice", "c1") == (expected, tags)


def test_each_key_is_looked_up_on_its_own_and_others_do_not_match() -> None:
    quotas = {("alice", None): {CONSUMER_BYTE_RATE: 10.0}, (None, DEFAULT): {PRODUCER_BYTE_RATE: 20.0}}
    assert find_quota(quotas, PRODUCER_BYTE_RATE, "alice", "c1") == (20.0, ("", "c1"))
    assert find_quota(quotas, CONSUMER_BYTE_RATE, "alice", "c1") == (10.0, ("alice", ""))
    assert find_quota(quotas, CONSUMER_BYTE_RATE, "bob", "c1") is None
    assert find_quota({("bob", "c1"): {PRODUCER_BYTE_RATE: 1.0}}, PRODUCER_BYTE_RATE, "alice", "c1") is None


def test_zookeeper_entity_names_round_trip() -> None:
    for entity in [("alice", None), ("alice", "c1"), (DEFAULT, DEFAULT), (None, "c1"), (None, DEFAULT),
                   ("alice", DEFAULT), (DEFAULT, None)]:
        assert parse_entity(*zk_entity(entity)) == entity
    assert zk_entity(("alice", "c1")) == ("users", "alice/clients/c1")
    assert zk_entity((None, DEFAULT)) == ("clients", "<default>")
    with pytest.raises(ValueError):
        zk_entity((None, None))


def test_sanitizer_as_kafkas() -> None:
    assert sanitize("CN=a b,O=x*") == "CN%3Da%20b%2CO%3Dx%2A"
    assert sanitize("client~.-_1") == "client~.-_1"
    assert sanitize("<default>") != DEFAULT
    assert desanitize(sanitize("User é/1")) == "User é/1"
    assert user_name("User:alice") == "alice" and user_name("User:ANONYMOUS") == "ANONYMOUS"


def test_only_quota_keys_that_parse_are_kept() -> None:
    assert parse_quota_config({"producer_byte_rate": "1024", "SCRAM-SHA-256": "x", "request_percentage": "y"}
                              ) == {PRODUCER_BYTE_RATE: 1024.0}
