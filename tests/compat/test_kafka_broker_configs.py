"""broker/kafka_broker_configs.json is what Kafka 3.9.2 itself answers: the reference broker
describes its own broker resource and every key, type, default, read-only flag and sensitivity
must match the table Odradek accepts and describes from (a new Kafka key, or a key that
became dynamic, fails here). And Odradek's DescribeConfigs of its broker, side by side with the
reference's: every key, the same read-only flags, the same default values except the few
Odradek chooses on purpose (DEFAULT_DIFFERENCES)."""

from __future__ import annotations

from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS, PER_BROKER
from tests.broker_process import BrokerProcess
from tests.compat.kafka_broker_configs import DEFAULT_CONFIG, describe, describe_configs
from tests.compat.reference_kafka import ReferenceKafka

# Odradek's defaults that are not Kafka's, each on purpose (docs/configuration.md), among the
# keys neither broker sets (the reference sets broker.id and listener.security.protocol.map,
# where Odradek's defaults are 0 and Kafka's map in another order)
DEFAULT_DIFFERENCES = {
    "queued.max.request.bytes": "104857600",  # bounded by default (Kafka's -1: unbounded)
}


def test_table_is_kafka_39s_own_description(reference_kafka: ReferenceKafka) -> None:
    reference = {k["name"]: k for k in describe(reference_kafka.port)}
    assert sorted(reference) == sorted(KAFKA_BROKER_CONFIGS)
    for name, k in KAFKA_BROKER_CONFIGS.items():
        ref = reference[name]
        assert (k.type, k.default, k.read_only, k.sensitive) == (
            ref["type"], ref["default"], ref["read_only"], ref["sensitive"]), name
    # the per-broker keys (copied from DynamicBrokerConfig) are all dynamic ones of the table
    assert all(not KAFKA_BROKER_CONFIGS[k].read_only for k in PER_BROKER)


def test_odradek_describes_its_broker_as_kafka(reference_kafka: ReferenceKafka, odradek: BrokerProcess) -> None:
    reference = {c.name: c for c in describe_configs(reference_kafka.port, "1")}
    ours = {c.name: c for c in describe_configs(odradek.port, "0")}
    assert not set(reference) - set(ours)
    assert {k: ours[k].read_only for k in reference} == {k: c.read_only for k, c in reference.items()}
    differing = {k: ours[k].value for k, c in reference.items()
                 if c.config_source == ours[k].config_source == DEFAULT_CONFIG and ours[k].value != c.value}
    assert differing == DEFAULT_DIFFERENCES
