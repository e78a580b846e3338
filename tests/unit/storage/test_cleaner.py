"""storage.cleaner on real segment files, in process (the worker's `clean` called directly, the
swap through Log.replace_segments): a model check of compaction with hypothesis, tombstones and
their delete horizon, compressed batches, producer state, the size grouping, and the files a
crash at each step of the swap leaves."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.records import (
    DELETE_HORIZON_MASK,
    HEADER_STRUCT,
    Record,
    build_batch,
    decode_records,
    iter_batches,
)
from storage.cleaner.cleaner import CleanResult, SegmentInfo, clean, group_segments_by_size
from storage.cleaner.log_cleaner import CleanerConfig, make_clean_job
from storage.cleaner.manager import cleanable_offsets, log_to_clean
from storage.config import LogConfig
from storage.log import Log
from storage.segment import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from tests.unit.storage.helpers import T0, Clock, read_all

DAY = 86_400_000


def keyed_batch(items: list[tuple[bytes, bytes | None]], *, ts: int = T0, compression: int = 0, **kw: object) -> bytes:
    return build_batch(
        [Record(0, i, i, k, v) for i, (k, v) in enumerate(items)], base_timestamp=ts, compression=compression, **kw  # type: ignore[arg-type]
    )


def records(lg: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, timestamp) of every record readable from the log, in order."""
    data = read_all(lg)
    out = []
    for pos, size in iter_batches(data):
        _h, recs = decode_records(data[pos : pos + size])
        out.extend((r.offset, r.key, r.value, r.timestamp) for r in recs)  # type: ignore[misc]
    return out


def batch_headers(lg: Log) -> list[tuple[int, ...]]:
    data = read_all(lg)
    return [HEADER_STRUCT.unpack_from(data, pos) for pos, _ in iter_batches(data)]


def clean_in_process(lg: Log, now_ms: int, checkpoint: int | None = None) -> CleanResult | None:
    """One cleaning of ``lg`` as the broker does it, in this process."""
    dirty, uncleanable, _ = cleanable_offsets(lg, checkpoint, now_ms)
    ltc = log_to_clean(("t", 0), lg, dirty, uncleanable, False)
    if ltc.cleanable_bytes == 0:
        return None
    job = make_clean_job(ltc, CleanerConfig(), now_ms)
    truncations = lg.truncations

    def swap(group: object) -> bool:
        return lg.swap_in_cleaned(group.base_offset, group.replaces, truncations)  # type: ignore[attr-defined]

    return clean(job, swap)


def compacted_log(tmp_path: Path, **overrides: object) -> Log:
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)
    return Log.open(tmp_path / "t-0", cfg.overrides(**overrides) if overrides else cfg, now=Clock())


ops = st.lists(
    st.tuples(st.integers(0, 11), st.one_of(st.none(), st.binary(min_size=0, max_size=30))),
    min_size=1,
    max_size=120,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, batch_sizes=st.lists(st.integers(1, 5), min_size=1, max_size=10), compression=st.sampled_from([0, 1, 4]))
def test_model_latest_value_per_key_and_offsets_kept(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[int, bytes | None]], batch_sizes: list[int], compression: int
) -> None:
    lg = compacted_log(tmp_path_factory.mktemp("m"))
    try:
        model: dict[bytes, tuple[int, bytes | None]] = {}
        written: dict[int, tuple[bytes, bytes | None]] = {}
        i = 0
        sizes = iter(batch_sizes * 200)
        while i < len(ops):
            chunk = ops[i : i + next(sizes)]
            i += len(chunk)
            items = [(b"k%d" % k, v) for k, v in chunk]
            info = lg.append_as_leader(keyed_batch(items, compression=compression), 0)
            for j, (k, v) in enumerate(items):
                written[info.first_offset + j] = (k, v)
                model[k] = (info.first_offset + j, v)
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()  # everything written becomes cleanable
        before_end = lg.log_end_offset
        result = clean_in_process(lg, T0)
        assert result is not None
        after = records(lg)
        offsets = [o for o, *_ in after]
        assert offsets == sorted(set(offsets)), "offsets strictly increase"
        for o, k, v, _ts in after:
            assert written[o] == (k, v), f"offset {o} holds what was written there"
        latest = {k: (o, v) for o, k, v, _ in after}
        assert latest == model, "every key's latest record, tombstones included (before the horizon)"
        assert len(after) == len(model), "one record per key"
        assert lg.log_end_offset == before_end
        # past the delete horizon a second cleaning removes the tombstones
        clean_in_process(lg, T0 + DAY + 1, checkpoint=0)
        again = records(lg)
        assert {k: (o, v) for o, k, v, _ in again} == {k: ov for k, ov in model.items() if ov[1] is not None}
    finally:
        lg.close()


def test_a_cleaning_keeps_batches_offsets_timestamps_and_producer_fields(tmp_path: Path) -> None:
    lg = compacted_log(tmp_path)
    try:
        b1 = keyed_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], ts=T0, producer_id=7, producer_epoch=2, base_sequence=0)
        b2 = keyed_batch([(b"a", b"2"), (b"d", None)], ts=T0 + 50, producer_id=7, producer_epoch=2, base_sequence=3)
        lg.append_as_leader(b1, 4)
        lg.append_as_leader(b2, 4)
        lg.append_as_leader(keyed_batch([(b"e", b"1")], ts=T0 + 60), 4)  # offset 5: another producer-less batch
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        clean_in_process(lg, T0 + 100)
        assert [(o, k, v, ts) for o, k, v, ts in records(lg)] == [
            (1, b"b", b"1", T0 + 1),
            (2, b"c", b"1", T0 + 2),
            (3, b"a", b"2", T0 + 50),
            (4, b"d", None, T0 + 51),
            (5, b"e", b"1", T0 + 60),
        ]
        h1, h2, h3 = batch_headers(lg)
        # first batch: base offset and last offset delta kept (the producer's last sequence),
        # producer fields and the leader epoch kept, max timestamp of what is left
        assert (h1[0], h1[6], h1[9], h1[10], h1[11], h1[2], h1[12]) == (0, 2, 7, 2, 0, 4, 2)
        assert h1[8] == T0 + 2
        # second batch: a tombstone stays, and its batch gets the delete horizon (KIP-534)
        assert h2[5] & DELETE_HORIZON_MASK and h2[7] == T0 + 100 + DAY
        assert not h3[5] & DELETE_HORIZON_MASK
    finally:
        lg.close()


def test_the_last_batch_of_an_active_producer_stays_even_when_empty(tmp_path: Path) -> None:
    lg = compacted_log(tmp_path)
    try:
        lg.append_as_leader(keyed_batch([(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0), 0)
        lg.append_as_leader(keyed_batch([(b"a", b"2")]), 0)
        lg.append_as_leader(keyed_batch([(b"z", b"1")]), 0)
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        clean_in_process(lg, T0)
        hs = batch_headers(lg)
        assert [(h[0], h[12], h[9]) for h in hs] == [(0, 0, 9), (1, 1, -1), (2, 1, -1)]
        # the producer's sequence state survives a reload from the cleaned log
        lg.close()
        lg = compacted_log(tmp_path)
        info = lg.append_as_leader(keyed_batch([(b"a", b"3")], producer_id=9, producer_epoch=0, base_sequence=1), 0)
        assert info.first_offset == 3
    finally:
        lg.close()


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_compressed_batches_are_recompressed_with_their_codec(tmp_path: Path, compression: int) -> None:
    lg = compacted_log(tmp_path)
    try:
        lg.append_as_leader(keyed_batch([(b"k%d" % i, b"v1") for i in range(6)], compression=compression), 0)
        lg.append_as_leader(keyed_batch([(b"k%d" % i, b"v2") for i in range(3)], compression=compression), 0)
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        clean_in_process(lg, T0)
        assert [(o, k, v) for o, k, v, _ in records(lg)] == [(3, b"k3", b"v1"), (4, b"k4", b"v1"), (5, b"k5", b"v1"),
                                                              (6, b"k0", b"v2"), (7, b"k1", b"v2"), (8, b"k2", b"v2")]
        assert all(h[5] & 7 == compression for h in batch_headers(lg))
    finally:
        lg.close()


def test_records_within_min_compaction_lag_and_the_active_segment_are_untouched(tmp_path: Path) -> None:
    lg = compacted_log(tmp_path, min_compaction_lag_ms=1000)
    try:
        lg.append_as_leader(keyed_batch([(b"a", b"old")], ts=T0), 0)
        lg.roll()
        lg.append_as_leader(keyed_batch([(b"a", b"new")], ts=T0 + 5000), 0)
        lg.roll()
        lg.append_as_leader(keyed_batch([(b"a", b"newest")], ts=T0 + 5000), 0)  # active segment
        lg.update_high_watermark(lg.log_end_offset)
        # at T0 + 5500 the second segment is within the lag: only the first is cleanable, and
        # it keeps its record (the later versions are not in the dirty section)
        dirty, uncleanable, _ = cleanable_offsets(lg, None, T0 + 5500)
        assert (dirty, uncleanable) == (0, 1)
        clean_in_process(lg, T0 + 5500)
        assert [v for _, _, v, _ in records(lg)] == [b"old", b"new", b"newest"]
        clean_in_process(lg, T0 + 7000)
        assert [v for _, _, v, _ in records(lg)] == [b"new", b"newest"]
    finally:
        lg.close()


def test_group_segments_by_size() -> None:
    def seg(base: int, size: int, index: int = 8) -> SegmentInfo:
        return SegmentInfo(base, base + 10, size, index, 12, 0)

    segs = [seg(0, 300), seg(10, 300), seg(20, 300), seg(30, 0), seg(40, 900), seg(50, 10)]
    groups = group_segments_by_size(segs, 1000, 4096, 60)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10, 20, 30], [40, 50]]
    # index bytes bound a group too
    groups = group_segments_by_size([seg(0, 1, 16), seg(10, 1, 16), seg(20, 1, 16)], 1000, 40, 30)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20]]
    # and offsets: a group spans at most 2**31 - 1 offsets
    far = [SegmentInfo(0, 2**31, 1, 8, 12, 0), SegmentInfo(2**31, 2**31 + 5, 1, 8, 12, 0)]
    assert len(group_segments_by_size(far, 1000, 4096, 2**31 + 5)) == 2


def test_a_swap_interrupted_at_each_step_loads_to_one_consistent_log(tmp_path: Path) -> None:
    """Write a cleaned segment, stop at each step of the swap as a crash would, and load."""
    rng = random.Random(5)

    def build(d: Path) -> tuple[Log, list[tuple[int, bytes | None, bytes | None, int]]]:
        lg = Log.open(d, LogConfig(cleanup_policy=("compact",), segment_bytes=400), now=Clock())
        for i in range(30):
            lg.append_as_leader(keyed_batch([(b"k%d" % rng.randrange(5), b"v%d" % i)], ts=T0 + i), 0)
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        return lg, records(lg)

    for step in ("cleaned", "swap", "old-deleted"):
        d = tmp_path / step / "t-0"
        lg, before = build(d)
        latest = {k: (o, v) for o, k, v, _ in before}
        dirty, uncleanable, _ = cleanable_offsets(lg, None, T0)
        job = make_clean_job(log_to_clean(("t", 0), lg, dirty, uncleanable, False), CleanerConfig(), T0)
        result_groups: list[object] = []
        with pytest.raises(Exception, match="stopped"):
            clean(job, lambda g, out=result_groups: out.append(g) is not None)
        g = result_groups[0]
        names = sorted(p.name for p in d.iterdir())
        assert any(n.endswith(".log" + CLEANED_FILE_SUFFIX) for n in names)
        if step in ("swap", "old-deleted"):
            for p in d.glob("*" + CLEANED_FILE_SUFFIX):
                p.rename(p.with_name(p.name[: -len(CLEANED_FILE_SUFFIX)] + SWAP_FILE_SUFFIX))
        if step == "old-deleted":
            for seg in lg.segments:
                if seg.base_offset in g.replaces:  # type: ignore[attr-defined]
                    seg.rename_to_deleted()
        for seg in lg.segments:
            seg.close_handlers()
        lg = Log.open(d, LogConfig(cleanup_policy=("compact",), segment_bytes=400), now=Clock())
        try:
            after = records(lg)
            assert not [p for p in d.iterdir() if p.name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX))]
            if step == "cleaned":
                assert after == before  # the cleaning is as if it never happened
            else:
                # the swap completed: the first group cleaned, every key's latest value kept
                assert {k: (o, v) for o, k, v, _ in after} == latest
                assert len(after) < len(before)
            offsets = [o for o, *_ in after]
            assert offsets == sorted(set(offsets))
        finally:
            lg.close()


def test_a_reader_holding_a_slice_of_a_replaced_segment_keeps_reading_it(tmp_path: Path) -> None:
    """The replaced segments are renamed `.deleted` and kept open until file.delete.delay.ms
    has passed: a fetch response built from a slice taken before the swap stays valid."""
    clock = Clock()
    lg = Log.open(tmp_path / "t-0", LogConfig(cleanup_policy=("compact",), segment_bytes=600, file_delete_delay_ms=60_000), now=clock)
    try:
        for i in range(12):
            lg.append_as_leader(keyed_batch([(b"k%d" % (i % 2), b"v%d" % i)], ts=T0 + i), 0)
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        info = lg.read(0, 1 << 20, lg.high_watermark)
        before = info.records.read()
        clean_in_process(lg, T0)
        assert any(p.name.endswith(".log.deleted") for p in (tmp_path / "t-0").iterdir())
        assert info.records.read() == before  # the old bytes, from the renamed file
        assert records(lg) != [] and len(records(lg)) < 12
        clock.advance(60_001)
        assert lg.delete_expired_files(clock()) >= 1
        assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
    finally:
        lg.close()


def test_aborted_transactions_go_and_markers_stay_until_their_horizon(tmp_path: Path) -> None:
    """Kafka's CleanedTransactionMetadata: records of an aborted transaction are removed (and
    never count as a key's latest value), its ABORT marker stays while a batch of it is still
    in the log, then gets a delete horizon, then goes; a committed transaction's records are
    compacted like any other."""
    from protocol.records import build_control_batch
    from storage.log import AppendOrigin

    lg = compacted_log(tmp_path)
    try:
        lg.append_as_leader(keyed_batch([(b"a", b"plain-1")]), 0, T0)  # 0
        # pid 5: a transaction writing a=aborted, b=aborted at 1-2, then aborted at 3
        lg.append_as_leader(keyed_batch([(b"a", b"aborted"), (b"b", b"aborted")], producer_id=5, producer_epoch=0,
                                        base_sequence=0, is_transactional=True), 0, T0)
        lg.append_as_leader(bytearray(build_control_batch(False, 0, 5, 0, timestamp=T0)), 0, T0, origin=AppendOrigin.COORDINATOR)
        # pid 6: a committed transaction writing c at 4, committed at 5
        lg.append_as_leader(keyed_batch([(b"c", b"committed")], producer_id=6, producer_epoch=0,
                                        base_sequence=0, is_transactional=True), 0, T0)
        lg.append_as_leader(bytearray(build_control_batch(True, 0, 6, 0, timestamp=T0)), 0, T0, origin=AppendOrigin.COORDINATOR)
        lg.append_as_leader(keyed_batch([(b"z", b"last")]), 0, T0)  # 6
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        assert lg.aborted_txns(0, 10) != []
        clean_in_process(lg, T0)
        data = [(o, k, v) for o, k, v, _ in records(lg)]
        # the aborted records are gone: key a keeps its plain value, b has none; c stays
        assert (0, b"a", b"plain-1") in data and (4, b"c", b"committed") in data
        assert not any(v == b"aborted" for _o, _k, v in data)
        hs = {h[0]: h for h in batch_headers(lg)}
        # pid 5 is still an active producer: its marker (its last entry) is kept
        assert 3 in hs and hs[3][5] & 0x20
    finally:
        lg.close()


def test_a_swap_removes_the_producer_snapshots_of_the_segments_it_replaces(tmp_path: Path) -> None:
    """Kafka's replaceSegments deletes the producer snapshots at the replaced segments' base
    offsets (the one at the new segment's base stays)."""
    lg = compacted_log(tmp_path, segment_bytes=300)
    try:
        for i in range(12):
            lg.append_as_leader(keyed_batch([(b"k", b"v%d" % i)], ts=T0 + i), 0)
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        d = tmp_path / "t-0"
        bases = [s.base_offset for s in lg.segments[:-1]]
        assert len(bases) >= 3
        before = {int(p.name[:20]) for p in d.glob("*.snapshot")}
        assert set(bases[1:]) <= before
        clean_in_process(lg, T0)
        # the first cleaning groups nothing (each segment is about a whole segment.bytes); a
        # second one merges the now small segments into one
        clean_in_process(lg, T0, checkpoint=0)
        remaining = [s.base_offset for s in lg.segments[:-1]]
        gone = set(bases) - set(remaining)
        assert gone, (bases, remaining)
        after = {int(p.name[:20]) for p in d.glob("*.snapshot")}
        assert not gone & after, f"snapshots of replaced segments left: {sorted(gone & after)}"
    finally:
        lg.close()
