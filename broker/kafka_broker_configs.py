"""Every broker config key Kafka 3.9 defines (KafkaConfig's ConfigDefs: server, log, replication,
group, transaction, quota, socket server, SSL, SASL, ZooKeeper, KRaft, remote storage), as a
Kafka 3.9 broker describes them: ConfigDef type, default, whether it is read-only (Kafka's
`!DynamicBrokerConfig.AllDynamicConfigs.contains(name)`), sensitive, documentation.

Why a table of Kafka's keys beside broker/config.py's: clients and tools alter and describe
keys that Odradek does not act on (librdkafka's admin tests set
`sasl.kerberos.min.time.before.relogin`; kafka-configs lists a broker's every key), and a
Kafka 3.9 broker accepts and describes them all. broker/config.py defines the keys Odradek
acts on; a key only here is accepted in server.properties and by AlterConfigs /
IncrementalAlterConfigs when Kafka allows it, stored and described, and has no effect
(docs/configuration.md lists them).

The table (kafka_broker_configs.json) is Kafka 3.9.2's own answer to DescribeConfigs,
written by tests/compat/kafka_broker_configs.py, which a compat test re-runs against the
reference broker to prove it still matches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KAFKA_BROKER_CONFIGS", "TABLE_PATH", "KafkaBrokerKey", "dynamic_key", "read_only",
           "validate_dynamic"]

TABLE_PATH = Path(__file__).with_name("kafka_broker_configs.json")


@dataclass(frozen=True)
class KafkaBrokerKey:
    name: str
    type: str  # ConfigDef type: bool, string, int, short, long, double, list, class, password
    default: str | None  # as Kafka's ConfigDef.convertToString writes it
    read_only: bool
    sensitive: bool
    doc: str


KAFKA_BROKER_CONFIGS: dict[str, KafkaBrokerKey] = {
    k["name"]: KafkaBrokerKey(**k) for k in json.loads(TABLE_PATH.read_text())}

# Kafka's DynamicListenerConfig / DynamicBrokerConfig.ListenerConfigs prefix: a listener's own
# value of a dynamic key, `listener.name.<listener>.<key>`
_LISTENER_PREFIX = "listener.name."


def _base(key: str) -> str:
    if key.startswith(_LISTENER_PREFIX):
        rest = key[len(_LISTENER_PREFIX):].partition(".")[2]
        # a SASL mechanism's own keys: listener.name.<l>.<mechanism>.sasl.jaas.config
        return rest if rest in KAFKA_BROKER_CONFIGS else rest.partition(".")[2] or rest
    return key


def dynamic_key(key: str) -> bool:
    """Kafka lets `key` (listener-prefixed or not) change without a restart."""
    k = KAFKA_BROKER_CONFIGS.get(_base(key))
    return k is not None and not k.read_only


def read_only(key: str) -> bool:
    """Kafka defines `key` and does not let it change dynamically ("Cannot update these configs
    dynamically")."""
    k = KAFKA_BROKER_CONFIGS.get(key)
    return k is not None and k.read_only


# SslConfigs.RECONFIGURABLE_CONFIGS (DynamicBrokerConfig.DynamicSecurityConfigs): a listener's
# stores, alterable only under the listener prefix
_SECURITY = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
# DynamicListenerConfig.ReconfigurableConfigs
_LISTENER = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keystore.type",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
# DynamicBrokerConfig.PerBrokerConfigs: only a broker id may set them, not the cluster default
PER_BROKER = (_SECURITY | _LISTENER) - _CLUSTER_LEVEL_LISTENER


def _per_broker(key: str) -> bool:
    if key.startswith(_LISTENER_PREFIX):
        return key[len(_LISTENER_PREFIX):].partition(".")[2] not in _CLUSTER_LEVEL_LISTENER
    return key in PER_BROKER


def validate_dynamic(keys: list[str], per_broker: bool) -> str | None:
    """Kafka's DynamicBrokerConfig.validateConfigs of the keys of a dynamic broker config update
    (`per_broker`: a broker id's, else the cluster default's): the ConfigException message, or
    None when Kafka accepts them."""
    checks = (
        ([k for k in keys if read_only(k)], "Cannot update these configs dynamically"),
        ([k for k in keys if k in _SECURITY],
         "These security configs can be dynamically updated only per-listener using the listener prefix"),
        ([] if per_broker else [k for k in keys if _per_broker(k)],
         "Cannot update these configs at default cluster level, broker id must be specified"),
    )
    for invalid, message in checks:
        if invalid:
            return f"{message}: Set({', '.join(invalid)})"
    return None
