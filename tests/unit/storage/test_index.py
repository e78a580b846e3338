"""storage.index: OffsetIndex / TimeIndex file formats byte for byte, search, truncation,
reopening. Golden bytes are written by hand from Kafka's format (OffsetIndex.java: 4-byte
relative offset + 4-byte position; TimeIndex.java: 8-byte timestamp + 4-byte relative offset,
big-endian), not produced by the code under test."""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import mapped_file
from storage.index import (
    RESERVE_CHUNK,
    CorruptIndexError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

BASE = 100


def test_offset_index_golden_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, BASE, 1000)
    assert path.stat().st_size == 1000  # preallocated, already a multiple of 8
    idx.append(BASE + 0, 0)
    idx.append(BASE + 3, 4096)
    idx.append(BASE + 70000, 0x01020304)
    idx.close()  # trims to the entries in use
    golden = bytes.fromhex(
        "00000000" "00000000"  # relative offset 0 -> position 0
        "00000003" "00001000"  # relative offset 3 -> position 4096
        "00011170" "01020304"  # relative offset 70000 -> position 0x01020304
    )
    assert path.read_bytes() == golden


def test_time_index_golden_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    idx = TimeIndex(path, BASE, 1000)
    assert path.stat().st_size == 996  # rounded down to a multiple of 12
    idx.maybe_append(1_600_000_000_000, BASE + 0)
    idx.maybe_append(1_600_000_000_000, BASE + 1)  # same timestamp: not appended
    idx.maybe_append(1_600_000_000_500, BASE + 3)
    idx.close()
    golden = bytes.fromhex(
        "00000174876e8000" "00000000"  # 1600000000000 -> relative offset 0
        "00000174876e81f4" "00000003"  # 1600000000500 -> relative offset 3
    )
    assert path.read_bytes() == golden


def test_preallocation_rounds_down_and_reopen_counts_entries(tmp_path: Path) -> None:
    oi = OffsetIndex(tmp_path / "a.index", 0, 100)
    ti = TimeIndex(tmp_path / "a.timeindex", 0, 100)
    assert (oi.max_entries, (tmp_path / "a.index").stat().st_size) == (12, 96)
    assert (ti.max_entries, (tmp_path / "a.timeindex").stat().st_size) == (8, 96)
    for i in range(5):
        oi.append(i * 10, i * 100)
        ti.maybe_append(1000 + i, i * 10)
    oi.close()
    ti.close()
    # a trimmed file: entries = size / entry size
    oi = OffsetIndex(tmp_path / "a.index", 0, 100)
    ti = TimeIndex(tmp_path / "a.timeindex", 0, 100)
    assert oi.entries == 5 and oi.last_offset == 40 and oi.is_full()
    assert ti.entries == 5 and ti.last_entry == TimestampOffset(1004, 40)
    assert oi.lookup(25) == OffsetPosition(20, 200)
    # an existing file is taken as valid up to its rounded size, as Kafka's AbstractIndex does
    oi.resize(100)
    assert oi.length == 96 and oi.max_entries == 12 and oi.entries == 5
    oi.close_handler()
    ti.close_handler()
    reopened = OffsetIndex(tmp_path / "a.index", 0, 100)
    assert reopened.entries == 12  # a preallocated (untrimmed) file reads as full
    reopened.close_handler()


def test_sanity_check_last_offset_below_base(tmp_path: Path) -> None:
    path = tmp_path / "b.index"
    path.write_bytes(bytes.fromhex("ffffffff00000000"))  # relative offset -1
    idx = OffsetIndex(path, 50, 16)
    try:
        assert idx.last_offset == 49
        with pytest.raises(CorruptIndexError, match="less than the base offset"):
            idx.sanity_check()
    finally:
        idx.close_handler()


def test_sanity_check_size_not_multiple(tmp_path: Path) -> None:
    path = tmp_path / "c.timeindex"
    path.write_bytes(bytes(13))
    idx = TimeIndex(path, 0, 1000)
    try:
        with pytest.raises(CorruptIndexError, match="multiple of 12"):
            idx.sanity_check()
    finally:
        idx.close_handler()


def test_empty_lookup_and_append_rules(tmp_path: Path) -> None:
    oi = OffsetIndex(tmp_path / "x.index", BASE, 64)
    ti = TimeIndex(tmp_path / "x.timeindex", BASE, 64)
    try:
        assert oi.lookup(500) == OffsetPosition(BASE, 0)
        assert ti.lookup(500) == TimestampOffset(-1, BASE)
        oi.append(BASE + 5, 10)
        with pytest.raises(InvalidOffsetError):
            oi.append(BASE + 5, 20)
        with pytest.raises(IndexOffsetOverflowError):
            oi.append(BASE + 2**31, 20)
        assert not oi.can_append_offset(BASE - 1) and oi.can_append_offset(BASE + 2**31 - 1)
        ti.maybe_append(10, BASE + 5)
        with pytest.raises(InvalidOffsetError):
            ti.maybe_append(20, BASE + 4)
        with pytest.raises(ValueError):
            ti.maybe_append(5, BASE + 6)
        # time index keeps its last slot for the roll/close entry
        assert ti.max_entries == 5
        for i in range(3):
            ti.maybe_append(11 + i, BASE + 6 + i)
        assert ti.is_full()
        with pytest.raises(ValueError, match="full"):
            ti.maybe_append(100, BASE + 20)
        ti.maybe_append(100, BASE + 20, skip_full_check=True)
        assert ti.entries == 5
    finally:
        oi.close()
        ti.close()


def test_truncate_to(tmp_path: Path) -> None:
    oi = OffsetIndex(tmp_path / "t.index", 0, 800)
    ti = TimeIndex(tmp_path / "t.timeindex", 0, 1200)
    try:
        for i in range(1, 11):
            oi.append(i * 10, i * 1000)
            ti.maybe_append(i * 7, i * 10)
        oi.truncate_to(55)  # no exact entry: keep entries < 55
        assert oi.entries == 5 and oi.last_offset == 50
        oi.truncate_to(50)  # exact entry: removed too
        assert oi.entries == 4 and oi.last_offset == 40
        oi.truncate_to(1000)
        assert oi.entries == 4
        oi.truncate_to(0)
        assert oi.entries == 0 and oi.last_offset == 0
        ti.truncate_to(31)
        assert ti.entries == 3 and ti.last_entry == TimestampOffset(21, 30)
        ti.truncate_to(30)
        assert ti.last_entry == TimestampOffset(14, 20)
        oi.append(5, 1)  # appends continue after truncation
        assert oi.lookup(7) == OffsetPosition(5, 1)
    finally:
        oi.close()
        ti.close()


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 50), min_size=0, max_size=2500),
    targets=st.lists(st.integers(-5, 130_000), min_size=1, max_size=30),
)
def test_lookup_matches_bisect(tmp_path_factory: pytest.TempPathFactory, gaps: list[int], targets: list[int]) -> None:
    """Largest entry <= target, across the warm (last 8 KiB) and cold sections."""
    d = tmp_path_factory.mktemp("idx")
    oi = OffsetIndex(d / "p.index", 0, 8 * 3000)
    ti = TimeIndex(d / "p.timeindex", 0, 12 * 3000)
    try:
        offsets = []
        off = 0
        for g in gaps:
            off += g
            offsets.append(off)
            oi.append(off, off * 3)
            ti.maybe_append(off * 2, off)
        for t in targets:
            i = bisect.bisect_right(offsets, t) - 1
            want = OffsetPosition(offsets[i], offsets[i] * 3) if i >= 0 else OffsetPosition(0, 0)
            assert oi.lookup(t) == want
            j = bisect.bisect_right([o * 2 for o in offsets], t) - 1
            want_t = TimestampOffset(offsets[j] * 2, offsets[j]) if j >= 0 else TimestampOffset(-1, 0)
            assert ti.lookup(t) == want_t
    finally:
        oi.close_handler()
        ti.close_handler()


def test_rename_and_delete(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "r.index", 0, 80)
    idx.append(1, 2)
    idx.rename_to(tmp_path / "r.index.deleted")
    assert (tmp_path / "r.index.deleted").exists() and not (tmp_path / "r.index").exists()
    assert idx.lookup(5) == OffsetPosition(1, 2)
    idx.flush()
    assert idx.delete_if_exists()
    assert not (tmp_path / "r.index.deleted").exists()
    assert not idx.delete_if_exists()


def test_lookup_in_cold_and_warm_sections(tmp_path: Path) -> None:
    """3000 entries: the last 1024 (8 KiB) are the warm section searched first."""
    oi = OffsetIndex(tmp_path / "w.index", 0, 8 * 3000)
    try:
        for i in range(3000):
            oi.append(10 * i + 5, 100 * i)
        for target in (0, 4, 5, 6, 9_999, 10_005, 19_764, 19_765, 19_766, 29_994, 29_995, 10**9):
            i = (target - 5) // 10
            want = OffsetPosition(0, 0) if target < 5 else OffsetPosition(10 * min(i, 2999) + 5, 100 * min(i, 2999))
            assert oi.lookup(target) == want, target
    finally:
        oi.close()


def allocated(path: Path) -> int:
    """Bytes of `path` that have disk blocks (delayed allocations included)."""
    return path.stat().st_blocks * 512


@pytest.mark.parametrize("populate", [True, False], ids=["madvise", "posix_fallocate"])
@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_appends_reserve_disk_blocks_ahead_one_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, populate: bool, cls: type[OffsetIndex | TimeIndex]
) -> None:
    """A write through the map into a page without a disk block cannot fail with an error
    (SIGBUS on a full disk), so appends reserve blocks before they write: none for an index
    never appended to, RESERVE_CHUNK bytes at the first append, the next chunk at the append
    that would cross into it -- through madvise, or posix_fallocate where that is missing."""
    if not populate:
        monkeypatch.setattr(mapped_file, "_populate_supported", False)
    path = tmp_path / "00000000000000000000.idx"
    idx = cls(path, 0, 1 << 20)
    es = idx.ENTRY_SIZE
    per_chunk = RESERVE_CHUNK // es  # whole entries in the first chunk

    def add(n: int) -> None:
        if isinstance(idx, OffsetIndex):
            idx.append(n, n)
        else:
            idx.maybe_append(n, n)

    try:
        assert path.stat().st_size == (1 << 20) // es * es and allocated(path) == 0  # sparse
        add(0)
        assert RESERVE_CHUNK <= allocated(path) < 2 * RESERVE_CHUNK
        for n in range(1, per_chunk):
            add(n)
        assert allocated(path) < 2 * RESERVE_CHUNK  # still in the first chunk
        add(per_chunk)  # crosses (or, for 12-byte entries, straddles) into the second
        assert 2 * RESERVE_CHUNK <= allocated(path) < 3 * RESERVE_CHUNK
        idx.trim_to_valid_size()
        idx.resize(1 << 20)  # a segment made active again: its tail is sparse once more
        for n in range(per_chunk + 1, 2 * per_chunk + 2):
            add(n)
        assert 3 * RESERVE_CHUNK <= allocated(path) < 4 * RESERVE_CHUNK
    finally:
        idx.close()
    reopened = cls(path, 0, 1 << 20)
    try:
        assert reopened.entries == 2 * per_chunk + 2 and reopened.entry(per_chunk).offset == per_chunk
    finally:
        reopened.close()
