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


@pytest.mark.parametrize("uri", ["SASL_PLAINTEXT://:9094", "SASL_SSL://:9095"])
def test_sasl_listeners_refused_until_they_exist(uri: str) -> None:
    with pytest.raises(ConfigError, match=r"PLAINTEXT and SSL.*only|not supported") as e:
        KafkaConfig({"listeners": f"PLAINTEXT://:9092,{uri}"})
    assert uri.split(":")[0] in str(e.value)


def test_listener_names_mapped_to_ssl_and_plaintext_accepted_to_sasl_refused() -> None:
    with pytest.raises(ConfigError, match="SASL_SSL"):
        KafkaConfig({"listeners": "CLIENT://:9092", "listener.security.protocol.map": "CLIENT:SASL_SSL"})
    assert KafkaConfig({"listeners": "CLIENT://:9092,SSL://:9093",
                        "listener.security.protocol.map": "CLIENT:SSL,SSL:SSL"}).security_protocols["CLIENT"] == "SSL"
    c = KafkaConfig({"listeners": "CLIENT://:9092,INTERNAL://:9093",
                     "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    assert [lst.name for lst in c.listeners] == ["CLIENT", "INTERNAL"]


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
