"""broker/kafka_broker_configs.json is what Kafka 3.9.2 itself answers: the reference broker
describes its own broker resource and every key, type, default, read-only flag and sensitivity
must match the table Odradek accepts and describes from (a new Kafka key, or a key that
became dynamic, fails here)."""

from __future__ import annotations

from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS, PER_BROKER
from tests.compat.kafka_broker_configs import describe
from tests.compat.reference_kafka import ReferenceKafka


def test_table_is_kafka_39s_own_description(reference_kafka: ReferenceKafka) -> None:
    reference = {k["name"]: k for k in describe(reference_kafka.port)}
    assert sorted(reference) == sorted(KAFKA_BROKER_CONFIGS)
    for name, k in KAFKA_BROKER_CONFIGS.items():
        ref = reference[name]
        assert (k.type, k.default, k.read_only, k.sensitive) == (
            ref["type"], ref["default"], ref["read_only"], ref["sensitive"]), name
    # the per-broker keys (copied from DynamicBrokerConfig) are all dynamic ones of the table
    assert all(not KAFKA_BROKER_CONFIGS[k].read_only for k in PER_BROKER)
