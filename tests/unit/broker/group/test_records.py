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
