"""Every broker key Kafka 3.9 defines is accepted and described as a Kafka 3.9 broker does,
those Odradek does not act on included (broker/kafka_broker_configs): confluent-kafka's
incremental_alter_configs of `sasl.kerberos.min.time.before.relogin` (librdkafka's admin test
key) and other no-effect dynamic keys succeeds and describes back as DYNAMIC_BROKER_CONFIG;
Kafka 3.9's kafka-configs --alter --entity-type brokers sets one; a read-only key is refused
with Kafka's INVALID_REQUEST and message; the broker's describe lists every key of Kafka's
table with its read-only flag and default. A real single-node broker over TCP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from protocol.errors import ErrorCode
from protocol.messages import IncrementalAlterConfigsRequest
from protocol.messages import incremental_alter_configs_request as iac
from tests.broker_process import BrokerProcess
from tests.compat.jvm import run_tool
from tests.raw_client import call_once

NO_EFFECT = {"sasl.kerberos.min.time.before.relogin": "58000", "num.io.threads": "4",
             "sasl.kerberos.ticket.renew.jitter": "0.1"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("keys") / "data").start()
    try:
        yield b
    finally:
        b.stop()


def describe(admin: AdminClient) -> dict[str, ConfigEntry]:
    return admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])[
        ConfigResource(ResourceType.BROKER, "0")].result(timeout=30)


def test_no_effect_keys_alter_and_describe_back(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in NO_EFFECT.items()]
    res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=ops)
    admin.incremental_alter_configs([res])[res].result(timeout=30)
    described = describe(admin)
    for key, value in NO_EFFECT.items():
        entry = described[key]
        assert (entry.value, entry.source, entry.is_read_only) == (value, ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                                                                    False), (key, entry)


def test_read_only_key_refused_as_kafka(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([res])[res].result(timeout=30)
    err = e.value.args[0]
    assert err.name() == "INVALID_REQUEST"
    assert err.str() == ("Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
                         "Cannot update these configs dynamically: Set(log.dirs)")
    assert describe(admin)["log.dirs"].value != "/elsewhere"


def test_per_listener_and_per_broker_keys_refused_as_kafka(broker: BrokerProcess) -> None:
    """DynamicBrokerConfig.validateConfigs' other two refusals: a listener's store without the
    listener prefix, and a per-broker key (a SASL Kerberos one) at the cluster default."""
    cases = [("0", "ssl.keystore.location", "These security configs can be dynamically updated only per-listener "
              "using the listener prefix: Set(ssl.keystore.location)"),
             ("", "sasl.kerberos.min.time.before.relogin", "Cannot update these configs at default cluster level, "
              "broker id must be specified: Set(sasl.kerberos.min.time.before.relogin)")]
    for name, key, message in cases:  # raw: confluent-kafka refuses the cluster default's empty name
        resp = call_once(broker.port, 44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
            resource_type=4, resource_name=name, configs=[iac.AlterableConfig(name=key, config_operation=0,
                                                                              value="1000")])]))
        (out,) = resp.responses
        assert (out.error_code, out.error_message) == (
            ErrorCode.INVALID_REQUEST, f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): "
            f"{message}")


def test_kafka_configs_alters_a_broker_key(broker: BrokerProcess) -> None:
    base = ("--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0")
    run_tool("kafka.admin.ConfigCommand", *base, "--alter", "--add-config", "sasl.kerberos.kinit.cmd=/usr/bin/kinit2")
    out = run_tool("kafka.admin.ConfigCommand", *base, "--describe").stdout
    assert "sasl.kerberos.kinit.cmd=/usr/bin/kinit2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:sasl.kerberos.kinit.cmd=/usr/bin/kinit2, DEFAULT_CONFIG:sasl.kerberos.kinit.cmd=/usr/bin/kinit}" in out, out
    refused = run_tool("kafka.admin.ConfigCommand", *base, "--alter", "--add-config", "num.network.threads=2,"
                       "queued.max.requests=10", check=False)
    assert refused.returncode != 0
    assert "Cannot update these configs dynamically: Set(queued.max.requests)" in refused.stdout + refused.stderr


def test_describe_lists_every_kafka_key_with_its_flag(broker: BrokerProcess) -> None:
    described = describe(AdminClient({"bootstrap.servers": broker.bootstrap}))
    missing = sorted(set(KAFKA_BROKER_CONFIGS) - set(described))
    assert not missing
    flags = {k: described[k].is_read_only for k in KAFKA_BROKER_CONFIGS}
    assert flags == {k: c.read_only for k, c in KAFKA_BROKER_CONFIGS.items()}
    # a key Odradek does not act on: Kafka's default, built-in
    entry = described["sasl.kerberos.service.name"] if "sasl.kerberos.service.name" in described else None
    assert entry is not None and entry.value is None and entry.source == ConfigSource.DEFAULT_CONFIG.value
    assert described["queued.max.requests"].value == KAFKA_BROKER_CONFIGS["queued.max.requests"].default == "500"
