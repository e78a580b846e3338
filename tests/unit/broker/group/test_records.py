"""__consumer_offsets record layouts: golden bytes written from Kafka's schemas, round trips."""

from __future__ import annotations

import struct

import pytest

from broker.group import records as grec


def test_offset_commit_key_v1_layout() -> None:
    assert grec.offset_key("g", "t", 3) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert grec.decode_key(grec.offset_key("grp", "topic", 7)) == grec.OffsetKey("grp", "topic", 7)


def test_offset_commit_value_v3_layout() -> None:
    v = grec.OffsetValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    raw = grec.offset_value(v)
    assert raw == struct.pack(">hqih", 3, 42, 5, 1) + b"m" + struct.pack(">q", 1000)
    assert grec.decode_offset_value(raw) == v


def test_offset_commit_value_v1_has_expire_timestamp() -> None:
    raw = struct.pack(">hqh", 1, 9, 0) + struct.pack(">qq", 11, 22)
    assert grec.decode_offset_value(raw) == grec.OffsetValue(9, -1, "", 11, 22)


def test_group_metadata_round_trip() -> None:
    member = grec.MemberValue("m-1", None, "client", "/127.0.0.1", 300000, 10000, b"sub", b"assign")
    v = grec.GroupValue("consumer", 4, "range", "m-1", 1234, [member])
    raw = grec.group_value(v)
    assert raw[:2] == b"\x00\x03"
    assert grec.decode_group_value(raw) == v
    assert grec.group_key("g") == b"\x00\x02\x00\x01g"
    assert grec.decode_key(grec.group_key("g")) == grec.GroupKey("g")


def test_group_metadata_v0_members_have_no_rebalance_timeout() -> None:
    raw = (
        struct.pack(">h", 0) + b"\x00\x08consumer" + struct.pack(">i", 1) + b"\x00\x05range" + b"\x00\x01m"
        + struct.pack(">i", 1) + b"\x00\x01m" + b"\x00\x01c" + b"\x00\x01h" + struct.pack(">i", 6000)
        + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a"
    )
    v = grec.decode_group_value(raw)
    assert v.members == [grec.MemberValue("m", None, "c", "h", 6000, 6000, b"s", b"a")]


def test_unknown_key_version_is_skipped_and_truncation_is_an_error() -> None:
    assert grec.decode_key(b"\x00\x05\x00\x00") is None
    with pytest.raises(ValueError):
        grec.decode_offset_value(b"\x00\x03\x00")


def test_group_metadata_v3_layout_by_hand() -> None:
    """GroupMetadataValue v3 as Kafka 3.9 writes it, laid out from the spec: nullable strings,
    currentStateTimestamp, members with groupInstanceId and both timeouts, int32-length bytes."""
    member = grec.MemberValue("m", "inst", "c", "h", 300000, 10000, b"s", b"as")
    raw = grec.group_value(grec.GroupValue("consumer", 4, None, "m", 77, [member]))
    assert raw == (
        struct.pack(">h", 3) + b"\x00\x08consumer" + struct.pack(">i", 4) + b"\xff\xff" + b"\x00\x01m"
        + struct.pack(">q", 77) + struct.pack(">i", 1)
        + b"\x00\x01m" + b"\x00\x04inst" + b"\x00\x01c" + b"\x00\x01h" + struct.pack(">ii", 300000, 10000)
        + struct.pack(">i", 1) + b"s" + struct.pack(">i", 2) + b"as"
    )
    assert grec.decode_group_value(raw).members == [member]


def test_flexible_v4_values_are_read() -> None:
    """v4 (flexible: compact strings, tagged fields) is in Kafka's schemas; a log written by a
    newer Kafka is read, not skipped as unreadable."""
    offset_v4 = struct.pack(">hqi", 4, 42, 5) + b"\x02m" + struct.pack(">q", 1000) + b"\x00"
    assert grec.decode_offset_value(offset_v4) == grec.OffsetValue(42, 5, "m", 1000, -1)
    group_v4 = (
        struct.pack(">h", 4) + b"\x09consumer" + struct.pack(">i", 2) + b"\x06range" + b"\x00"
        + struct.pack(">q", -1) + b"\x02"
        + b"\x02m" + b"\x00" + b"\x02c" + b"\x02h" + struct.pack(">ii", 5000, 6000)
        + b"\x02s" + b"\x02a" + b"\x00"
        + b"\x00"
    )
    v = grec.decode_group_value(group_v4)
    assert (v.protocol_type, v.generation, v.protocol, v.leader) == ("consumer", 2, "range", None)
    assert v.members == [grec.MemberValue("m", None, "c", "h", 5000, 6000, b"s", b"a")]


def test_unknown_value_version_is_an_error() -> None:
    with pytest.raises(ValueError, match="version 5"):
        grec.decode_offset_value(struct.pack(">hqi", 5, 1, 1) + b"\x00" * 16)
