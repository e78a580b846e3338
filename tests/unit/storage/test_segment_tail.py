"""LogSegment's copy of its latest one-batch append (`_last_append`): reads at the log end -- the
followers' fetches woken by the append, then the consumers' -- are answered from it without a
header scan or a pread, and it never answers bytes the file no longer holds: not after a
truncation (a follower's, then a different batch at the same offsets), not after a failed
append, not for a multi-batch or large append, and not for a read that takes only part of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.records import read_header
from storage.config import LogConfig
from storage.errors import StorageError
from storage.file_records import LogFile
from storage.segment import TAIL_CACHE_MAX_BYTES, LogSegment
from tests.unit.storage.helpers import offset_batch


def append(seg: LogSegment, batch: bytes) -> None:
    h = read_header(batch)
    seg.append(h.last_offset, h.max_timestamp, h.last_offset, batch)


@pytest.fixture
def seg(tmp_path: Path) -> Iterator[LogSegment]:
    s = LogSegment.open(tmp_path, 0, LogConfig().overrides(index_interval_bytes=1 << 20))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every pread of any segment file, as (size, position)."""
    calls: list[tuple[int, int]] = []
    real = LogFile.pread

    def counting(self: LogFile, size: int, position: int) -> bytes:
        calls.append((size, position))
        return real(self, size, position)

    monkeypatch.setattr(LogFile, "pread", counting)
    return calls


def test_a_read_of_the_latest_batch_touches_no_file(seg: LogSegment, preads: list[tuple[int, int]]) -> None:
    first, latest = offset_batch(0, 3), offset_batch(3, 2)
    append(seg, first)
    append(seg, latest)
    preads.clear()
    for offset in (3, 4):  # any offset of the batch finds it
        info = seg.read(offset, 1 << 20)
        assert info is not None and info.records.read() == latest
        assert info.fetch_offset_metadata.relative_position_in_segment == len(first)
    assert seg.read(5, 1 << 20) is None  # past the end: nothing, as the scan answers
    assert preads == []
    info = seg.read(0, 1 << 20)  # from before it: the file, as always
    assert info is not None and info.records.read() == first + latest and preads


def test_a_read_that_takes_part_of_the_latest_batch_reads_the_file(seg: LogSegment) -> None:
    batch = offset_batch(0, 5)
    append(seg, batch)
    info = seg.read(0, 10)  # not min_one: cut at 10 bytes
    assert info is not None and info.records.read() == batch[:10]
    info = seg.read(0, 10, max_position=0)
    assert info is not None and info.records.read() == b""


def test_after_a_truncation_another_batch_at_the_same_offsets_is_read(seg: LogSegment) -> None:
    """A follower truncates to its leader's log and appends the leader's batch, which carries the
    same offsets as the one it removed: the reads answer the new bytes."""
    append(seg, offset_batch(0, 3))
    append(seg, offset_batch(3, 2, value_size=10))
    assert seg.truncate_to(3) > 0
    assert seg.translate_offset(3) is None
    replacement = offset_batch(3, 2, value_size=40)
    append(seg, replacement)
    info = seg.read(3, 1 << 20)
    assert info is not None and info.records.read() == replacement


def test_a_failed_append_keeps_the_previous_latest_batch(seg: LogSegment, monkeypatch: pytest.MonkeyPatch) -> None:
    latest = offset_batch(0, 3)
    append(seg, latest)

    def refuse(*_: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr("storage.segment.os.pwrite", refuse)
        with pytest.raises(StorageError):
            append(seg, offset_batch(3, 2))
    assert seg.translate_offset(3) is None
    info = seg.read(0, 1 << 20)
    assert info is not None and info.records.read() == latest


@pytest.mark.parametrize("batches", [
    pytest.param([offset_batch(0, 2), offset_batch(2, 2)], id="two batches in one append"),
    pytest.param([offset_batch(0, 1, value_size=TAIL_CACHE_MAX_BYTES)], id="one batch over the limit"),
])
def test_other_appends_are_read_from_the_file(seg: LogSegment, preads: list[tuple[int, int]],
                                              batches: list[bytes]) -> None:
    data = b"".join(batches)
    h = read_header(batches[-1])
    seg.append(h.last_offset, h.max_timestamp, h.last_offset, data)
    preads.clear()
    info = seg.read(read_header(batches[-1]).base_offset, 1 << 20)
    assert info is not None and info.records.read() == batches[-1]
    assert preads  # the header scan and the read
