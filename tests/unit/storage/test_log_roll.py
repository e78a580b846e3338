"""storage.log.Log rolling: each of Kafka's four roll conditions starts a new segment whose
files carry the 20-digit base offset; the rolled segment is trimmed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from storage.config import LogConfig
from storage.errors import RecordTooLargeError
from storage.log import Log
from tests.unit.storage.helpers import T0, Clock, client_batch, offset_batch, segment_names


def names(*bases: int) -> list[str]:
    return [f"{b:020d}.log" for b in bases]


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    size = len(client_batch(5))
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=3 * size + 10), now=Clock())
    try:
        for _ in range(7):
            log.append_as_leader(client_batch(5), 0, T0)
        # 3 batches fit (3 * size <= segment.bytes); the 4th would not
        assert segment_names(log.dir) == names(0, 15, 30)
        assert [s.size for s in log.segments] == [3 * size, 3 * size, size]
        assert (log.dir / "00000000000000000015.index").exists()
        assert (log.dir / "00000000000000000015.timeindex").exists()
        # rolled segments are trimmed to the used index entries
        assert (log.dir / "00000000000000000000.index").stat().st_size == 8 * log.segments[0].offset_index.entries
    finally:
        log.close()


def test_roll_on_segment_ms_by_batch_timestamps(tmp_path: Path) -> None:
    """Kafka compares the new batch's max timestamp with the first batch's."""
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000), now=clock)
    try:
        log.append_as_leader(client_batch(1, base_timestamp=T0), 0)
        log.append_as_leader(client_batch(1, base_timestamp=T0 + 1000), 0)  # waited 1000: no
        assert segment_names(log.dir) == names(0)
        log.append_as_leader(client_batch(1, base_timestamp=T0 + 1001), 0)  # 1001 > 1000
        assert segment_names(log.dir) == names(0, 2)
        # the wall clock does not matter while batches carry timestamps
        clock.advance(10**9)
        log.append_as_leader(client_batch(1, base_timestamp=T0 + 1002), 0)
        assert segment_names(log.dir) == names(0, 2)
    finally:
        log.close()


def test_roll_on_segment_ms_by_wall_clock_without_timestamps(tmp_path: Path) -> None:
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000), now=clock)
    try:
        log.append_as_leader(client_batch(1, base_timestamp=-1, ts_step=0), 0)
        clock.advance(1000)
        log.append_as_leader(client_batch(1, base_timestamp=-1, ts_step=0), 0)
        assert segment_names(log.dir) == names(0)
        clock.advance(1)
        log.append_as_leader(client_batch(1, base_timestamp=-1, ts_step=0), 0)
        assert segment_names(log.dir) == names(0, 2)
    finally:
        log.close()


def test_roll_on_segment_ms_with_jitter(tmp_path: Path) -> None:
    cfg = LogConfig(segment_ms=1000, segment_jitter_ms=500)
    jitter = cfg.random_segment_jitter(random.Random(99))  # what the log's first segment draws
    assert 0 < jitter < 500
    log = Log.open(tmp_path / "t-0", cfg, now=Clock(), rng=random.Random(99))
    try:
        assert log.active_segment.roll_jitter_ms == jitter
        log.append_as_leader(client_batch(1, base_timestamp=T0), 0)
        log.append_as_leader(client_batch(1, base_timestamp=T0 + 1000 - jitter), 0)
        assert log.num_segments == 1
        log.append_as_leader(client_batch(1, base_timestamp=T0 + 1001 - jitter), 0)
        assert segment_names(log.dir) == names(0, 2)
    finally:
        log.close()


def test_roll_when_offset_index_full(tmp_path: Path) -> None:
    # 40 bytes: 5 offset-index entries, 3 time-index entries; constant timestamps keep the
    # time index at one entry, so the offset index fills first
    log = Log.open(tmp_path / "t-0", LogConfig(segment_index_bytes=40, index_interval_bytes=0), now=Clock())
    try:
        for _ in range(14):
            log.append_as_leader(client_batch(1, base_timestamp=T0), 0)
        # appends 1..5 add entries 1..5 (the first append adds none): full, so 6 rolls
        assert segment_names(log.dir) == names(0, 6, 12)
        assert log.segments[0].offset_index.entries == 5
        assert log.segments[0].time_index.entries == 1
    finally:
        log.close()


def test_roll_when_time_index_full(tmp_path: Path) -> None:
    # 36 bytes: 4 offset entries but 3 time entries, one kept for the roll -> full at 2
    log = Log.open(tmp_path / "t-0", LogConfig(segment_index_bytes=36, index_interval_bytes=0), now=Clock())
    try:
        for i in range(8):
            log.append_as_leader(client_batch(1, base_timestamp=T0 + i), 0)
        assert segment_names(log.dir) == names(0, 3, 6)
        seg0 = log.segments[0]
        assert seg0.time_index.entries == 2  # the roll's entry (max ts) is already there
        assert seg0.time_index.last_entry == (T0 + 2, 2)
        assert seg0.offset_index.entries == 2
    finally:
        log.close()


def test_roll_when_relative_offset_would_overflow(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), now=Clock())
    try:
        log.append_as_follower(offset_batch(0, 3, base_timestamp=T0))
        log.append_as_follower(offset_batch(2**31 - 1, 1, base_timestamp=T0))  # still fits
        assert segment_names(log.dir) == names(0)
        far = 2**31 + 10
        log.append_as_follower(offset_batch(far, 2, base_timestamp=T0))
        assert segment_names(log.dir) == names(0, far)
        assert segment_names(log.dir)[-1] == "00000000002147483658.log"
        assert log.log_end_offset == far + 2
        data = log.read(far, 1000).records.read()
        assert data == offset_batch(far, 2, base_timestamp=T0)
    finally:
        log.close()


def test_explicit_roll_and_empty_active_segment(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), now=Clock())
    try:
        log.append_as_leader(client_batch(3), 0, T0)
        seg = log.roll()
        assert seg.base_offset == 3 and segment_names(log.dir) == names(0, 3)
        again = log.roll()  # active segment empty at the same offset: replaced
        assert again.base_offset == 3 and again is not seg and log.num_segments == 2
        assert log.roll(10).base_offset == 10
        assert segment_names(log.dir) == names(0, 3, 10)
        assert log.log_end_offset == 3  # the log end does not move with an expected offset
    finally:
        log.close()


def test_a_batch_the_append_refuses_does_not_roll(tmp_path: Path) -> None:
    """A batch over max.message.bytes (or over segment.bytes) is refused by the append, so
    roll_due (asked before the append, to roll in an executor) must not roll for it: a client
    sending too-large batches would otherwise leave a new segment per refused request."""
    size = len(client_batch(5))
    big = client_batch(200)
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=2 * size + 10, max_message_bytes=len(big) - 1),
                   now=Clock())
    try:
        log.append_as_leader(client_batch(5), 0, T0)
        assert log.roll_due(client_batch(5), T0) is False and log.roll_due(client_batch(5) * 2, T0) is True
        assert log.roll_due(big, T0) is False
        with pytest.raises(RecordTooLargeError):
            log.append_as_leader(big, 0, T0)
        assert segment_names(log.dir) == names(0)
    finally:
        log.close()
