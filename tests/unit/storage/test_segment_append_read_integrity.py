"""LogSegment on real files: a failed append leaves the segment as it was (all-or-nothing), and
a read that meets an invalid batch raises CorruptRecordError instead of answering "not here"."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from protocol.records import read_header
from storage.config import LogConfig
from storage.errors import CorruptRecordError, StorageError
from storage.segment import LogSegment
from tests.unit.storage.helpers import offset_batch


def open_segment(d: Path, base: int = 0, **cfg: int | bool) -> LogSegment:
    return LogSegment.open(d, base, LogConfig().overrides(**cfg))


def append(seg: LogSegment, batch: bytes) -> None:
    h = read_header(batch)
    seg.append(h.last_offset, h.max_timestamp, h.last_offset, batch)


@pytest.mark.parametrize("preallocate", [False, True])
def test_an_append_whose_index_entry_fails_is_undone(tmp_path: Path, preallocate: bool) -> None:
    """Indexes of 16 bytes (two offset entries, a time index with only its reserved slot) and
    an entry wanted by every append: the second append writes its batch and its offset-index
    entry, then the time index refuses its entry. Before: the bytes stayed in the file and
    `size` counted them while the log end offset did not, so a retry wrote the same offsets
    again after them. Now the file, the size and both indexes are as before the append, however
    often it is retried, and what was there reads back unchanged."""
    seg = open_segment(tmp_path, 0, index_interval_bytes=0, segment_index_bytes=16,
                       preallocate=preallocate, segment_bytes=1 << 16)
    try:
        first = offset_batch(0, 3)
        append(seg, first)
        seg.append(2, 0, 2, b"")  # nothing to write: no-op
        assert seg.offset_index.entries == 0  # the first append only starts the interval count
        size_before = seg.size
        file_before = seg.log_path.read_bytes()
        for _ in range(3):
            with pytest.raises(StorageError, match="full time index"):
                append(seg, offset_batch(3, 3))
            assert seg.size == size_before
            assert seg.log_path.read_bytes() == file_before  # length (preallocation kept) and bytes
            assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
            assert seg.translate_offset(3) is None and seg.read_next_offset() == 3
        assert seg.read(0, 1 << 20).records.read() == first  # type: ignore[union-attr]
    finally:
        seg.close()
    assert os.path.getsize(seg.log_path) == len(first)


def test_an_append_with_an_offset_the_index_refuses_is_undone(tmp_path: Path) -> None:
    """An index entry below the last one (what a wrongly loaded log end offset produced): the
    append is refused and leaves nothing behind; a correct append then goes where it belongs."""
    seg = open_segment(tmp_path, 0, index_interval_bytes=0)
    try:
        for base in (0, 3, 6):
            append(seg, offset_batch(base, 3))
        size = seg.size
        with pytest.raises(StorageError, match="no larger than the last"):
            append(seg, offset_batch(3, 3))  # offsets 3..5 again
        assert seg.size == size == os.path.getsize(seg.log_path)
        assert seg.read_next_offset() == 9
        append(seg, offset_batch(9, 3))
        data = seg.read(0, 1 << 20).records.read()  # type: ignore[union-attr]
        assert data == b"".join(offset_batch(b, 3) for b in (0, 3, 6, 9))
    finally:
        seg.close()


def test_a_read_that_meets_an_invalid_batch_raises_corrupt_record(tmp_path: Path) -> None:
    """Length, magic and offsets of the headers the read scans over are checked; a damaged
    one raises CorruptRecordError (the fetch answers CORRUPT_MESSAGE) for the offsets of that
    batch, while batches before it are still read and the read resynchronises at the next
    valid batch for the offsets after it."""
    seg = open_segment(tmp_path, 0, index_interval_bytes=1 << 20)  # no index: reads scan from 0
    try:
        batches = [offset_batch(3 * i, 3) for i in range(5)]
        for b in batches:
            append(seg, b)
        pos = len(batches[0]) + len(batches[1])
        fd = os.open(seg.log_path, os.O_RDWR)
        try:
            os.pwrite(fd, struct.pack(">i", 1 << 30), pos + 8)  # batch 2's length
        finally:
            os.close(fd)
        assert seg.read(4, 1 << 20).records.read()[: len(batches[1])] == batches[1]  # type: ignore[union-attr]
        for offset in (6, 8):
            with pytest.raises(CorruptRecordError, match=f"byte position {pos}"):
                seg.read(offset, 1 << 20)
        for offset in (9, 11):  # batch 3, past the damage: found by resynchronising
            info = seg.read(offset, 1 << 20)
            assert info is not None and info.records.read() == batches[3] + batches[4]
        # the latest append's position is known without scanning: it is still served
        assert seg.read(12, 1 << 20).records.read() == batches[4]  # type: ignore[union-attr]
        # translate_offset without strict (truncation, the loader) keeps its old answer
        assert seg.translate_offset(6) is None
    finally:
        seg.close()
