"""storage.log.Log truncation (follower catch-up), flush policy and recovery point, closing."""

from __future__ import annotations

import threading
from pathlib import Path

from protocol.records import read_header
from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import T0, Clock, client_batch, headers_of, read_all, segment_names


def make(tmp_path: Path, clock: Clock | None = None, **cfg: object) -> Log:
    size = len(client_batch(2))
    config = LogConfig(segment_bytes=3 * size).overrides(**cfg)
    log = Log.open(tmp_path / "t-0", config, now=clock or Clock())
    for i in range(9):  # 3 segments of 3 two-record batches: bases 0, 6, 12
        log.append_as_leader(client_batch(2, base_timestamp=T0 + i), i // 3)
    return log


def test_truncate_to(tmp_path: Path) -> None:
    log = make(tmp_path)
    try:
        log.update_high_watermark(18)
        assert not log.truncate_to(18)
        assert log.truncate_to(8)
        assert log.log_end_offset == 8 and log.high_watermark == 8
        assert [s.base_offset for s in log.segments] == [0, 6]
        assert segment_names(log.dir, ".log.deleted") == ["00000000000000000012.log.deleted"]
        assert log.leader_epoch_cache is not None
        assert [tuple(e) for e in log.leader_epoch_cache.epoch_entries()] == [(0, 0), (1, 6)]
        assert log.offset_for_timestamp(T0 + 5) is None  # batches 4.. are gone
        info = log.append_as_leader(client_batch(2), 5)
        assert info.first_offset == 8
        assert [tuple(e) for e in log.leader_epoch_cache.epoch_entries()] == [(0, 0), (1, 6), (5, 8)]
        data = read_all(log)
        assert read_header(data).base_offset == 0 and len(data) == sum(s.size for s in log.segments)
    finally:
        log.close()


def test_truncate_below_first_segment_and_fully(tmp_path: Path) -> None:
    log = make(tmp_path)
    try:
        log.update_high_watermark(18)
        log.maybe_increment_log_start_offset(12)
        log.delete_old_segments()
        assert [s.base_offset for s in log.segments] == [12]
        assert log.truncate_to(4)  # below the first segment: start over at 4
        assert [s.base_offset for s in log.segments] == [4]
        assert log.log_start_offset == log.log_end_offset == log.high_watermark == 4
        log.truncate_fully_and_start_at(100)
        assert segment_names(log.dir) == ["00000000000000000100.log"]
        assert log.log_start_offset == log.log_end_offset == 100
        assert log.leader_epoch_cache is not None and len(log.leader_epoch_cache) == 0
        assert log.append_as_leader(client_batch(1), 9).first_offset == 100
    finally:
        log.close()


def test_flush_advances_recovery_point(tmp_path: Path) -> None:
    clock = Clock()
    log = make(tmp_path, clock)
    try:
        assert log.recovery_point == 0 and log.unflushed_messages == 18
        # two rolls happened: their segments are due for a flush up to the active base
        assert log.flush_due() == 12
        log.flush(log.flush_due())
        assert log.recovery_point == 12 and log.flush_due() is None
        log.flush()
        assert log.recovery_point == 18 and log.unflushed_messages == 0
        log.truncate_to(10)
        assert log.recovery_point == 10  # follows the log end down
    finally:
        log.close()


def test_flush_messages_and_flush_ms(tmp_path: Path) -> None:
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(flush_messages=5, flush_ms=1000), now=clock)
    try:
        log.append_as_leader(client_batch(4), 0)
        assert log.flush_due() is None
        log.append_as_leader(client_batch(1), 0)
        assert log.flush_due() == 5
        log.flush(5)
        log.append_as_leader(client_batch(1), 0)
        assert log.flush_due() is None
        clock.advance(1000)
        assert log.flush_due() == 6
    finally:
        log.close()


def test_flush_in_a_thread_while_appending(tmp_path: Path) -> None:
    """flush() is the one method that may run off the loop: appends and rolls go on."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4096), now=Clock())
    try:
        errors: list[BaseException] = []
        done = threading.Event()

        def flusher() -> None:
            try:
                while not done.is_set():
                    log.flush()
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        t = threading.Thread(target=flusher)
        t.start()
        try:
            for _ in range(400):
                log.append_as_leader(client_batch(3, value_size=50), 0)
        finally:
            done.set()
            t.join()
        assert not errors
        log.flush()
        assert log.recovery_point == log.log_end_offset == 1200
    finally:
        log.close()


def test_close_is_idempotent_and_delete_removes_the_directory(tmp_path: Path) -> None:
    log = make(tmp_path)
    log.close()
    log.close()
    assert all(p.stat().st_size > 0 for p in log.dir.glob("*.log"))
    log = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    assert log.log_end_offset == 18
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_retention_in_a_thread_while_appending_and_reading(tmp_path: Path) -> None:
    """The broker runs retention in an executor: it must not corrupt concurrent appends/reads.

    A slice handed out by a read stays readable for file.delete.delay.ms after its segment left
    the log (that delay is what protects in-flight fetches, as in Kafka), so the files are only
    removed once the clock passes it; with a zero delay a read racing retention could find its
    file closed, which is the documented contract, not a bug."""
    size = len(client_batch(3, value_size=50))
    clock = Clock()
    delay = 60_000
    log = Log.open(
        tmp_path / "t-0",
        LogConfig(segment_bytes=4 * size, retention_bytes=8 * size, file_delete_delay_ms=delay),
        now=clock,
    )
    try:
        errors: list[BaseException] = []
        done = threading.Event()

        def retention() -> None:
            try:
                while not done.is_set():
                    log.delete_old_segments()
                    log.delete_expired_files()
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        t = threading.Thread(target=retention)
        t.start()
        try:
            for _ in range(600):
                log.append_as_leader(client_batch(3, value_size=50), 0)
                log.update_high_watermark(log.log_end_offset)
                start = log.log_start_offset
                info = log.read(start, 10 * size, None, True)
                h = read_header(info.records.read())
                assert h.last_offset >= start
        finally:
            done.set()
            t.join()
        assert not errors
        log.delete_old_segments()
        assert [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]
        clock.advance(delay)
        log.delete_expired_files()
        assert log.size <= 8 * size + 4 * size
        data = read_all(log)
        assert read_header(data).base_offset == log.log_start_offset
        assert not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]
    finally:
        log.close()


def test_preallocated_segments(tmp_path: Path, caplog: object) -> None:
    size = len(client_batch(2))
    prealloc = 10 * size + size // 2  # five batches fit, the data never fills the file
    cfg = LogConfig(segment_bytes=prealloc, preallocate=True)
    log = Log.open(tmp_path / "t-0", cfg, now=Clock())
    first = log.dir / "00000000000000000000.log"
    assert first.stat().st_size == prealloc  # the whole segment up front
    for _ in range(12):
        log.append_as_leader(client_batch(2), 0)
    assert [s.base_offset for s in log.segments] == [0, 20]
    assert first.stat().st_size == 10 * size  # rolled: trimmed to its data
    active = log.active_segment.log_path
    assert active.stat().st_size == prealloc and log.active_segment.size == 2 * size
    for seg in log.segments:  # crash: the active segment is left preallocated
        seg.close_handlers()
    log = Log.open(tmp_path / "t-0", cfg, now=Clock())
    try:
        assert log.log_end_offset == 24
        assert active.stat().st_size == 2 * size  # the zeros after the data were truncated
        assert read_header(read_all(log)).base_offset == 0
    finally:
        log.close()


def test_clean_close_trims_the_preallocated_active_segment(tmp_path: Path) -> None:
    size = len(client_batch(2))
    cfg = LogConfig(segment_bytes=10 * size + size // 2, preallocate=True)
    log = Log.open(tmp_path / "t-0", cfg, now=Clock())
    for _ in range(3):
        log.append_as_leader(client_batch(2), 0)
    active = log.active_segment.log_path
    assert active.stat().st_size == 10 * size + size // 2
    log.close()
    assert active.stat().st_size == 3 * size  # only the data is left
    log = Log.open(tmp_path / "t-0", cfg, now=Clock(), clean_shutdown=True)
    try:
        assert log.log_end_offset == 6 and log.active_segment.size == 3 * size
        assert active.stat().st_size == 3 * size
        log.append_as_leader(client_batch(2), 0)  # appends go right after the data
        assert log.log_end_offset == 8
        assert [h[1] for h in headers_of(read_all(log))] == [0, 2, 4, 6]
    finally:
        log.close()
    assert active.stat().st_size == 4 * size
