"""Start-up refusals that need no process: listener ports and security protocols, KRaft-only
keys, node.id as broker.id's alias, empty and binary properties files (issue #12, §3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import ConfigError, KafkaConfig, load_config, parse_listener


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_listener_port_outside_0_65535_refused(port: str) -> None:
    with pytest.raises(ConfigError, match="port"):
        KafkaConfig({"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    with pytest.raises(ConfigError, match="port"):
        KafkaConfig({"advertised.listeners": f"PLAINTEXT://h:{port}"})


def test_listener_ports_0_and_65535_accepted() -> None:
    assert parse_listener("PLAINTEXT://h:0").port == 0
    assert parse_listener("PLAINTEXT://h:65535").port == 65535


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice \\"secret\\"";')


@pytest.mark.parametrize("uri", ["SASL_PLAINTEXT://:9094", "SASL_SSL://:9095"])
def test_sasl_listener_with_kafkas_default_gssapi_refused(uri: str) -> None:
    """sasl.enabled.mechanisms defaults to GSSAPI, which is not built: the message names the key."""
    with pytest.raises(ConfigError, match=r"GSSAPI.*sasl\.enabled\.mechanisms") as e:
        KafkaConfig({"listeners": f"PLAINTEXT://:9092,{uri}"})
    assert uri.split(":")[0] in str(e.value)


def test_sasl_listener_with_plain_reads_the_listeners_jaas_entry() -> None:
    from broker.sasl.listeners import SaslListeners

    c = KafkaConfig({"listeners": "CLIENT://:9092,PLAINTEXT://:9093",
                     "listener.security.protocol.map": "CLIENT:SASL_SSL,PLAINTEXT:PLAINTEXT",
                     "listener.name.client.sasl.enabled.mechanisms": "PLAIN",
                     "listener.name.client.plain.sasl.jaas.config": PLAIN_JAAS})
    assert c.security_protocols["CLIENT"] == "SASL_SSL"
    client = SaslListeners(c).listeners["CLIENT"]
    assert client.mechanisms == ["PLAIN"]
    assert client.plain_users() == {"admin": "admin-secret", "alice": 'alice "secret"'}
    assert client.jaas["PLAIN"].options["username"] == "admin"


@pytest.mark.parametrize("props, needle", [
    ({"sasl.enabled.mechanisms": "PLAIN"}, "sasl.jaas.config"),  # no JAAS entry at all
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "PlainLoginModule required user_a=\"b\""},
     "semi-colon"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "x.y.OtherModule required user_a=b;"}, "PlainLoginModule"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "x.PlainLoginModule maybe a=b;"}, "control flag"),
    ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER", "sasl.jaas.config": PLAIN_JAAS}, "OAUTHBEARER"),
], ids=["no-jaas", "no-semicolon", "wrong-module", "bad-flag", "oauthbearer"])
def test_bad_sasl_settings_refused(props: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as e:
        KafkaConfig({"listeners": "SASL_PLAINTEXT://:9094", **props})
    assert "secret" not in str(e.value)  # a JAAS text holds passwords: never echoed


def test_listener_name_without_security_protocol_refused() -> None:
    with pytest.raises(ConfigError, match="CLIENT"):
        KafkaConfig({"listeners": "CLIENT://:9092"})


@pytest.mark.parametrize("key, value", [
    ("process.roles", "broker,controller"),
    ("controller.quorum.voters", "1@localhost:9093"),
    ("controller.quorum.bootstrap.servers", "localhost:9093"),
])
def test_kraft_only_keys_refused_naming_the_supported_mode(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match="ZooKeeper mode") as e:
        KafkaConfig({key: value})
    assert key in str(e.value)


def test_node_id_is_an_alias_of_broker_id() -> None:
    warnings: list[str] = []
    assert KafkaConfig({"node.id": "4"}, warn=warnings.append).broker_id == 4
    assert warnings == []
    assert KafkaConfig({"node.id": "4", "broker.id": "4"}).broker_id == 4
    with pytest.raises(ConfigError, match=r"node\.id.*broker\.id|broker\.id.*node\.id"):
        KafkaConfig({"node.id": "4", "broker.id": "5"})
    with pytest.raises(ConfigError, match=r"node\.id"):
        KafkaConfig({"node.id": "x"})


@pytest.mark.parametrize("content", [b"", b"\n\n", b"# only a comment\n"])
def test_empty_properties_file_refused(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "server.properties"
    f.write_bytes(content)
    with pytest.raises(ConfigError, match=r"server\.properties"):
        load_config(f)


@pytest.mark.parametrize("content", [bytes(range(256)) * 4, b"broker.id=1\n\x00\x01\x02garbage=\x00\n",
                                     b"\x7fELF\x02\x01\x01" + b"\x00" * 64])
def test_binary_properties_file_refused(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "server.properties"
    f.write_bytes(content)
    with pytest.raises(ConfigError, match=r"server\.properties"):
        load_config(f)


def test_sasl_inter_broker_credentials_come_from_the_listeners_jaas_entry() -> None:
    """sasl.mechanism.inter.broker.protocol must be enabled on the inter-broker listener and its
    JAAS entry must hold the broker's own username and password (Kafka's checks)."""
    props = {"listeners": "SASL_PLAINTEXT://:9094,PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN",
             "sasl.jaas.config": PLAIN_JAAS, "zookeeper.connect": "localhost:2181",
             "inter.broker.listener.name": "SASL_PLAINTEXT"}
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol must be included in sasl\.enabled\.mechanisms"):
        KafkaConfig(props)  # Kafka's default GSSAPI
    creds = KafkaConfig({**props, "sasl.mechanism.inter.broker.protocol": "PLAIN"}).inter_broker_sasl
    assert (creds.mechanism, creds.username, creds.password) == ("PLAIN", "admin", "admin-secret")
    no_own = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
    with pytest.raises(ConfigError, match="username and password"):
        KafkaConfig({**props, "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.jaas.config": no_own})
    assert KafkaConfig({**props, "inter.broker.listener.name": "PLAINTEXT"}).inter_broker_sasl is None


def test_single_node_own_connections_use_its_first_listener_with_its_sasl() -> None:
    """A single node whose named inter-broker listener (default PLAINTEXT) is not a listener
    reaches itself (transaction markers) on its first advertised one, with that listener's SASL
    credentials; a SASL one without them refuses the start as in a cluster."""
    props = {"listeners": "SASL_SSL://127.0.0.1:9094,SASL_PLAINTEXT://127.0.0.1:9095",
             "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS}
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol must be included"):
        KafkaConfig(props)
    cfg = KafkaConfig({**props, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert cfg.inter_broker_listener_name == "SASL_SSL"
    assert cfg.inter_broker_sasl is not None and cfg.inter_broker_sasl.username == "admin"
    named = KafkaConfig({**props, "inter.broker.listener.name": "SASL_PLAINTEXT",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert named.inter_broker_listener_name == "SASL_PLAINTEXT"
    plain = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094",
                         "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS})
    assert (plain.inter_broker_listener_name, plain.inter_broker_sasl) == ("PLAINTEXT", None)
