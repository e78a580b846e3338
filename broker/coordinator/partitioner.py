"""Which partition of a coordinator topic owns a key (a group id, a transactional id): Kafka's
GroupMetadataManager.partitionFor and TransactionStateManager.partitionFor, both
`Utils.abs(key.hashCode) % partitions` with Java's String.hashCode. Pure functions."""

from __future__ import annotations


def java_string_hash_code(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h >= 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 (Math.abs would leave it negative)."""
    return 0 if n == -0x80000000 else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    """The coordinator partition of `key` among `num_partitions`."""
    return kafka_abs(java_string_hash_code(key)) % num_partitions
