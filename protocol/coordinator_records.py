"""Record-level framing of the coordinators' records, byte-compatible with Kafka.

A record in `__consumer_offsets` or `__transaction_state` has a key and a value, each framed as
Kafka's `MessageUtil.toVersionPrefixedBytes` frames them: an int16 version, then the body of the
generated schema (`protocol.coordinator`) at that version. The key's version also says what kind
of record it is (OffsetCommitKey 0-1, GroupMetadataKey 2, TransactionLogKey 0 in its own topic);
the value's version is the schema version of the value. A null value is a tombstone: it deletes
the key when the log is compacted and when the coordinator replays the topic.

Decoding reads the leading version and refuses one the schema does not have with
`UnknownVersionError` (carrying the version), which is how Kafka's loaders tell a record of
another kind (or of a newer broker) from a malformed one.

Transaction log (Kafka 3.9 `kafka.coordinator.transaction.TransactionLog`): keys are written at
version 0 and values at version 0. Kafka 3.9 writes value version 1 (flexible) only when the
finalized feature `transaction.version` is above 0 (`TransactionStateManager.usesFlexibleRecords`),
and transaction.version 1 bootstraps only with metadata version 4.0-IV0, so a 3.9 cluster, and
every ZooKeeper-mode cluster, writes version 0; both versions are read. A value carries a null
partition array when the transaction is Empty (`valueToBytes` writes null, not an empty array).

No I/O here: bytes in, typed records out.
"""

from __future__ import annotations

import struct
from typing import TypeVar

from protocol.coordinator import TransactionLogKey, TransactionLogValue
from protocol.primitives import ApiMessage, DecodeError

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 0  # what Kafka 3.9 writes (see the module docstring)

_VERSION = struct.Struct(">h")

M = TypeVar("M", bound=ApiMessage)


class UnknownVersionError(DecodeError):
    """A key or value whose leading version the expected schema does not have."""

    def __init__(self, schema: str, version: int) -> None:
        super().__init__(f"unknown {schema} version {version}")
        self.schema = schema
        self.version = version


def encode_versioned(message: ApiMessage, version: int) -> bytes:
    """`int16 version + body`, as Kafka's `MessageUtil.toVersionPrefixedBytes`."""
    return _VERSION.pack(version) + message.encode(version)


def read_version(buf: bytes | bytearray | memoryview) -> int:
    """The leading int16 version of a key or value."""
    if len(buf) < 2:
        raise DecodeError(f"coordinator record of {len(buf)} bytes has no version")
    return int(_VERSION.unpack_from(buf, 0)[0])


def decode_versioned(cls: type[M], buf: bytes | bytearray | memoryview) -> tuple[int, M]:
    """(version, message) of a version-prefixed key or value of schema `cls`; trailing bytes
    are ignored, as Kafka's generated readers ignore them."""
    version = read_version(buf)
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise UnknownVersionError(cls.__name__, version)
    return version, cls.decode(buf, version, 2)


def transaction_log_key(transactional_id: str) -> bytes:
    """The key of a transactional id's record in `__transaction_state`."""
    return encode_versioned(
        TransactionLogKey(transactional_id=transactional_id), TRANSACTION_LOG_KEY_VERSION
    )


def decode_transaction_log_key(buf: bytes | bytearray | memoryview) -> str:
    """The transactional id of a `__transaction_state` key; `UnknownVersionError` for a key of
    another version (Kafka's `readTxnRecordKey` answers Left(version) and the loader skips it)."""
    return decode_versioned(TransactionLogKey, buf)[1].transactional_id


def transaction_log_value(
    value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_VERSION
) -> bytes:
    """The value of a transactional id's record, at the version Kafka 3.9 writes by default."""
    return encode_versioned(value, version)


def decode_transaction_log_value(
    buf: bytes | bytearray | memoryview | None,
) -> TransactionLogValue | None:
    """The value of a `__transaction_state` record, None for a tombstone; `UnknownVersionError`
    for a version Kafka 3.9 does not know either (its loader fails on it)."""
    if buf is None:
        return None
    return decode_versioned(TransactionLogValue, buf)[1]
