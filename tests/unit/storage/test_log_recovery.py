"""storage.log.Log.open / storage.log_loader: recovery of torn and corrupt tails (bytes written
by hand into real segment files), stray and temporary files, missing indexes, checkpoints."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from protocol.records import iter_batches, read_header
from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import (
    T0,
    Clock,
    client_batch,
    log_bytes,
    offset_batch,
    read_all,
    segment_names,
)

CFG = LogConfig(index_interval_bytes=100, segment_index_bytes=4096)


def fill(log: Log, batches: int, records: int = 3) -> None:
    for i in range(batches):
        log.append_as_leader(client_batch(records, base_timestamp=T0 + i * 10), 1)


def crash(log: Log) -> None:
    """Leave the files as a killed process would: nothing trimmed, flushed or closed cleanly."""
    for seg in log.segments:
        seg.close_handlers()


def check_consistent(log: Log) -> None:
    """Every offset is found through the index, contents are contiguous whole batches."""
    data = read_all(log)
    expected = log.log_start_offset
    for pos, _size in iter_batches(data):
        h = read_header(data, pos)
        assert h.base_offset == expected
        expected = h.last_offset + 1
    assert expected == log.log_end_offset
    for o in range(log.log_start_offset, log.log_end_offset):
        h = read_header(log.read(o, 1, None, True).records.read())
        assert h.base_offset <= o <= h.last_offset
    for seg in log.segments:
        seg.offset_index.sanity_check()
        seg.time_index.sanity_check()


@pytest.mark.parametrize("damage", ["garbage", "half_batch", "crc_bit", "length_field"])
def test_torn_or_corrupt_tail_is_truncated(tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG, now=Clock())
    fill(log, 20)
    good = log_bytes(log)
    leo = log.log_end_offset
    crash(log)
    nxt = bytearray(offset_batch(leo, 3))
    if damage == "garbage":
        extra = b"\xde\xad\xbe\xef" * 37
    elif damage == "half_batch":
        extra = bytes(nxt[: len(nxt) // 2])
    elif damage == "crc_bit":
        nxt[len(nxt) - 3] ^= 0x04
        extra = bytes(nxt)
    else:  # a length field claiming more than the file holds
        nxt[8:12] = (10**6).to_bytes(4, "big")
        extra = bytes(nxt)
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(extra)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = Log.open(d, CFG, now=Clock(), recovery_point=0, clean_shutdown=False)
    try:
        assert f"Truncated {len(extra)} invalid bytes at the end of segment" in caplog.text
        assert log.log_end_offset == leo
        assert log_bytes(log) == good
        assert (d / "00000000000000000000.log").stat().st_size == len(good)
        check_consistent(log)
        log.append_as_leader(client_batch(2), 1)  # appends continue right after
        assert log.log_end_offset == leo + 2
    finally:
        log.close()


# A corrupt batch in an earlier segment cuts that segment only, later ones are kept (issue #12):
# test_log_load_integrity.test_corrupt_batch_in_an_old_segment_during_recovery_keeps_later_segments


def test_clean_reopen_keeps_everything(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG.overrides(segment_bytes=2000), now=Clock())
    fill(log, 50)
    before = log_bytes(log)
    leo = log.log_end_offset
    log.close()
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = Log.open(d, CFG.overrides(segment_bytes=2000), now=Clock(), clean_shutdown=True, recovery_point=leo)
    try:
        assert "Recovering" not in caplog.text
        assert log_bytes(log) == before and log.log_end_offset == leo and log.recovery_point == leo
        # the active segment's indexes got their preallocated size back
        assert log.active_segment.offset_index.max_entries == 4096 // 8
        check_consistent(log)
        r = log.offset_for_timestamp(T0 + 255)
        assert r is not None and r.offset == 78  # batch 26 (ts T0+260..262) holds the first >=
    finally:
        log.close()


def test_only_segments_from_the_recovery_point_are_recovered(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    size = len(client_batch(3))
    cfg = CFG.overrides(segment_bytes=4 * size)
    log = Log.open(d, cfg, now=Clock())
    fill(log, 20)
    log.flush(30)
    assert log.recovery_point == 30
    crash(log)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = Log.open(d, cfg, now=Clock(), recovery_point=30)
    try:
        recovered = [r.getMessage() for r in caplog.records if "Recovering unflushed segment" in r.getMessage()]
        assert [m.split()[3] for m in recovered] == ["24", "36", "48"]
        assert log.recovery_point == 30 and log.log_end_offset == 60
        check_consistent(log)
    finally:
        log.close()


def test_untrimmed_indexes_after_a_crash_are_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG, now=Clock())
    fill(log, 30)
    crash(log)
    assert (d / "00000000000000000000.index").stat().st_size == 4096  # preallocated, all zeros past the entries
    log = Log.open(d, CFG, now=Clock())
    try:
        seg = log.active_segment
        assert 0 < seg.offset_index.entries < 4096 // 8
        check_consistent(log)
    finally:
        log.close()


def test_missing_index_is_rebuilt_and_orphans_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG.overrides(segment_bytes=1000), now=Clock())
    fill(log, 30)
    leo = log.log_end_offset
    log.close()
    (d / "00000000000000000000.index").unlink()
    (d / "00000000000000000000.timeindex").unlink()
    (d / "00000000000000099999.index").write_bytes(b"")
    (d / "00000000000000099999.timeindex").write_bytes(b"")
    log = Log.open(d, CFG.overrides(segment_bytes=1000), now=Clock(), clean_shutdown=True, recovery_point=leo)
    try:
        assert "Found an orphaned index file" in caplog.text
        assert not (d / "00000000000000099999.index").exists()
        assert (d / "00000000000000000000.index").exists()
        assert log.segments[0].offset_index.entries > 0
        check_consistent(log)
    finally:
        log.close()


def test_cleaned_and_swap_files(tmp_path: Path) -> None:
    """A compaction that wrote its .swap segment but did not swap it in: the segments it
    replaces go, the .swap files become the segment; .cleaned leftovers are removed."""
    d = tmp_path / "t-0"
    size = len(offset_batch(0, 2))
    cfg = LogConfig(segment_bytes=2 * size)
    log = Log.open(d, cfg, now=Clock())
    for o in range(0, 12, 2):
        log.append_as_follower(offset_batch(o, 2))
    log.close()
    assert segment_names(d) == [f"{b:020d}.log" for b in (0, 4, 8)]
    # "compacted" segments 0 and 4 into one segment holding offsets 1 and 6..7
    compacted = offset_batch(1, 1) + offset_batch(6, 2)
    (d / "00000000000000000000.log.swap").write_bytes(compacted)
    (d / "00000000000000000100.log.cleaned").write_bytes(b"junk")
    log = Log.open(d, cfg, now=Clock(), clean_shutdown=True)
    try:
        assert segment_names(d) == [f"{b:020d}.log" for b in (0, 8)]
        assert not list(d.glob("*.swap")) and not list(d.glob("*.cleaned"))
        assert log_bytes(log) == compacted + offset_batch(8, 2) + offset_batch(10, 2)
        assert log.log_end_offset == 12
    finally:
        log.close()


def test_log_end_below_log_start_checkpoint_starts_over(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG, now=Clock())
    fill(log, 3)
    log.close()
    log = Log.open(d, CFG, now=Clock(), clean_shutdown=True, log_start_offset=100)
    try:
        assert "Deleting all segments" in caplog.text
        assert [s.base_offset for s in log.segments] == [100]
        assert log.log_start_offset == log.log_end_offset == log.high_watermark == 100
        log.append_as_leader(client_batch(1), 0)
        assert log.log_end_offset == 101
    finally:
        log.close()


def test_new_log_starts_at_log_start_offset_and_restores_high_watermark(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CFG, now=Clock(), log_start_offset=42)
    try:
        assert segment_names(log.dir) == ["00000000000000000042.log"]
        assert log.log_end_offset == 42
        fill(log, 2)
    finally:
        log.close()
    log = Log.open(tmp_path / "t-0", CFG, now=Clock(), clean_shutdown=True, high_watermark=45)
    try:
        assert log.high_watermark == 45
        assert log.log_start_offset == 42
    finally:
        log.close()
