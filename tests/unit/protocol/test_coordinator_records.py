"""`__transaction_state` keys and values framed by `protocol.coordinator_records` over the generated
TransactionLogKey / TransactionLogValue codecs, checked byte for byte twice over: against layouts
written out here by hand with `struct` from Kafka's JSON spec, and against the bytes Kafka 3.9.2's
own generated classes produce for the same records (printed by scripts/TransactionLogGolden.java,
`MessageUtil.toVersionPrefixedBytes` as Kafka's TransactionLog.keyToBytes / valueToBytes use it).
Property round trips of every (record, version) run in test_messages.py."""

from __future__ import annotations

import struct

import pytest

from protocol.coordinator import GroupMetadataKey, OffsetCommitKey, TransactionLogValue
from protocol.coordinator.transaction_log_value import PartitionsSchema
from protocol.coordinator_records import (
    TRANSACTION_LOG_VALUE_VERSION,
    UnknownVersionError,
    decode_transaction_log_key,
    decode_transaction_log_value,
    decode_versioned,
    encode_versioned,
    transaction_log_key,
    transaction_log_value,
)
from protocol.primitives import DecodeError

# Kafka 3.9.2's bytes for the records below (scripts/TransactionLogGolden.java)
KAFKA_KEY_TX = "000000027478"
KAFKA_ONGOING_V0 = (
    "000000000000000003e800030000ea6001000000020001740000000200000000000000020002616200000001"
    "000000070000018bcfe5687b0000018bcfe56801"
)
KAFKA_EMPTY_V0 = "000000000000000003e800040000ea6000ffffffff0000018bcfe568c8ffffffffffffffff"
KAFKA_ONGOING_V1 = (
    "000100000000000003e800030000ea6001030274030000000000000002000361620200000007000000018bcf"
    "e5687b0000018bcfe5680100"
)
KAFKA_EMPTY_V1 = "000100000000000003e800040000ea6000000000018bcfe568c8ffffffffffffffff00"

LAST_UPDATE = 1_700_000_000_123
START = 1_700_000_000_001


def ongoing() -> TransactionLogValue:
    """Ongoing (status 1) in two topics: t-0, t-2, ab-7."""
    return TransactionLogValue(
        producer_id=1000,
        producer_epoch=3,
        transaction_timeout_ms=60_000,
        transaction_status=1,
        transaction_partitions=[
            PartitionsSchema(topic="t", partition_ids=[0, 2]),
            PartitionsSchema(topic="ab", partition_ids=[7]),
        ],
        transaction_last_update_timestamp_ms=LAST_UPDATE,
        transaction_start_timestamp_ms=START,
    )


def empty() -> TransactionLogValue:
    """Empty (status 0): Kafka writes a null partition array, and start timestamp -1."""
    return TransactionLogValue(
        producer_id=1000,
        producer_epoch=4,
        transaction_timeout_ms=60_000,
        transaction_status=0,
        transaction_partitions=None,
        transaction_last_update_timestamp_ms=1_700_000_000_200,
        transaction_start_timestamp_ms=-1,
    )


def string16(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_key_v0_is_version_then_int16_length_string() -> None:
    key = transaction_log_key("tx")
    assert key == b"\x00\x00" + b"\x00\x02" + b"tx"
    assert key.hex() == KAFKA_KEY_TX
    assert decode_transaction_log_key(key) == "tx"
    assert decode_transaction_log_key(transaction_log_key("id-\u00e9")) == "id-\u00e9"


def test_value_v0_hand_layout_and_kafka_bytes() -> None:
    by_hand = (
        struct.pack(">h", 0)  # value version
        + struct.pack(">qhib", 1000, 3, 60_000, 1)  # producer id, epoch, timeout, status
        + struct.pack(">i", 2)  # 2 topics
        + string16("t") + struct.pack(">iii", 2, 0, 2)
        + string16("ab") + struct.pack(">ii", 1, 7)
        + struct.pack(">qq", LAST_UPDATE, START)
    )
    assert TRANSACTION_LOG_VALUE_VERSION == 0  # what Kafka 3.9 writes
    assert transaction_log_value(ongoing()) == by_hand
    assert by_hand.hex() == KAFKA_ONGOING_V0
    assert decode_transaction_log_value(by_hand) == ongoing()


def test_value_v0_null_partitions_is_int32_minus_one() -> None:
    by_hand = (
        struct.pack(">h", 0)
        + struct.pack(">qhib", 1000, 4, 60_000, 0)
        + struct.pack(">i", -1)  # null TransactionPartitions (nullableVersions 0+)
        + struct.pack(">qq", 1_700_000_000_200, -1)
    )
    assert transaction_log_value(empty()) == by_hand
    assert by_hand.hex() == KAFKA_EMPTY_V0
    decoded = decode_transaction_log_value(by_hand)
    assert decoded is not None and decoded.transaction_partitions is None
    assert decoded == empty()
    # an empty (not null) array is a different record: int32 0
    assert transaction_log_value(TransactionLogValue(transaction_partitions=[]))[17:21] == b"\0" * 4


def test_value_v1_flexible_layout_and_kafka_bytes() -> None:
    by_hand = (
        struct.pack(">h", 1)
        + struct.pack(">qhib", 1000, 3, 60_000, 1)
        + b"\x03"  # compact array: 2 topics + 1
        + b"\x02t" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"  # compact string, ids, no tags
        + b"\x03ab" + b"\x02" + struct.pack(">i", 7) + b"\x00"
        + struct.pack(">qq", LAST_UPDATE, START)
        + b"\x00"  # no tagged fields
    )
    assert transaction_log_value(ongoing(), version=1) == by_hand
    assert by_hand.hex() == KAFKA_ONGOING_V1
    assert decode_transaction_log_value(by_hand) == ongoing()

    null_v1 = (
        struct.pack(">h", 1)
        + struct.pack(">qhib", 1000, 4, 60_000, 0)
        + b"\x00"  # null compact array
        + struct.pack(">qq", 1_700_000_000_200, -1)
        + b"\x00"
    )
    assert transaction_log_value(empty(), version=1) == null_v1
    assert null_v1.hex() == KAFKA_EMPTY_V1
    assert decode_transaction_log_value(null_v1) == empty()


def test_v1_unknown_tagged_fields_survive_a_round_trip() -> None:
    """A newer Kafka's tagged fields (4.0 adds some to v1) are kept, not dropped or refused."""
    data = bytes.fromhex(KAFKA_EMPTY_V1)[:-1] + b"\x01" + b"\x05\x02hi"
    value = decode_transaction_log_value(data)
    assert value is not None and value._unknown_tagged_fields == [(5, b"hi")]
    assert transaction_log_value(value, version=1) == data


def test_tombstone_is_none() -> None:
    assert decode_transaction_log_value(None) is None


def test_unknown_versions_are_refused_with_the_version() -> None:
    with pytest.raises(UnknownVersionError) as key_error:
        decode_transaction_log_key(b"\x00\x01" + string16("g"))
    assert key_error.value.version == 1
    with pytest.raises(UnknownVersionError) as value_error:
        decode_transaction_log_value(b"\x00\x02" + bytes.fromhex(KAFKA_EMPTY_V1)[2:])
    assert value_error.value.version == 2
    assert isinstance(value_error.value, DecodeError)
    with pytest.raises(DecodeError):
        decode_transaction_log_key(b"\x00")
    with pytest.raises(DecodeError):  # truncated body
        decode_transaction_log_value(bytes.fromhex(KAFKA_ONGOING_V0)[:-3])


def test_key_version_tells_consumer_offsets_records_apart() -> None:
    """In __consumer_offsets the key's version is the record type: 0-1 offset commit, 2 group."""
    offset_key = encode_versioned(OffsetCommitKey(group="g", topic="t", partition=5), 1)
    assert offset_key == b"\x00\x01" + string16("g") + string16("t") + struct.pack(">i", 5)
    group_key = encode_versioned(GroupMetadataKey(group="g"), 2)
    assert group_key == b"\x00\x02" + string16("g")
    assert decode_versioned(OffsetCommitKey, offset_key)[0] == 1
    assert decode_versioned(GroupMetadataKey, group_key)[1].group == "g"
    with pytest.raises(UnknownVersionError):
        decode_versioned(OffsetCommitKey, group_key)
    with pytest.raises(UnknownVersionError):
        decode_versioned(GroupMetadataKey, offset_key)
