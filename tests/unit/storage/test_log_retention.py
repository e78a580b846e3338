"""storage.log.Log retention: by time, size and log start offset, only below the high
watermark; deleted segments become ``.deleted`` files that vanish after file.delete.delay.ms.
Time is an injected clock: nothing sleeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import T0, Clock, client_batch, segment_names

DELAY = 60_000


def make_log(tmp_path: Path, clock: Clock, segments: int = 5, **cfg: object) -> Log:
    """``segments`` segments of two 1-record batches each; batch i (offset i) has timestamp
    T0 + i * 1000, so segment k's largest timestamp is T0 + (2k + 1) * 1000."""
    size = len(client_batch(1))
    config = LogConfig(segment_bytes=2 * size, file_delete_delay_ms=DELAY).overrides(**cfg)
    log = Log.open(tmp_path / "t-0", config, now=clock)
    for i in range(2 * segments):
        log.append_as_leader(client_batch(1, base_timestamp=T0 + i * 1000), 0)
    assert [s.base_offset for s in log.segments] == list(range(0, 2 * segments, 2))
    log.update_high_watermark(log.log_end_offset)
    return log


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_retention_by_time(tmp_path: Path) -> None:
    clock = Clock(T0 + 6_500)
    log = make_log(tmp_path, clock, retention_ms=5_000)
    try:
        assert log.delete_old_segments() == 1  # only segment 0 (largest ts T0+1000) is older
        assert bases(log) == [2, 4, 6, 8] and log.log_start_offset == 2
        clock.ms = T0 + 10_001  # now segments 1, 2 (largest T0+3000, T0+5000) expire
        assert log.delete_old_segments() == 2
        assert bases(log) == [6, 8] and log.log_start_offset == 6
        assert log.delete_old_segments() == 0
    finally:
        log.close()


def test_retention_by_time_boundary(tmp_path: Path) -> None:
    """Kafka (UnifiedLog.deleteRetentionMsBreachedSegments) deletes a segment only when
    now - largestTimestamp > retention.ms: one exactly retention.ms old is kept."""
    clock = Clock(T0 + 1_000 + 5_000)  # segment 0 (largest ts T0+1000) is exactly 5000 ms old
    log = make_log(tmp_path, clock, retention_ms=5_000)
    try:
        assert log.delete_old_segments() == 0
        assert bases(log) == [0, 2, 4, 6, 8] and log.log_start_offset == 0
        clock.advance(1)
        assert log.delete_old_segments() == 1
        assert bases(log) == [2, 4, 6, 8] and log.log_start_offset == 2
        clock.ms = T0 + 3_000 + 5_000  # segment 1 exactly at the limit, through the explicit now too
        assert log.delete_old_segments() == 0
        assert log.delete_old_segments(now_ms=T0 + 8_000) == 0
        assert log.delete_old_segments(now_ms=T0 + 8_001) == 1
        assert bases(log) == [4, 6, 8]
    finally:
        log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    clock = Clock(T0)
    log = make_log(tmp_path, clock)
    try:
        seg = log.segments[0].size
        log.update_config(log.config.overrides(retention_bytes=log.size - seg - 1))
        assert log.delete_old_segments() == 1  # dropping one segment is enough
        assert bases(log) == [2, 4, 6, 8]
        log.update_config(log.config.overrides(retention_bytes=log.size - 2 * seg))
        assert log.delete_old_segments() == 2
        assert bases(log) == [6, 8]
        log.update_config(log.config.overrides(retention_bytes=log.size - seg + 1))
        assert log.delete_old_segments() == 0  # a segment goes only if the excess covers it
        log.update_config(log.config.overrides(retention_bytes=log.size - seg))
        assert log.delete_old_segments() == 1
        assert bases(log) == [8] and log.log_start_offset == 8
    finally:
        log.close()


def test_retention_by_log_start_offset(tmp_path: Path) -> None:
    clock = Clock(T0)
    log = make_log(tmp_path, clock)
    try:
        assert log.maybe_increment_log_start_offset(5)
        assert not log.maybe_increment_log_start_offset(3)
        assert log.delete_old_segments() == 2  # segments [0,2) and [2,4) are wholly below 5
        assert bases(log) == [4, 6, 8] and log.log_start_offset == 5
        # the policy does not matter for the log start offset
        log.update_config(log.config.overrides(cleanup_policy=("compact",)))
        log.maybe_increment_log_start_offset(8)
        assert log.delete_old_segments() == 2
        assert bases(log) == [8]
    finally:
        log.close()


def test_compacted_topic_ignores_time_and_size(tmp_path: Path) -> None:
    clock = Clock(T0 + 10**9)
    log = make_log(tmp_path, clock, retention_ms=1, retention_bytes=1)
    log.update_config(log.config.overrides(cleanup_policy=("compact",)))
    try:
        assert log.delete_old_segments() == 0
        assert log.num_segments == 5
    finally:
        log.close()


def test_nothing_at_or_above_the_high_watermark_is_deleted(tmp_path: Path) -> None:
    clock = Clock(T0 + 10**9)
    log = make_log(tmp_path, clock, retention_ms=1)
    try:
        log.update_high_watermark(5)  # segment [4, 6) is not wholly below it
        assert log.delete_old_segments() == 2
        assert bases(log) == [4, 6, 8]
        assert log.log_start_offset == 4
    finally:
        log.close()


def test_all_expired_rolls_the_active_segment_first(tmp_path: Path) -> None:
    clock = Clock(T0 + 10**9)
    log = make_log(tmp_path, clock, retention_ms=1_000)
    try:
        assert log.delete_old_segments() == 5
        assert bases(log) == [10] and log.active_segment.size == 0
        assert log.log_start_offset == log.log_end_offset == log.high_watermark == 10
        assert segment_names(log.dir) == ["00000000000000000010.log"]
        log.append_as_leader(client_batch(1, base_timestamp=clock.ms), 0)
        assert log.log_end_offset == 11
        assert log.delete_old_segments() == 0  # the new data is not expired
    finally:
        log.close()


def test_deleted_files_vanish_after_the_delay(tmp_path: Path) -> None:
    clock = Clock(T0 + 6_500)
    log = make_log(tmp_path, clock, retention_ms=5_000)
    try:
        slice_ = log.read(0, 1000, None, True).records
        before = slice_.read()
        assert log.delete_old_segments() == 1
        deleted = sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".deleted"))
        assert deleted == [
            "00000000000000000000.index.deleted",
            "00000000000000000000.log.deleted",
            "00000000000000000000.timeindex.deleted",
        ]
        assert log.next_file_deletion_ms == T0 + 6_500 + DELAY
        assert slice_.read() == before  # readers of the old segment are not cut off
        assert log.delete_expired_files(T0 + 6_500 + DELAY - 1) == 0
        assert len([p for p in log.dir.iterdir() if p.name.endswith(".deleted")]) == 3
        clock.ms = T0 + 6_500 + DELAY
        assert log.delete_expired_files() == 1
        assert not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]
        assert log.next_file_deletion_ms is None
        with pytest.raises(ValueError):
            slice_.read()
    finally:
        log.close()


def test_stray_deleted_files_are_removed_on_load(tmp_path: Path) -> None:
    clock = Clock(T0 + 6_500)
    log = make_log(tmp_path, clock, retention_ms=5_000)
    log.delete_old_segments()
    log.close()  # before the delay: the .deleted files stay
    assert any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
    log = Log.open(tmp_path / "t-0", LogConfig(), now=clock, clean_shutdown=True, log_start_offset=2)
    try:
        assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())
        assert bases(log) == [2, 4, 6, 8] and log.log_start_offset == 2
    finally:
        log.close()
