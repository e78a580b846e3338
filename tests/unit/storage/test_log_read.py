"""storage.log.Log reads and lookups: a million records over many segments read back byte for
byte; offset and timestamp lookups at and around every segment boundary; the upper bound,
min_one_message and OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from protocol.records import Record, build_batch, decode_records, iter_batches, read_header
from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from tests.unit.storage.helpers import T0, Clock, client_batch, read_all

BATCHES = 1000
PER_BATCH = 1000


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> tuple[Log, bytes]:
    """1,000 batches x 1,000 records; record at offset o has timestamp T0 + o and value
    b"<o % 1000>"; small segments so there are ~50 of them."""
    d = tmp_path_factory.mktemp("million") / "big-0"
    log = Log.open(d, LogConfig(segment_bytes=256 * 1024), now=Clock())
    appended = bytearray()
    for b in range(BATCHES):
        recs = [Record(0, i, i, None, b"%d" % i) for i in range(PER_BATCH)]
        buf = bytearray(build_batch(recs, base_timestamp=T0 + b * PER_BATCH))
        info = log.append_as_leader(buf, 5, T0)
        assert (info.first_offset, info.last_offset) == (b * PER_BATCH, b * PER_BATCH + PER_BATCH - 1)
        assert info.record_count == PER_BATCH and info.batch_count == 1
        appended += buf  # rewritten in place: base offset and leader epoch assigned
    log.update_high_watermark(log.log_end_offset)
    yield log, bytes(appended)
    log.close()


def test_million_records_read_back(million: tuple[Log, bytes]) -> None:
    log, appended = million
    assert log.log_end_offset == BATCHES * PER_BATCH
    assert log.num_segments > 40
    data = read_all(log)
    assert data == appended
    positions = list(iter_batches(data))
    assert len(positions) == BATCHES
    for i, (pos, _size) in enumerate(positions):
        h = read_header(data, pos)
        assert (h.base_offset, h.last_offset, h.records_count) == (i * PER_BATCH, i * PER_BATCH + 999, 1000)
        assert h.partition_leader_epoch == 5
    for i in random.Random(3).sample(range(BATCHES), 25):
        pos, size = positions[i]
        _h, recs = decode_records(data[pos : pos + size])
        assert [r.offset for r in recs] == list(range(i * PER_BATCH, (i + 1) * PER_BATCH))
        assert [r.value for r in recs] == [b"%d" % j for j in range(PER_BATCH)]
        assert recs[17].timestamp == T0 + i * PER_BATCH + 17


def _boundary_offsets(log: Log) -> list[int]:
    out = []
    for seg in log.segments[1:]:
        out += [seg.base_offset - 1, seg.base_offset, seg.base_offset + 1]
    return out


def test_offset_lookups_hit_the_right_batch(million: tuple[Log, bytes]) -> None:
    log, _ = million
    rng = random.Random(11)
    targets = [*_boundary_offsets(log), 0, 1, 999, 1000, log.log_end_offset - 1]
    targets += [rng.randrange(log.log_end_offset) for _ in range(300)]
    for o in targets:
        info = log.read(o, 1, log.high_watermark, True)
        data = info.records.read()
        h = read_header(data)
        assert h.base_offset <= o <= h.last_offset, o
        assert len(data) == h.size_in_bytes  # min_one_message: exactly the whole first batch
        seg = log.segment_for(o)
        assert seg is not None
        assert info.fetch_offset_metadata.segment_base_offset == seg.base_offset
        assert seg.base_offset <= h.base_offset  # batches never straddle segments


def test_timestamp_lookups_hit_the_right_record(million: tuple[Log, bytes]) -> None:
    log, _ = million
    rng = random.Random(12)
    offsets = [*_boundary_offsets(log), 0, 1, log.log_end_offset - 1]
    offsets += [rng.randrange(log.log_end_offset) for _ in range(200)]
    for o in offsets:
        r = log.offset_for_timestamp(T0 + o)
        assert r is not None and (r.offset, r.timestamp, r.leader_epoch) == (o, T0 + o, 5)
    r = log.offset_for_timestamp(T0 - 1000)
    assert r is not None and r.offset == 0
    assert log.offset_for_timestamp(T0 + log.log_end_offset) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1, 5)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (log.log_end_offset, -1, 5)
    m = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert m is not None and m.offset == log.log_end_offset - 1 and m.timestamp == T0 + m.offset


def test_read_respects_upper_bound(million: tuple[Log, bytes]) -> None:
    log, _ = million
    rng = random.Random(5)
    for _ in range(100):
        start = rng.randrange(log.log_end_offset - 1)
        upper = rng.randrange(start + 1, log.log_end_offset + 1)
        info = log.read(start, rng.choice([1, 5000, 1 << 20, 1 << 24]), upper, True)
        data = info.records.read()
        first_base = start - start % PER_BATCH
        if upper <= first_base + PER_BATCH - 1:
            # the batch holding start reaches the bound: nothing may be returned
            assert data == b"", (start, upper)
            continue
        pos = 0
        seen = 0
        while pos + 61 <= len(data):  # every batch, including a trailing cut one
            h = read_header(data, pos)
            assert h.last_offset < upper, (start, upper)
            pos += h.size_in_bytes
            seen += 1
        assert seen >= 1


def _small_log(tmp_path: Path, **cfg: int) -> Log:
    log = Log.open(tmp_path / "t-0", LogConfig().overrides(**cfg), now=Clock())
    for _ in range(10):
        log.append_as_leader(client_batch(10, value_size=100), 0)
    return log


def test_min_one_message_and_max_length(tmp_path: Path) -> None:
    log = _small_log(tmp_path)
    try:
        batch_size = log.segments[0].size // 10
        info = log.read(0, 10)
        assert info.records.size == 10 and info.first_entry_incomplete  # cut, as Kafka's are
        info = log.read(0, 10, None, True)
        assert info.records.size == batch_size > 10
        info = log.read(25, 2 * batch_size + 5, None, False)
        assert info.records.size == 2 * batch_size + 5
        assert read_header(info.records.read()).base_offset == 20
        info = log.read(0, 0, None, False)
        assert info.records.size == 0
    finally:
        log.close()


def test_offset_out_of_range(tmp_path: Path) -> None:
    log = _small_log(tmp_path)
    try:
        log.update_high_watermark(100)
        with pytest.raises(OffsetOutOfRangeError) as e:
            log.read(101, 100)
        assert e.value.code == 1 and e.value.error_name == "OFFSET_OUT_OF_RANGE"
        info = log.read(100, 100)  # reading at the log end is fine and empty
        assert info.records.size == 0 and info.fetch_offset_metadata.message_offset == 100
        log.maybe_increment_log_start_offset(30)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(29, 100)
        assert read_header(log.read(30, 1, None, True).records.read()).base_offset == 30
        with pytest.raises(OffsetOutOfRangeError):
            log.maybe_increment_log_start_offset(101)
    finally:
        log.close()


def test_read_empty_when_start_at_or_past_upper(tmp_path: Path) -> None:
    log = _small_log(tmp_path)
    try:
        assert log.read(50, 1000, 50).records.size == 0
        assert log.read(60, 1000, 50).records.size == 0
        data = log.read(40, 10_000, 50, True).records.read()
        assert [read_header(data, p).base_offset for p, _ in iter_batches(data)] == [40]
    finally:
        log.close()
