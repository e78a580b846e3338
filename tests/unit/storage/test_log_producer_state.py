"""storage.log.Log with its producer state (Kafka's UnifiedLog + ProducerStateManager): duplicate
retries answered with the original offsets, sequence and epoch errors, snapshots at roll and
close, rebuilding after clean and unclean restarts, truncation, log start offset, LSO, expiry.

Oracles: Kafka's UnifiedLogTest / LogLoaderTest behaviour (duplicate answers, snapshot offsets
at roll and close, rebuild from the newest snapshot), real files under tmp_path, and crash images
taken by copying a live log directory (what a kill -9 leaves on disk)."""

from __future__ import annotations

import logging
import re
import resource
import shutil
import uuid
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, build_control_batch
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import AppendOrigin, Log, LogAppendInfo
from storage.log_manager import LogManager
from storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from tests.unit.storage.helpers import T0, Clock, client_batch, headers_of, log_bytes, offset_batch

PID = 1000
OTHER = 2000


def pbatch(
    seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, ts: int = T0, txn: bool = False
) -> bytearray:
    """A client batch of producer ``pid``: ``n`` records with sequences seq..seq+n-1, record i
    at timestamp ts + i (so the batch's max timestamp is ts + n - 1)."""
    recs = [Record(0, i, i, None, b"v%d" % (seq + i)) for i in range(n)]
    return bytearray(
        build_batch(
            recs,
            base_timestamp=ts,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=txn,
        )
    )


def open_log(d: Path, clock: Clock | None = None, **kw: object) -> Log:
    cfg = kw.pop("config", None) or LogConfig(file_delete_delay_ms=0)
    assert isinstance(cfg, LogConfig)
    return Log.open(d, cfg, now=clock or Clock(), **kw)  # type: ignore[arg-type]


def snapshot_names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".snapshot"))


def offsets(info: LogAppendInfo) -> tuple[int, int]:
    return info.first_offset, info.last_offset


def five_batches(log: Log) -> list[tuple[int, int]]:
    """Batches of 3 records, sequences 0, 3, ..., 12, timestamps T0 + 100 * i; their offsets."""
    return [
        offsets(log.append_as_leader(pbatch(3 * i, 3, ts=T0 + 100 * i), 0, T0)) for i in range(5)
    ]


# -- duplicates, gaps, epochs -------------------------------------------------------------------


def test_retry_of_each_of_the_last_five_batches_gets_the_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        log.append_as_leader(client_batch(2), 0, T0)  # no producer id: offsets 0-1
        originals = five_batches(log)
        assert originals == [(2, 4), (5, 7), (8, 10), (11, 13), (14, 16)]
        before = log_bytes(log)
        for i, original in enumerate(originals):
            info = log.append_as_leader(pbatch(3 * i, 3, ts=T0 + 100 * i), 0, T0)
            assert offsets(info) == original
            # Kafka answers a duplicate with the original batch's timestamp as log append time
            assert info.log_append_time == T0 + 100 * i + 2
            assert info.log_start_offset == 0
        assert log.log_end_offset == 17
        assert log_bytes(log) == before
        # the producer goes on where it was
        assert offsets(log.append_as_leader(pbatch(15), 0, T0)) == (17, 17)
    finally:
        log.close()


def test_retry_older_than_the_last_five_batches_is_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        for seq in range(6):
            log.append_as_leader(pbatch(seq), 0, T0)
        with pytest.raises(OutOfOrderSequenceError) as e:
            log.append_as_leader(pbatch(0), 0, T0)
        assert e.value.code == 45
        assert offsets(log.append_as_leader(pbatch(1), 0, T0)) == (1, 1)  # 5th-oldest: duplicate
        assert log.log_end_offset == 6
    finally:
        log.close()


def test_sequence_gap_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        log.append_as_leader(pbatch(0, 5), 0, T0)
        before = log_bytes(log)
        with pytest.raises(OutOfOrderSequenceError) as e:
            log.append_as_leader(pbatch(20), 0, T0)
        assert e.value.code == 45 and e.value.error_name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(2, 2), 0, T0)  # overlaps, not a retry of a whole batch
        assert log.log_end_offset == 5 and log_bytes(log) == before
        assert offsets(log.append_as_leader(pbatch(5), 0, T0)) == (5, 5)
        # a producer the log has never seen may start anywhere (KIP-360)
        assert offsets(log.append_as_leader(pbatch(42, pid=OTHER), 0, T0)) == (6, 6)
    finally:
        log.close()


def test_epoch_bump_restarts_at_zero_and_the_old_epoch_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        log.append_as_leader(pbatch(0, 5), 0, T0)
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(5, epoch=1), 0, T0)  # a new epoch starts at 0
        assert offsets(log.append_as_leader(pbatch(0, 2, epoch=1), 0, T0)) == (5, 6)
        for seq in (5, 0):  # neither the next batch nor a retry of the old epoch
            with pytest.raises(InvalidProducerEpochError) as e:
                log.append_as_leader(pbatch(seq, 5), 0, T0)
            assert e.value.code == 47
        assert offsets(log.append_as_leader(pbatch(0, 2, epoch=1), 0, T0)) == (5, 6)  # retry
        assert log.log_end_offset == 7
    finally:
        log.close()


def test_batches_without_producer_id_leave_the_producers_alone(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        log.append_as_leader(client_batch(3), 0, T0)
        log.append_as_leader(client_batch(3), 0, T0)
        assert not log.producer_state.active_producers
        assert log.producer_state.map_end_offset == log.log_end_offset == 6
        log.append_as_leader(pbatch(0), 0, T0)
        assert set(log.producer_state.active_producers) == {PID}
        assert log.producer_state.map_end_offset == 7
    finally:
        log.close()


def test_follower_appends_update_the_state_without_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        def replicated(base: int, seq: int, n: int = 1, epoch: int = 0) -> bytes:
            recs = [Record(0, i, i, None, b"r") for i in range(n)]
            return build_batch(
                recs, base_offset=base, base_timestamp=T0, producer_id=PID,
                producer_epoch=epoch, base_sequence=seq,
            )

        log.append_as_follower(replicated(0, 0, 2))
        log.append_as_follower(replicated(2, 10))  # a gap: the leader accepted it
        log.append_as_follower(replicated(3, 10))  # same sequence again: no duplicate check
        log.append_as_follower(offset_batch(4, 1))
        assert log.log_end_offset == 5
        # becoming leader: the replicated state answers a client retry (with the oldest
        # matching batch, as Kafka's batchWithSequenceRange)
        assert offsets(log.append_as_leader(pbatch(10), 0, T0)) == (2, 2)
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(12), 0, T0)
    finally:
        log.close()


# -- snapshots and restarts ---------------------------------------------------------------------


def test_clean_close_snapshots_at_the_log_end_and_reopen_needs_no_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    originals = five_batches(log)
    log.close()
    assert snapshot_names(d) == [f"{15:020d}.snapshot"]
    with caplog.at_level(logging.INFO, logger="odradek.storage.log"):
        log = open_log(d, recovery_point=15, clean_shutdown=True)
    try:
        assert "rebuilding producer state" not in caplog.text
        # a snapshot keeps the last batch of each producer (as Kafka's does)
        assert offsets(log.append_as_leader(pbatch(12, 3, ts=T0 + 400), 0, T0)) == originals[-1]
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(9, 3, ts=T0 + 300), 0, T0)
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(16), 0, T0)
        assert offsets(log.append_as_leader(pbatch(15), 0, T0)) == (15, 15)
    finally:
        log.close()
    assert snapshot_names(d) == [f"{15:020d}.snapshot", f"{16:020d}.snapshot"]


def test_unclean_reopen_without_snapshots_rebuilds_from_the_log(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append_as_leader(client_batch(1), 0, T0)
    log.append_as_leader(pbatch(0, pid=OTHER), 0, T0)
    originals = five_batches(log)
    log.close()
    for name in snapshot_names(d):
        (d / name).unlink()
    log = open_log(d, recovery_point=0, clean_shutdown=False)
    try:
        assert log.log_end_offset == 17
        for i, original in enumerate(originals):  # rebuilt from batches: all five are known
            assert offsets(log.append_as_leader(pbatch(3 * i, 3, ts=T0 + 100 * i), 0, T0)) == original
        assert offsets(log.append_as_leader(pbatch(0, pid=OTHER), 0, T0)) == (1, 1)
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(16), 0, T0)
        assert log.log_end_offset == 17
    finally:
        log.close()
    assert snapshot_names(d) == [f"{17:020d}.snapshot"]


def test_crash_image_with_roll_snapshots_is_rebuilt(tmp_path: Path) -> None:
    """kill -9: the directory as it is while the log is open (snapshots only from rolls), loaded
    unclean. The replay starts at the newest snapshot and only reads what follows it."""
    d = tmp_path / "t-0"
    log = open_log(d)
    try:
        for seq in range(4):
            log.append_as_leader(pbatch(seq), 0, T0)
        log.roll()
        for seq in range(4, 7):
            log.append_as_leader(pbatch(seq), 0, T0)
        log.append_as_leader(pbatch(0, 2, pid=OTHER), 0, T0)
        log.flush()
        assert snapshot_names(d) == [f"{4:020d}.snapshot"]
        image = tmp_path / "crash" / "t-0"
        shutil.copytree(d, image)
    finally:
        log.close()
    crashed = open_log(image, recovery_point=4, clean_shutdown=False)
    try:
        assert crashed.log_end_offset == 9
        for seq in range(4, 7):  # batches after the snapshot: replayed, all known
            assert offsets(crashed.append_as_leader(pbatch(seq), 0, T0)) == (seq, seq)
        with pytest.raises(OutOfOrderSequenceError):  # before the snapshot: beyond the last 5
            crashed.append_as_leader(pbatch(1), 0, T0)
        assert offsets(crashed.append_as_leader(pbatch(0, 2, pid=OTHER), 0, T0)) == (7, 8)
        assert offsets(crashed.append_as_leader(pbatch(7), 0, T0)) == (9, 9)
        # loading snapshotted the two last segment bases it replayed over and the log end
        assert f"{9:020d}.snapshot" in snapshot_names(image)
    finally:
        crashed.close()


def test_torn_tail_after_crash_forgets_the_lost_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append_as_leader(pbatch(0), 0, T0)
    log.append_as_leader(pbatch(1), 0, T0)
    log.close()
    seg = d / f"{0:020d}.log"
    seg.write_bytes(seg.read_bytes()[:-5])  # the second batch is torn
    log = open_log(d, recovery_point=0, clean_shutdown=False)
    try:
        assert log.log_end_offset == 1
        assert snapshot_names(d) == [f"{1:020d}.snapshot"]  # the one at 2 was past the end
        assert offsets(log.append_as_leader(pbatch(0), 0, T0)) == (0, 0)
        assert offsets(log.append_as_leader(pbatch(1), 0, T0)) == (1, 1)  # written again
        assert log.log_end_offset == 2
    finally:
        log.close()


def test_clean_reopen_without_any_snapshot_skips_the_scan(tmp_path: Path) -> None:
    """Kafka's upgrade shortcut: a cleanly shut down log with no snapshot at all was written
    before producer state was persisted; it is not scanned, and empty snapshots are written."""
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append_as_leader(pbatch(0, 3), 0, T0)
    log.close()
    (d / f"{3:020d}.snapshot").unlink()
    log = open_log(d, recovery_point=3, clean_shutdown=True)
    try:
        assert not log.producer_state.active_producers
        assert snapshot_names(d) == [f"{3:020d}.snapshot"]
        assert offsets(log.append_as_leader(pbatch(0, 3), 0, T0)) == (3, 5)  # not recognised
    finally:
        log.close()


def test_snapshots_at_roll_and_deleted_below_the_log_start_offset(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(pbatch(0))
    log = open_log(d, config=LogConfig(segment_bytes=3 * size, file_delete_delay_ms=0))
    try:
        for seq in range(10):  # three batches per segment: rolls at 3, 6, 9
            log.append_as_leader(pbatch(seq), 0, T0)
        assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
        assert snapshot_names(d) == [f"{o:020d}.snapshot" for o in (3, 6, 9)]
        assert all(re.fullmatch(r"\d{20}\.snapshot", n) for n in snapshot_names(d))
        log.update_high_watermark(log.log_end_offset)
        log.maybe_increment_log_start_offset(7)  # DeleteRecords
        assert snapshot_names(d) == [f"{o:020d}.snapshot" for o in (9,)]
        assert log.delete_old_segments() == 2
        assert [s.base_offset for s in log.segments] == [6, 9]
        assert log.log_start_offset == 7
        # the producer is still known (its data past the log start remains)
        assert offsets(log.append_as_leader(pbatch(9), 0, T0)) == (9, 9)
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        log.maybe_increment_log_start_offset(10)
        assert snapshot_names(d) == [f"{10:020d}.snapshot"]
    finally:
        log.close()


def test_truncate_to_forgets_the_producers_later_batches(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    try:
        for seq in range(3):
            log.append_as_leader(pbatch(seq), 0, T0)
        log.roll()
        for seq in range(3, 6):
            log.append_as_leader(pbatch(seq), 0, T0)
        log.append_as_leader(pbatch(0, pid=OTHER), 0, T0)
        log.roll()
        assert snapshot_names(d) == [f"{3:020d}.snapshot", f"{7:020d}.snapshot"]
        assert log.truncate_to(4)
        assert log.log_end_offset == 4
        assert snapshot_names(d) == [f"{3:020d}.snapshot", f"{4:020d}.snapshot"]
        assert offsets(log.append_as_leader(pbatch(3), 0, T0)) == (3, 3)  # kept: a duplicate
        assert offsets(log.append_as_leader(pbatch(4), 0, T0)) == (4, 4)  # truncated: new
        assert offsets(log.append_as_leader(pbatch(0, pid=OTHER), 0, T0)) == (5, 5)
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(6), 0, T0)  # seq 5 was truncated away
        log.truncate_fully_and_start_at(20)
        assert not log.producer_state.active_producers and snapshot_names(d) == []
        assert offsets(log.append_as_leader(pbatch(4), 0, T0)) == (20, 20)
    finally:
        log.close()


# -- transactions and the last stable offset ------------------------------------------------------


def test_last_stable_offset_follows_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        log.append_as_leader(client_batch(2), 0, T0)
        log.update_high_watermark(log.log_end_offset)
        assert log.last_stable_offset == log.high_watermark == 2 and log.first_unstable_offset is None
        log.append_as_leader(pbatch(0, 2, txn=True), 0, T0)  # offsets 2-3, transaction open
        log.append_as_leader(client_batch(1), 0, T0)  # offset 4
        assert log.first_unstable_offset == 2
        assert log.last_stable_offset == 2  # the HW is still 2
        log.update_high_watermark(log.log_end_offset)
        assert log.last_stable_offset == 2
        marker = bytearray(build_control_batch(False, 0, PID, 0, timestamp=T0))  # ABORT
        info = log.append_as_leader(marker, 0, T0, origin=AppendOrigin.COORDINATOR)
        assert offsets(info) == (5, 5)
        assert log.collect_aborted_transactions(0, 10) == [(PID, 2)]
        assert log.last_stable_offset == 2  # the marker is not below the HW yet
        log.update_high_watermark(log.log_end_offset)
        assert log.first_unstable_offset is None
        assert log.last_stable_offset == log.high_watermark == 6
    finally:
        log.close()


def open_transaction(d: Path) -> Log:
    """A log with offset 0 from a plain producer and a transaction of PID open at 1-2."""
    log = open_log(d)
    log.append_as_leader(client_batch(1), 0, T0)
    log.append_as_leader(pbatch(0, 2, txn=True), 0, T0)
    log.update_high_watermark(log.log_end_offset)
    return log


def assert_marker_not_appended(log: Log, before: bytes) -> None:
    assert log.log_end_offset == 3 and log_bytes(log) == before
    assert log.first_unstable_offset == 1  # the transaction is still open
    assert [t.first_offset for t in log.producer_state.ongoing_transactions()] == [1]
    assert log.collect_aborted_transactions(0, 10) == []


def assert_marker_appended_once(log: Log) -> None:
    marker = bytearray(build_control_batch(False, 0, PID, 0, timestamp=T0))  # ABORT
    assert offsets(log.append_as_leader(marker, 0, T0, origin=AppendOrigin.COORDINATOR)) == (3, 3)
    assert log.collect_aborted_transactions(0, 10) == [(PID, 1)]
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset is None and log.last_stable_offset == 4
    assert [h[1:] for h in headers_of(log_bytes(log))] == [(0, 0), (1, 2), (3, 3)]


def test_abort_marker_whose_txn_index_cannot_be_written_is_not_appended(tmp_path: Path) -> None:
    """The .txnindex write of an ABORT marker fails (its path is a directory: EISDIR): the append
    raises KAFKA_STORAGE_ERROR and leaves nothing -- no marker in the segment, the log end offset,
    the open transaction and the transaction index as they were -- so the coordinator's retry
    appends it once, at the same offset. Before, the marker was written and the log end offset
    moved before the index write raised an OSError (a closed connection, and a retry wrote a
    second marker)."""
    d = tmp_path / "t-0"
    log = open_transaction(d)
    try:
        before = log_bytes(log)
        txn_index = log.active_segment.txn_index_path
        txn_index.mkdir()
        marker = bytearray(build_control_batch(False, 0, PID, 0, timestamp=T0))
        with pytest.raises(StorageError) as e:
            log.append_as_leader(marker, 0, T0, origin=AppendOrigin.COORDINATOR)
        assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert_marker_not_appended(log, before)
        txn_index.rmdir()
        assert_marker_appended_once(log)
    finally:
        log.close()


def test_abort_marker_whose_segment_write_fails_takes_back_its_txn_index_entry(tmp_path: Path) -> None:
    """The marker's .txnindex entry is written, then the .log cannot grow (RLIMIT_FSIZE: the
    write is cut short, EFBIG): the entry is taken back with the batch, so a retry indexes the
    transaction once."""
    d = tmp_path / "t-0"
    log = open_transaction(d)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        before = log_bytes(log)
        marker = bytearray(build_control_batch(False, 0, PID, 0, timestamp=T0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + len(marker) // 2, hard))
        try:
            with pytest.raises(StorageError):
                log.append_as_leader(marker, 0, T0, origin=AppendOrigin.COORDINATOR)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        assert_marker_not_appended(log, before)
        assert log.active_segment.txn_index_path.stat().st_size == 0  # written, then taken back
        assert_marker_appended_once(log)
    finally:
        log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_open_transaction_survives_restart(tmp_path: Path, clean: bool) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append_as_leader(client_batch(1), 0, T0)
    log.append_as_leader(pbatch(0, 2, txn=True), 0, T0)
    log.close()
    if not clean:  # rebuilt from the log
        for name in snapshot_names(d):
            (d / name).unlink()
    log = open_log(d, recovery_point=0, clean_shutdown=clean, high_watermark=3)
    try:
        assert log.first_unstable_offset == 1 and log.last_stable_offset == 1
        assert [t.first_offset for t in log.producer_state.ongoing_transactions()] == [1]
    finally:
        log.close()


# -- expiry ------------------------------------------------------------------------------------------


def test_expired_producers_are_forgotten(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    try:
        log.append_as_leader(pbatch(0, ts=T0), 0, T0)
        log.remove_expired_producers(T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS - 1)
        assert offsets(log.append_as_leader(pbatch(0, ts=T0), 0, T0)) == (0, 0)
        clock.ms = T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS
        log.remove_expired_producers()
        assert not log.producer_state.active_producers
        # no longer recognised: the retry is written again
        assert offsets(log.append_as_leader(pbatch(0, ts=T0), 0, T0)) == (1, 1)
    finally:
        log.close()


def test_log_manager_cleanup_expires_producers_and_shutdown_snapshots(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    config = KafkaConfig({"log.dirs": str(d), "broker.id": "0", "producer.id.expiration.ms": "1000"})
    lm = LogManager.open(config)
    lg = lm.get_or_create_log("idem", 0, LogConfig(), uuid.UUID(int=1))
    lg.append_as_leader(pbatch(0, ts=T0), 0, T0)
    lg.append_as_leader(pbatch(0, ts=T0, pid=OTHER), 0, T0)
    lm.cleanup_logs(T0 + 999)
    assert set(lg.producer_state.active_producers) == {PID, OTHER}
    lg.append_as_leader(pbatch(1, ts=T0 + 500), 0, T0)
    lm.cleanup_logs(T0 + 1000)
    assert set(lg.producer_state.active_producers) == {PID}
    lm.shutdown()
    assert snapshot_names(d / "idem-0") == [f"{3:020d}.snapshot"]
    lm = LogManager.open(config)
    try:
        lg = lm.get_log("idem", 0)
        assert lg is not None
        assert set(lg.producer_state.active_producers) == set()  # loading drops expired ones too
    finally:
        lm.shutdown()
