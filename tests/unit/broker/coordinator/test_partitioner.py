"""Java String.hashCode and Kafka's partitionFor (Utils.abs(groupId.hashCode) % partitions)."""

from __future__ import annotations

import pytest

from broker.coordinator.partitioner import java_string_hash_code, kafka_abs, partition_for


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Hello World", -862545276),  # negative: overflows int32
        ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # outside the BMP: two UTF-16 code units
        ("é", 233),
    ],
)
def test_java_string_hash_code(s: str, expected: int) -> None:
    assert java_string_hash_code(s) == expected


def test_kafka_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-2147483648) == 0
    assert kafka_abs(-862545276) == 862545276
    assert kafka_abs(5) == 5


def test_partition_for() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("Hello World", 50) == 862545276 % 50 == 26
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("anything", 1) == 0
