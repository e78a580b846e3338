"""storage.config.LogConfig: Kafka's topic-level keys, defaults and validation."""

from __future__ import annotations

import random

import pytest

from storage.config import LONG_MAX, LogConfig

KAFKA_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "cleanup.policy": "delete",
    "min.insync.replicas": "1",
    "delete.retention.ms": "86400000",
    "min.cleanable.dirty.ratio": "0.5",
    "preallocate": "false",
    "unclean.leader.election.enable": "false",
    "compression.type": "producer",
}


def test_defaults_are_kafkas() -> None:
    props = LogConfig().to_props()
    for key, value in KAFKA_DEFAULTS.items():
        assert props[key] == value, key
    c = LogConfig()
    assert c.segment_bytes == 1073741824 and c.flush_messages == LONG_MAX
    assert c.cleanup_policy == ("delete",) and c.delete and not c.compact
    assert c.compression_codec is None and not c.log_append_time


def test_from_props_parses_kafka_keys_and_trims() -> None:
    c = LogConfig.from_props(
        {
            "segment.bytes": " 1048576 ",
            "retention.ms": "-1",
            "cleanup.policy": "compact, delete",
            "preallocate": "TRUE",
            "min.cleanable.dirty.ratio": "0.25",
            "message.timestamp.type": "LogAppendTime",
            "compression.type": "zstd",
        }
    )
    assert c.segment_bytes == 1048576
    assert c.retention_ms == -1
    assert c.cleanup_policy == ("compact", "delete") and c.compact and c.delete
    assert c.preallocate is True
    assert c.min_cleanable_dirty_ratio == 0.25
    assert c.log_append_time
    assert c.compression_codec == 4


def test_from_props_layers_over_defaults() -> None:
    broker = LogConfig.from_props({"segment.bytes": "2048", "retention.ms": "1000"})
    topic = LogConfig.from_props({"retention.ms": "5000"}, broker)
    assert topic.segment_bytes == 2048 and topic.retention_ms == 5000
    assert broker.retention_ms == 1000


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("segment.bytes", "abc", "Not a number of type INT"),
        ("segment.bytes", "13", "at least 14"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("segment.bytes", "1_000", "Not a number of type INT"),
        ("segment.ms", "0", "at least 1"),
        ("retention.ms", "-2", "at least -1"),
        ("flush.messages", "0", "at least 1"),
        ("min.cleanable.dirty.ratio", "1.5", "[0, 1]"),
        ("min.cleanable.dirty.ratio", "x", "DOUBLE"),
        ("preallocate", "yes", "true or false"),
        ("cleanup.policy", "delete,forever", "forever"),
        ("compression.type", "brotli", "one of"),
        ("message.timestamp.type", "createtime", "one of"),
        ("min.insync.replicas", "0", "at least 1"),
        ("compression.gzip.level", "10", "[1, 9]"),
    ],
)
def test_invalid_values_name_the_key(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ValueError) as e:
        LogConfig.from_props({key: value})
    assert key in str(e.value) and fragment in str(e.value)


def test_unknown_key_rejected() -> None:
    with pytest.raises(ValueError, match=r"Unknown topic config name: segment\.size"):
        LogConfig.from_props({"segment.size": "1"})


def test_round_trip_and_overrides() -> None:
    c = LogConfig.from_props({"retention.bytes": "123", "cleanup.policy": "compact"})
    assert LogConfig.from_props(c.to_props()) == c
    d = c.overrides(retention_bytes=456, preallocate=True)
    assert (d.retention_bytes, d.preallocate, d.cleanup_policy) == (456, True, ("compact",))
    assert c.overrides() is c
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        c.overrides(segment_bytes=1)
    with pytest.raises(TypeError):
        c.overrides(no_such_thing=1)
    with pytest.raises(ValueError, match=r"min\.compaction\.lag\.ms"):
        LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=5)


def test_deprecated_timestamp_difference_applies_when_bounds_unset() -> None:
    c = LogConfig.from_props({"message.timestamp.difference.max.ms": "1000"})
    assert c.timestamp_before_max_ms == 1000 and c.timestamp_after_max_ms == 1000
    c = c.overrides({"message.timestamp.before.max.ms": "50"})
    assert c.timestamp_before_max_ms == 50 and c.timestamp_after_max_ms == 1000


def test_random_segment_jitter_bounds() -> None:
    assert LogConfig().random_segment_jitter(random.Random(1)) == 0
    c = LogConfig(segment_ms=100, segment_jitter_ms=1000)
    rng = random.Random(7)
    values = {c.random_segment_jitter(rng) for _ in range(500)}
    assert min(values) >= 0 and max(values) < 100 and len(values) > 50
