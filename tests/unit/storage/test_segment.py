"""storage.segment.LogSegment: append/read, index entries as Kafka places them, timestamp
lookups, recovery, truncation, renaming and deletion, on real files."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from protocol.records import decode_records, iter_batches, read_header
from storage.config import LogConfig
from storage.errors import LogSegmentOffsetOverflowError
from storage.segment import LogSegment, offset_from_file_name
from tests.unit.storage.helpers import T0, offset_batch


def open_segment(d: Path, base: int = 0, **cfg: int) -> LogSegment:
    return LogSegment.open(d, base, LogConfig().overrides(**cfg))


def append(seg: LogSegment, batch: bytes) -> None:
    h = read_header(batch)
    seg.append(h.last_offset, h.max_timestamp, h.last_offset, batch)


def test_file_names_and_append_read(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 42)
    try:
        assert seg.log_path.name == "00000000000000000042.log"
        assert offset_from_file_name(seg.log_path.name) == 42
        batches = [offset_batch(42 + 3 * i, 3) for i in range(10)]
        for b in batches:
            append(seg, b)
        assert seg.size == sum(map(len, batches))
        assert seg.log_path.read_bytes() == b"".join(batches)
        info = seg.read(50, 10_000)
        assert info is not None
        assert info.fetch_offset_metadata.relative_position_in_segment == 2 * len(batches[0])
        assert info.records.read() == b"".join(batches[2:])
        # max_position cuts, min_one_message returns a whole batch beyond max_size
        info = seg.read(45, 1, max_position=seg.size, min_one_message=True)
        assert info is not None and info.records.read() == batches[1]
        assert not info.first_entry_incomplete
        info = seg.read(45, 1)
        assert info is not None and info.records.size == 1 and info.first_entry_incomplete
        assert seg.read(72, 100) is None  # past the last offset
        assert seg.read_next_offset() == 72
        assert seg.translate_offset(44) == (44, 0, len(batches[0]))
    finally:
        seg.close()


def test_translate_offset_around_the_latest_append(tmp_path: Path) -> None:
    """translate_offset starts its scan at the latest append when the offset is at or past it
    (a consumer keeping up); every lookup must still find the first batch ending at or after
    the offset, before and after that append, and after a truncation moved the end back."""
    seg = open_segment(tmp_path, 0, index_interval_bytes=1 << 20)  # no index entries: scans only
    try:
        batches = [offset_batch(3 * i, 3) for i in range(6)]
        positions = [sum(map(len, batches[:i])) for i in range(6)]
        for b in batches[:3]:
            append(seg, b)
        two = batches[3] + batches[4]  # one append of two batches: the hint is the first one
        h = read_header(batches[4])
        seg.append(h.last_offset, h.max_timestamp, h.last_offset, two)

        def expect(offset: int) -> tuple[int, int, int] | None:
            i = offset // 3
            return (3 * i + 2, positions[i], len(batches[i])) if i < 5 else None

        for offset in range(16):
            assert seg.translate_offset(offset) == expect(offset), offset
        assert seg.truncate_to(6) == positions[5] - positions[2]
        for offset in range(8):
            want = expect(offset) if offset < 6 else None
            assert seg.translate_offset(offset) == want, offset
        append(seg, batches[2])
        assert seg.translate_offset(7) == expect(7)
        assert seg.translate_offset(1) == expect(1)
    finally:
        seg.close()


def test_reads_at_the_latest_append_skip_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read at or past the latest append (a follower or a consumer at the log end) starts at
    that append without the offset index's binary search: no entry can point past it. Reads
    before it, and every read after a truncation dropped the hint, still use the index."""
    seg = open_segment(tmp_path, 0, index_interval_bytes=1)  # an index entry at every append
    try:
        batches = [offset_batch(3 * i, 3) for i in range(4)]
        for b in batches:
            append(seg, b)
        last = sum(map(len, batches[:3]))
        lookups: list[int] = []
        index_type = type(seg.offset_index)
        real_lookup = index_type.lookup

        def counting_lookup(index, offset: int):  # type: ignore[no-untyped-def]
            lookups.append(offset)
            return real_lookup(index, offset)

        monkeypatch.setattr(index_type, "lookup", counting_lookup)
        assert seg.translate_offset(9) == (11, last, len(batches[3]))
        assert seg.translate_offset(11) == (11, last, len(batches[3]))
        info = seg.read(10, 10_000)
        assert info is not None and info.records.read() == batches[3]
        assert seg.translate_offset(12) is None
        assert lookups == []
        assert seg.translate_offset(4) == (5, len(batches[0]), len(batches[1]))
        assert lookups == [4]
        seg.truncate_to(6)  # drops the last two batches and the hint with them
        lookups.clear()
        assert seg.translate_offset(3) == (5, len(batches[0]), len(batches[1]))
        assert lookups == [3]
    finally:
        seg.close()


def test_index_entries_follow_kafkas_interval_rule(tmp_path: Path) -> None:
    """An entry (last offset of the append, its start position) is added when more than
    index.interval.bytes were appended since the last one -- never for the first append."""
    seg = open_segment(tmp_path, 0, index_interval_bytes=150)
    batches = [offset_batch(i, 1, value_size=40) for i in range(8)]
    size = len(batches[0])
    assert 100 < size < 150  # so entries come every second append
    for b in batches:
        append(seg, b)
    seg.close()
    entries = struct.iter_unpack(">ii", (tmp_path / "00000000000000000000.index").read_bytes())
    # bytes since last entry: 0,s,2s>150 -> entry at append 2; then s,2s -> entry at 4, 6
    assert list(entries) == [(2, 2 * size), (4, 4 * size), (6, 6 * size)]
    times = list(struct.iter_unpack(">qi", (tmp_path / "00000000000000000000.timeindex").read_bytes()))
    # time entries with the index entries, plus the max timestamp on close
    assert times == [(T0 + 2, 2), (T0 + 4, 4), (T0 + 6, 6), (T0 + 7, 7)]


def test_offset_overflow_is_refused(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 0)
    try:
        with pytest.raises(LogSegmentOffsetOverflowError):
            append(seg, offset_batch(2**31, 1))
        assert seg.size == 0
        assert seg.should_roll(1 << 30, 1 << 40, T0, 2**31, 100, T0)
        assert not seg.should_roll(1 << 30, 1 << 40, T0, 2**31 - 1, 100, T0)
    finally:
        seg.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 0, index_interval_bytes=100)
    try:
        for i in range(0, 200, 5):
            append(seg, offset_batch(i, 5))  # record at offset o has timestamp T0 + o
        for ts in (T0 - 10, T0, T0 + 1, T0 + 77, T0 + 199):
            r = seg.find_offset_by_timestamp(ts)
            assert r is not None and r.offset == max(0, ts - T0) and r.timestamp == max(T0, ts)
        assert seg.find_offset_by_timestamp(T0 + 200) is None
        r = seg.find_offset_by_timestamp(T0 + 3, starting_offset=50)
        assert r is not None and r.offset == 50
        m = seg.find_max_timestamp()
        assert m is not None and (m.offset, m.timestamp) == (199, T0 + 199)
    finally:
        seg.close()


@pytest.mark.parametrize(
    "damage",
    ["garbage", "half_batch", "crc_bit", "zeros"],
)
def test_recover_truncates_bad_tail_and_logs_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    seg = open_segment(tmp_path, 0, index_interval_bytes=64)
    good = [offset_batch(i * 4, 4) for i in range(20)]
    for b in good:
        append(seg, b)
    valid = seg.size
    seg.close()
    extra = {
        "garbage": b"\x13\x37" * 50,
        "half_batch": offset_batch(80, 4)[:40],
        "crc_bit": _flip_bit(offset_batch(80, 4), 70),
        "zeros": bytes(1000),  # preallocated tail
    }[damage]
    with open(seg.log_path, "ab") as f:
        f.write(extra)
    seg = LogSegment.open(tmp_path, 0, LogConfig(index_interval_bytes=64), file_already_exists=True)
    try:
        caplog.set_level(logging.WARNING, logger="odradek.storage")
        truncated = seg.recover()
        assert truncated == len(extra)
        assert f"Truncated {len(extra)} invalid bytes" in caplog.text
        assert seg.size == valid == seg.log_path.stat().st_size
        assert seg.read_next_offset() == 80
        assert seg.offset_index.entries > 5
        for o in range(80):
            m = seg.translate_offset(o)
            assert m is not None and m.offset // 4 == o // 4
    finally:
        seg.close()


def _flip_bit(batch: bytes, pos: int) -> bytes:
    b = bytearray(batch)
    b[pos] ^= 0x10
    return bytes(b)


def test_recover_drops_only_a_corrupt_batch_in_the_middle(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seg = open_segment(tmp_path, 0)
    batches = [offset_batch(i, 1) for i in range(10)]
    for b in batches:
        append(seg, b)
    seg.close()
    data = bytearray(seg.log_path.read_bytes())
    data[len(batches[0]) * 4 + 65] ^= 1  # a record byte of the 5th batch
    seg.log_path.write_bytes(data)
    seg = LogSegment.open(tmp_path, 0, LogConfig(), file_already_exists=True)
    try:
        assert seg.recover() == len(batches[0])
        assert seg.read_next_offset() == 10
        assert seg.read(0, 1 << 20).records.read() == b"".join(batches[:4] + batches[5:])  # type: ignore[union-attr]
        assert "corrupt batch at position" in caplog.text
        assert "offsets 4..4 lost" in caplog.text
    finally:
        seg.close()


def test_recover_rejects_offsets_going_backwards(tmp_path: Path) -> None:
    """The CRC does not cover base offsets: recovery checks they increase."""
    seg = open_segment(tmp_path, 0)
    append(seg, offset_batch(0, 2))
    append(seg, offset_batch(2, 2))
    _raw_append(seg, offset_batch(1, 2))  # valid CRC, but offsets 1..2 again
    seg.close()
    seg = LogSegment.open(tmp_path, 0, LogConfig(), file_already_exists=True)
    try:
        assert seg.recover() == len(offset_batch(1, 2))
        assert seg.read_next_offset() == 4
    finally:
        seg.close()


def _raw_append(seg: LogSegment, b: bytes) -> None:
    with open(seg.log_path, "r+b") as f:
        f.seek(seg.size)
        f.write(b)
    seg._size += len(b)  # test-only: bypass the append checks


def test_truncate_to(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 0, index_interval_bytes=1)
    batches = [offset_batch(i * 2, 2) for i in range(10)]
    for b in batches:
        append(seg, b)
    seg.on_become_inactive_segment()  # trimmed like a rolled segment
    assert seg.offset_index.max_entries == seg.offset_index.entries
    removed = seg.truncate_to(10)
    try:
        assert removed == sum(map(len, batches[5:]))
        assert seg.size == sum(map(len, batches[:5])) == seg.log_path.stat().st_size
        assert seg.read_next_offset() == 10
        assert seg.offset_index.last_offset < 10
        assert seg.offset_index.max_entries > seg.offset_index.entries  # active again: regrown
        assert seg.max_timestamp_so_far == T0 + 9
        append(seg, offset_batch(10, 1))
        assert seg.read_next_offset() == 11
        size = seg.size
        assert seg.truncate_to(0) == size and seg.size == 0
        assert seg.read_next_offset() == 0
    finally:
        seg.close()


def test_rename_to_deleted_and_delete(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 7)
    append(seg, offset_batch(7, 3))
    append(seg, offset_batch(10, 2))
    slice_ = seg.read(7, offset_batch_size := len(offset_batch(7, 3)))
    tail = seg.read(10, 1000)  # the latest append: its bytes come with the slice
    assert slice_ is not None and tail is not None and slice_.records.size == offset_batch_size
    seg.rename_to_deleted()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000000007.index.deleted",
        "00000000000000000007.log.deleted",
        "00000000000000000007.timeindex.deleted",
    ]
    # a slice taken before the rename still reads the bytes
    assert slice_.records.read() == offset_batch(7, 3)
    seg.delete()
    assert list(tmp_path.iterdir()) == []
    assert seg.deleted
    with pytest.raises(ValueError):
        slice_.records.read()
    assert tail.records.read() == offset_batch(10, 2)


def test_kafka_python_reads_our_segment(tmp_path: Path) -> None:
    """An independent RecordBatch reader (kafka-python) parses the .log file."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.memory_records import MemoryRecords

    seg = open_segment(tmp_path, 0)
    for i in range(0, 30, 3):
        append(seg, offset_batch(i, 3))
    seg.close()
    records = MemoryRecords(seg.log_path.read_bytes())
    offsets = []
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            offsets.append(r.offset)
            assert r.value.startswith(b"%d|" % r.offset)
            assert r.timestamp == T0 + r.offset
    assert offsets == list(range(30))
    data = seg.log_path.read_bytes()
    assert [p for p, _ in iter_batches(data)] == [i * len(data) // 10 for i in range(10)]
    _h, recs = decode_records(data)
    assert recs[0].offset == 0
