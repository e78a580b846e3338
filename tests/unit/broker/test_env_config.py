"""KAFKA_* environment variables as configs (the Docker image's `odradek serve --config-env`)."""

from __future__ import annotations

from broker.env_config import config_key, configs_from_env


def test_names_follow_the_kafka_images_convention():
    assert config_key("KAFKA_ZOOKEEPER_CONNECT") == "zookeeper.connect"
    assert config_key("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP") == "listener.security.protocol.map"
    assert config_key("KAFKA_BROKER_ID") == "broker.id"
    # `__` is an underscore, `___` a dash (Confluent's cp-kafka rules)
    assert config_key("KAFKA_LISTENER_NAME_INTERNAL_SSL_KEYSTORE__TYPE") == \
        "listener.name.internal.ssl.keystore_type"
    assert config_key("KAFKA_SOME___DASHED_KEY") == "some-dashed.key"


def test_only_kafka_variables_and_not_the_jvm_ones():
    env = {
        "KAFKA_BROKER_ID": "2", "KAFKA_LOG_RETENTION_MS": "1000", "KAFKA_HEAP_OPTS": "-Xmx1G",
        "KAFKA_OPTS": "-Dx=y", "KAFKA_JMX_PORT": "9999", "KAFKA_": "x", "PATH": "/bin",
        "MY_KAFKA_THING": "1",
    }
    assert configs_from_env(env) == {"broker.id": "2", "log.retention.ms": "1000"}
