from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import ConfigError, KafkaConfig, load_config, read_properties, reference_markdown

REPO = Path(__file__).resolve().parents[3]


def test_defaults_are_kafkas() -> None:
    c = KafkaConfig({})
    assert c["socket.request.max.bytes"] == 104857600
    assert c["log.segment.bytes"] == 1073741824
    assert c["num.partitions"] == 1
    assert c["offsets.topic.num.partitions"] == 50
    assert c.retention_ms == 168 * 3600 * 1000
    assert [str(x) for x in c.listeners] == ["PLAINTEXT://:9092"]
    assert c.log_dirs == [Path("/tmp/kafka-logs")]


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert KafkaConfig({"log.retention.hours": "1"}).retention_ms == 3_600_000
    assert KafkaConfig({"log.retention.hours": "1", "log.retention.minutes": "2"}).retention_ms == 120_000
    assert KafkaConfig({"log.retention.minutes": "2", "log.retention.ms": "5"}).retention_ms == 5


def test_properties_file_overrides_and_flags(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_text(
        "# comment\nbroker.id=3\nlisteners=PLAINTEXT://localhost:9093\nlog.dirs=/a,/b\n"
        "num.partitions = 4\nlog.retention.hours: 2\nnum.network.threads=3\n"
    )
    warnings: list[str] = []
    c = load_config(f, ["num.partitions=6"], {"broker.id": 7, "log.dirs": None}, warn=warnings.append)
    assert c.broker_id == 7
    assert c["num.partitions"] == 6
    assert c.log_dirs == [Path("/a"), Path("/b")]
    assert c.retention_ms == 7_200_000
    assert c.listeners[0].host == "localhost" and c.listeners[0].port == 9093
    assert warnings == []


def test_unknown_keys_warned_invalid_values_refused_naming_the_key() -> None:
    warnings: list[str] = []
    KafkaConfig({"log.segmnet.bytes": "1"}, warn=warnings.append)
    assert warnings and "log.segmnet.bytes" in warnings[0]
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        KafkaConfig({"num.partitions": "zero"})
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        KafkaConfig({"num.partitions": "0"})
    with pytest.raises(ConfigError, match=r"auto\.create\.topics\.enable"):
        KafkaConfig({"auto.create.topics.enable": "yes"})
    with pytest.raises(ConfigError, match=r"log\.message\.timestamp\.type"):
        KafkaConfig({"log.message.timestamp.type": "Now"})
    with pytest.raises(ConfigError, match="listener"):
        KafkaConfig({"listeners": "localhost:9092"})
    with pytest.raises(ConfigError, match="override"):
        load_config(None, ["novalue"])


def test_read_properties_continuations() -> None:
    assert read_properties("a=1\\\n  2\n! c\nb : x y\n") == {"a": "12", "b": "x y"}


def test_configuration_doc_is_current() -> None:
    assert reference_markdown() in (REPO / "docs" / "configuration.md").read_text()


def test_replica_selector_class_is_kafkas_rack_aware_one_or_unset() -> None:
    """KIP-392: unset (Kafka's null) means consumers read from leaders; Kafka's class name turns
    the rack-aware selector on; any other class is refused at start, saying why (no Java here)."""
    assert KafkaConfig({})["replica.selector.class"] is None
    rack_aware = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert KafkaConfig({"replica.selector.class": rack_aware})["replica.selector.class"] == rack_aware
    for wrong in ("com.example.ClosestSelector", "RackAwareReplicaSelector", ""):
        with pytest.raises(ConfigError, match=r"replica\.selector\.class.*loads no Java classes"):
            KafkaConfig({"replica.selector.class": wrong})
