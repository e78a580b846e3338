"""storage.log_loader on every start, clean or not (issue #12 §1): the active segment is
validated from its last index entry to its end, every index is sanity-checked, a corrupt batch
in an old segment during recovery cuts only that segment, and corrupt checkpoint files fall back
as Kafka's do. Damage is written by hand into real segment files."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from protocol.records import iter_batches, read_header
from storage.config import LogConfig
from storage.leader_epoch import LeaderEpochFileCache
from storage.log import Log
from tests.unit.storage.helpers import T0, Clock, client_batch, log_bytes, read_all, segment_names

CFG = LogConfig(index_interval_bytes=100, segment_index_bytes=4096)


def fill(log: Log, batches: int, records: int = 3, epoch: int = 1) -> None:
    for i in range(batches):
        log.append_as_leader(client_batch(records, base_timestamp=T0 + i * 10), epoch)


def crash(log: Log) -> None:
    for seg in log.segments:
        seg.close_handlers()


def offsets_and_values(log: Log) -> list[tuple[int, bytes]]:
    """(offset, value) of every record readable through Log.read, in order."""
    from protocol.records import decode_records

    data = read_all(log)
    out = []
    for pos, size in iter_batches(data):
        _h, records = decode_records(data[pos : pos + size])
        out.extend((r.offset, bytes(r.value)) for r in records)  # type: ignore[arg-type]
    return out


def reopen_clean(d: Path, cfg: LogConfig, leo: int) -> Log:
    return Log.open(d, cfg, now=Clock(), clean_shutdown=True, recovery_point=leo)


def check_appendable(log: Log) -> None:
    """New appends continue right after the last valid batch and read back whole."""
    before = offsets_and_values(log)
    leo = log.log_end_offset
    info = log.append_as_leader(client_batch(2, base_timestamp=T0 + 99_000), 1)
    assert info.first_offset == leo
    after = offsets_and_values(log)
    assert after[: len(before)] == before
    assert [o for o, _ in after[len(before) :]] == [leo, leo + 1]


@pytest.mark.parametrize("garbage", [b"\x00" * 37, os.urandom(500), b"\xff" * 8000])
def test_garbage_after_the_active_segment_after_a_clean_stop_is_truncated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, garbage: bytes
) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG, now=Clock())
    fill(log, 20)
    good = log_bytes(log)
    leo = log.log_end_offset
    log.close()
    seg = d / "00000000000000000000.log"
    with seg.open("ab") as f:
        f.write(garbage)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = reopen_clean(d, CFG, leo)
    try:
        assert log.log_end_offset == leo
        assert log.active_segment.size == len(good) == seg.stat().st_size
        assert log_bytes(log) == good
        assert str(seg) in caplog.text and f"byte offset {len(good)}" in caplog.text
        assert f"Truncated {len(garbage)} invalid bytes" in caplog.text
        check_appendable(log)
    finally:
        log.close()
    log = reopen_clean(d, CFG, leo + 2)  # and the next clean start is clean again
    try:
        assert log.log_end_offset == leo + 2
    finally:
        log.close()


@pytest.mark.parametrize("cut", [1, 100, 300])
def test_cut_tail_of_the_active_segment_after_a_clean_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cut: int
) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG, now=Clock())
    fill(log, 20)
    good = log_bytes(log)
    log.close()
    batches = [(p, s) for p, s in iter_batches(good)]
    new_size = len(good) - cut
    whole = [(p, s) for p, s in batches if p + s <= new_size]
    expected_leo = read_header(good, whole[-1][0]).last_offset + 1
    seg = d / "00000000000000000000.log"
    os.truncate(seg, new_size)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = reopen_clean(d, CFG, 60)
    try:
        assert log.log_end_offset == expected_leo
        assert log_bytes(log) == good[: whole[-1][0] + whole[-1][1]]
        assert str(seg) in caplog.text
        check_appendable(log)
    finally:
        log.close()


@pytest.mark.parametrize("which", ["index", "timeindex"])
@pytest.mark.parametrize("damage", ["garbage", "zeros", "cut"])
def test_garbage_indexes_after_a_clean_stop_are_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, which: str, damage: str
) -> None:
    d = tmp_path / "t-0"
    size = len(client_batch(3))
    cfg = CFG.overrides(segment_bytes=12 * size)
    log = Log.open(d, cfg, now=Clock())
    fill(log, 40)
    before = offsets_and_values(log)
    leo = log.log_end_offset
    log.close()
    assert len(segment_names(d)) >= 3
    for name in segment_names(d, "." + which):
        p = d / name
        n = p.stat().st_size
        if damage == "garbage":
            p.write_bytes(os.urandom(max(n, 48)))
        elif damage == "zeros":
            p.write_bytes(bytes(max(n, 48)))
        else:
            os.truncate(p, max(0, n - 5))
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = reopen_clean(d, cfg, leo)
    try:
        assert offsets_and_values(log) == before
        assert log.log_end_offset == leo
        for o in range(0, leo, 7):
            found = log.read(o, 1, None, True)
            assert found is not None
            h = read_header(found.records.read())
            assert h.base_offset <= o <= h.last_offset
        r = log.offset_for_timestamp(T0 + 255)
        assert r is not None and r.offset == 78
        for seg in log.segments:
            seg.offset_index.sanity_check()
            seg.time_index.sanity_check()
        assert "rebuilding" in caplog.text
        check_appendable(log)
    finally:
        log.close()


def test_intact_index_of_a_clean_stop_is_not_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    size = len(client_batch(3))
    cfg = CFG.overrides(segment_bytes=12 * size)
    log = Log.open(d, cfg, now=Clock())
    fill(log, 40)
    leo = log.log_end_offset
    log.close()
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = reopen_clean(d, cfg, leo)
    log.close()
    assert "rebuilding" not in caplog.text and "Truncated" not in caplog.text


def test_corrupt_batch_in_an_old_segment_during_recovery_keeps_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "t-0"
    size = len(client_batch(3))
    log = Log.open(d, CFG.overrides(segment_bytes=4 * size), now=Clock())
    fill(log, 20)  # 5 segments of 4 batches, offsets 0..59
    before = offsets_and_values(log)
    crash(log)
    seg1 = d / "00000000000000000012.log"
    data = bytearray(seg1.read_bytes())
    data[2 * size + 70] ^= 0xFF  # third batch of the second segment: offsets 18..20
    seg1.write_bytes(data)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = Log.open(d, CFG.overrides(segment_bytes=4 * size), now=Clock(), recovery_point=0)
    try:
        assert log.log_end_offset == 60
        assert [s.base_offset for s in log.segments] == [0, 12, 24, 36, 48]
        # only the corrupt batch is gone: the one after it in that segment is kept too
        assert offsets_and_values(log) == [ov for ov in before if not 18 <= ov[0] <= 20]
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any(
            str(seg1) in m and f"[{2 * size}, {3 * size})" in m and "offsets 18..20 lost" in m
            for m in errors
        ), errors
        assert seg1.stat().st_size == 3 * size
        assert segment_names(d, ".deleted") == [] and segment_names(d, ".cleaned") == []
        info = log.append_as_leader(client_batch(1), 1)
        assert info.first_offset == 60
    finally:
        log.close()


def _damage(path: Path, changes: dict[int, bytes]) -> None:
    data = bytearray(path.read_bytes())
    for at, b in changes.items():
        data[at : at + len(b)] = b
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("what", "changes"),
    [
        # a length field that points far beyond: the header walk alone would give up there
        ("length", lambda size: {size + 8: (-157765759).to_bytes(4, "big", signed=True)}),
        ("magic", lambda size: {size + 16: bytes([159])}),
        # two damaged batches, one record byte each: both holes dropped, the rest kept
        ("two-holes", lambda size: {size + 70: b"\x55", 3 * size + 65: b"\x66"}),
        # a whole batch overwritten by zeros
        ("zeros", lambda size: {size: bytes(size)}),
    ],
    ids=["length", "magic", "two-holes", "zeros"],
)
def test_damage_in_the_middle_of_the_active_segment_keeps_the_batches_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, what: str, changes: object
) -> None:
    d = tmp_path / "t-0"
    size = len(client_batch(3))
    log = Log.open(d, CFG, now=Clock())
    fill(log, 6)  # one segment, offsets 0..17
    before = offsets_and_values(log)
    crash(log)
    active = d / segment_names(d)[-1]
    _damage(active, changes(size))  # type: ignore[operator]
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = Log.open(d, CFG, now=Clock(), recovery_point=0)
    try:
        lost = {3, 4, 5} | ({9, 10, 11} if what == "two-holes" else set())
        assert offsets_and_values(log) == [ov for ov in before if ov[0] not in lost]
        assert log.log_end_offset == 18
        assert any("rewrote the segment without them" in r.getMessage() for r in caplog.records)
        check_appendable(log)
    finally:
        log.close()
    # what recovery wrote is a normal segment: a clean start after it finds nothing to fix
    caplog.clear()
    log = reopen_clean(d, CFG, 20)
    try:
        assert [o for o, _ in offsets_and_values(log)] == [o for o, _ in before if o not in lost] + [18, 19]
        assert not any(r.levelno >= logging.WARNING for r in caplog.records), caplog.text
    finally:
        log.close()


def test_an_interrupted_rewrite_is_redone_from_the_original(tmp_path: Path) -> None:
    """A crash after the .cleaned file was written (or half written) and the indexes removed,
    before the rename: the next load removes the .cleaned file, rebuilds the missing indexes
    and does the rewrite again from the untouched original."""
    d = tmp_path / "t-0"
    size = len(client_batch(3))
    log = Log.open(d, CFG, now=Clock())
    fill(log, 6)
    before = offsets_and_values(log)
    crash(log)
    active = d / segment_names(d)[-1]
    _damage(active, {2 * size + 70: b"\x55"})
    (d / (active.name + ".cleaned")).write_bytes(active.read_bytes()[: size + 10])
    active.with_suffix(".index").unlink()
    active.with_suffix(".timeindex").unlink()
    log = Log.open(d, CFG, now=Clock(), recovery_point=0)
    try:
        assert offsets_and_values(log) == [ov for ov in before if not 6 <= ov[0] <= 8]
        assert segment_names(d, ".cleaned") == []
        check_appendable(log)
    finally:
        log.close()


def test_torn_tail_in_the_last_segment_still_truncates(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(client_batch(3))
    log = Log.open(d, CFG.overrides(segment_bytes=4 * size), now=Clock())
    fill(log, 18)
    crash(log)
    last = d / segment_names(d)[-1]
    os.truncate(last, last.stat().st_size - 10)
    log = Log.open(d, CFG.overrides(segment_bytes=4 * size), now=Clock(), recovery_point=0)
    try:
        assert log.log_end_offset == 51
    finally:
        log.close()


@pytest.mark.parametrize("content", [b"\x00\x13garbage\xff\xfe", b"0\n2\n1 0\n", b"1\n0\n"])
def test_corrupt_leader_epoch_checkpoint_is_rebuilt_from_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CFG.overrides(segment_bytes=2000), now=Clock())
    fill(log, 10, epoch=1)
    fill(log, 10, epoch=3)
    expected = log.leader_epoch_cache.epoch_entries()  # type: ignore[union-attr]
    assert [e.epoch for e in expected] == [1, 3]
    leo = log.log_end_offset
    log.close()
    (d / "leader-epoch-checkpoint").write_bytes(content)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = reopen_clean(d, CFG.overrides(segment_bytes=2000), leo)
    try:
        assert log.leader_epoch_cache.epoch_entries() == expected  # type: ignore[union-attr]
        assert "leader-epoch-checkpoint" in caplog.text
    finally:
        log.close()
    assert LeaderEpochFileCache(d / "leader-epoch-checkpoint").epoch_entries() == expected


def test_replaying_producer_state_over_a_corrupt_batch_does_not_stop_loading(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch damaged below the recovery point (not re-validated) with no producer snapshot
    to start from: the replay of the producer state meets it and the log still loads."""
    from protocol.records import Record, build_batch

    d = tmp_path / "t-0"
    size = len(client_batch(3))
    cfg = CFG.overrides(segment_bytes=4 * size)
    log = Log.open(d, cfg, now=Clock())
    for i in range(16):
        recs = [Record(0, j, j, None, b"v%d-%d" % (i, j), []) for j in range(3)]
        batch = build_batch(recs, base_timestamp=T0 + i, producer_id=7, producer_epoch=0, base_sequence=3 * i)
        log.append_as_leader(bytearray(batch), 1)
    leo = log.log_end_offset
    log.flush(leo)
    crash(log)
    for p in d.glob("*.snapshot"):
        p.unlink()
    seg1 = d / "00000000000000000012.log"
    data = bytearray(seg1.read_bytes())
    data[size + 8 : size + 12] = b"\x7f\xff\xff\xf0"  # the second batch's length: unreadable
    seg1.write_bytes(data)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    log = Log.open(d, cfg, now=Clock(), recovery_point=leo)
    try:
        assert log.log_end_offset == leo
        assert log.append_as_leader(client_batch(1), 1).first_offset == leo
    finally:
        log.close()
