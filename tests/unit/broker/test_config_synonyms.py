"""DescribeConfigs synonyms as Kafka's ConfigHelper builds them (values checked against
`kafka-configs --describe --all` of a Kafka 3.9 broker)."""

from __future__ import annotations

from broker.authorized_operations import CLUSTER_OPERATIONS, GROUP_OPERATIONS, TOPIC_OPERATIONS
from broker.config_synonyms import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    Synonym,
    broker_key_synonyms,
    source_of,
    topic_synonyms,
)

DEFAULTS = {"log.retention.hours": "168", "log.segment.bytes": "1073741824", "log.roll.hours": "168"}


def test_default_only_topic_config_lists_its_broker_default() -> None:
    s = topic_synonyms("segment.bytes", "1073741824", {}, {}, {}, DEFAULTS)
    assert s == [Synonym("log.segment.bytes", "1073741824", DEFAULT_CONFIG)]
    assert source_of(s) == DEFAULT_CONFIG


def test_retention_ms_has_no_synonyms_unless_log_retention_ms_is_set() -> None:
    # Kafka drops synonyms before the first one named like the primary broker key
    assert topic_synonyms("retention.ms", "604800000", {}, {}, {}, DEFAULTS) == []
    assert topic_synonyms("segment.ms", "604800000", {}, {}, {"log.roll.hours": "1"}, DEFAULTS) == []
    static = {"log.retention.ms": "5000", "log.retention.hours": "1"}
    assert topic_synonyms("retention.ms", "5000", {}, {}, static, DEFAULTS) == [
        Synonym("log.retention.ms", "5000", STATIC_BROKER_CONFIG),
        Synonym("log.retention.hours", "1", STATIC_BROKER_CONFIG),
        Synonym("log.retention.hours", "168", DEFAULT_CONFIG),
    ]


def test_topic_override_comes_first_then_dynamic_static_default() -> None:
    s = topic_synonyms("segment.bytes", "1000", {"segment.bytes": "1000"}, {"log.segment.bytes": "3000"},
                       {"log.segment.bytes": "2000"}, DEFAULTS)
    assert [(x.source, x.value) for x in s] == [
        (DYNAMIC_TOPIC_CONFIG, "1000"), (DYNAMIC_BROKER_CONFIG, "3000"), (STATIC_BROKER_CONFIG, "2000"),
        (DEFAULT_CONFIG, "1073741824")]
    assert source_of(s) == DYNAMIC_TOPIC_CONFIG


def test_broker_key_synonyms_start_at_the_described_key() -> None:
    static = {"log.retention.ms": "5000"}
    assert broker_key_synonyms("log.retention.hours", {}, static, DEFAULTS) == [
        Synonym("log.retention.hours", "168", DEFAULT_CONFIG)]
    assert broker_key_synonyms("log.retention.ms", {}, static, DEFAULTS)[0] == Synonym(
        "log.retention.ms", "5000", STATIC_BROKER_CONFIG)
    assert broker_key_synonyms("broker.id", {}, {"broker.id": "1"}, {"broker.id": "0"}) == [
        Synonym("broker.id", "1", STATIC_BROKER_CONFIG), Synonym("broker.id", "0", DEFAULT_CONFIG)]


def test_authorized_operation_bit_fields_are_kafkas() -> None:
    # the values a Kafka 3.9 broker without an authorizer answers (differential corpus)
    assert (CLUSTER_OPERATIONS, TOPIC_OPERATIONS, GROUP_OPERATIONS) == (8096, 3576, 328)
