"""storage.producer_state: idempotence/transaction rules and the producer snapshot format.

Oracles: Kafka's ProducerStateManagerTest cases (storage/src/test/java/org/apache/kafka/storage/
internals/log; names kept), the snapshot layout of ProducerStateManager.PID_SNAPSHOT_MAP_SCHEMA
written out by hand below, and real batches built with protocol.records.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import records as R
from protocol.records import Record
from storage import producer_state as P
from storage.producer_state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    CorruptSnapshotError,
    EndTransactionMarker,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerBatch,
    ProducerStateEntry,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
)
from storage.txn_index import AbortedTxn

PID = 1
EPOCH = 0
NOW = 1_700_000_000_000
INT32_MAX = 2**31 - 1
ABORT, COMMIT = R.CONTROL_ABORT, R.CONTROL_COMMIT


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(
        tmp_path, topic_partition="test-0", max_transaction_timeout_ms=300_000
    )


def reopen(psm):
    return ProducerStateManager(
        psm.log_dir, topic_partition="test-0", max_transaction_timeout_ms=300_000
    )


def append_entry(psm, pid, epoch, seq, offset, ts=NOW, origin=AppendOrigin.CLIENT, txn=False):
    """Kafka test helper appendEntry: one single-record batch at ``offset``."""
    info = psm.prepare_update(pid, origin)
    info.append_data_batch(epoch, seq, seq, ts, offset, offset, txn)
    psm.update(info)
    psm.update_map_end_offset(offset + 1)


def append_client(psm, pid, epoch, seq, offset, ts=NOW, txn=False):
    append_entry(psm, pid, epoch, seq, offset, ts, AppendOrigin.CLIENT, txn)


def append_replication(psm, epoch, seq, offset, ts=NOW):
    append_entry(psm, PID, epoch, seq, offset, ts, AppendOrigin.REPLICATION, False)


def append_marker(psm, pid, epoch, ctype, offset, coordinator_epoch=0, ts=NOW):
    info = psm.prepare_update(pid, AppendOrigin.COORDINATOR)
    done = info.append_end_txn_marker(
        EndTransactionMarker(ctype, coordinator_epoch), epoch, offset, ts
    )
    psm.update(info)
    if done is not None:
        psm.complete_txn(done)
    psm.update_map_end_offset(offset + 1)
    return done


def last(psm, pid=PID):
    entry = psm.last_entry(pid)
    assert entry is not None
    return entry


def batch(pid, epoch, seq, offset, count=1, *, txn=False, ts=NOW):
    return ProducerBatch(
        pid,
        epoch,
        seq,
        P.increment_sequence(seq, count - 1),
        offset,
        offset + count - 1,
        ts,
        txn,
        False,
        count,
    )


# ---------------------------------------------------------------------------------------------
# error values


def test_errors_carry_kafka_codes_and_names():
    expected = {
        P.OutOfOrderSequenceError: (45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        P.DuplicateSequenceError: (46, "DUPLICATE_SEQUENCE_NUMBER"),
        P.InvalidProducerEpochError: (47, "INVALID_PRODUCER_EPOCH"),
        P.InvalidTxnStateError: (48, "INVALID_TXN_STATE"),
        P.TransactionCoordinatorFencedError: (52, "TRANSACTION_COORDINATOR_FENCED"),
        P.UnknownProducerIdError: (59, "UNKNOWN_PRODUCER_ID"),
        P.ProducerFencedError: (90, "PRODUCER_FENCED"),
    }
    for cls, (code, name) in expected.items():
        err = cls("details")
        assert (err.code, err.error_name, err.message) == (code, name, "details")
        assert cls.CODE == code
        assert isinstance(err, P.ProducerStateError)
        assert name in str(err)
        assert cls().message  # Kafka's default message


def test_sequence_arithmetic_wraps_at_int_max():
    assert P.increment_sequence(INT32_MAX, 1) == 0
    assert P.increment_sequence(INT32_MAX - 2, 5) == 2
    assert P.increment_sequence(5, 3) == 8
    assert P.decrement_sequence(0, 1) == INT32_MAX
    assert P.decrement_sequence(2, 5) == INT32_MAX - 2
    assert P.decrement_sequence(9, 4) == 5
    assert BatchMetadata(9, 2020, 20, 0).first_seq == INT32_MAX - 10
    assert BatchMetadata(9, 2020, 20, 0).first_offset == 2000


# ---------------------------------------------------------------------------------------------
# Kafka's ProducerStateManagerTest


def test_basic_id_mapping(psm):
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    # duplicates are checked separately and fail the sequence check if appended
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, EPOCH, 1, 1)
    # a gap
    with pytest.raises(OutOfOrderSequenceError) as info:
        append_client(psm, PID, EPOCH, 5, 2)
    assert info.value.code == 45
    # epoch bump resets the sequence to 0
    append_client(psm, PID, EPOCH + 1, 0, 3)
    # stale epoch
    with pytest.raises(InvalidProducerEpochError) as info:
        append_client(psm, PID, EPOCH, 0, 4)
    assert info.value.code == 47


def test_append_txn_marker_with_no_producer_state(psm):
    append_marker(psm, PID, 2, COMMIT, 27)
    entry = last(psm)
    assert (entry.producer_epoch, entry.producer_id, entry.last_seq) == (2, PID, -1)
    with pytest.raises(InvalidProducerEpochError):
        append_client(psm, PID, 0, 0, 4)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, 2, 17, 4)
    append_client(psm, PID, 2, 0, 39)
    assert (last(psm).producer_epoch, last(psm).last_seq) == (2, 0)


def test_producer_sequence_wrap_around(psm):
    append_replication(psm, 15, INT32_MAX, 735)
    append_client(psm, PID, 15, 0, 735 + 500)
    entry = last(psm)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (15, INT32_MAX, 0)


def test_producer_sequence_with_wrap_around_batch_record(psm):
    info = psm.prepare_update(PID, AppendOrigin.REPLICATION)
    info.append_data_batch(15, INT32_MAX - 10, 9, NOW, 2000, 2020, False)
    assert psm.last_entry(PID) is None
    psm.update(info)
    entry = last(psm)
    assert (entry.first_seq, entry.last_seq) == (INT32_MAX - 10, 9)
    assert (entry.first_data_offset, entry.last_data_offset) == (2000, 2020)


def test_producer_sequence_invalid_wrap_around(psm):
    append_replication(psm, 15, INT32_MAX, 735)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, 15, 1, 735 + 500)


def test_no_validation_on_first_entry_when_loading_log(psm):
    append_replication(psm, 5, 16, 735)
    entry = last(psm)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (5, 16, 16)
    assert (entry.first_data_offset, entry.last_data_offset) == (735, 735)


def test_control_record_bumps_producer_epoch(psm):
    append_client(psm, PID, EPOCH, 0, 0)
    append_marker(psm, PID, 1, ABORT, 1)
    entry = last(psm)
    assert entry.producer_epoch == 1
    assert entry.current_txn_first_offset is None
    assert (entry.first_seq, entry.last_seq) == (-1, -1)
    append_client(psm, PID, 1, 0, 2)
    assert last(psm).first_seq == 0


def test_txn_first_offset_cached(psm):
    info = psm.prepare_update(PID, AppendOrigin.CLIENT)
    info.append_data_batch(EPOCH, 0, 0, NOW, 992342, 992342, True)
    psm.update(info)
    assert psm.first_unstable_offset() == 992342


def test_has_late_transaction(psm):
    late = 300_000 + P.LATE_TRANSACTION_BUFFER_MS
    t = NOW
    append_client(psm, 39, 2, 0, 100, ts=t, txn=True)
    assert not psm.has_late_transaction(t)
    t += 500
    append_client(psm, 57, 9, 0, 150, ts=t, txn=True)
    assert not psm.has_late_transaction(t)
    t += late - 500 + 1
    assert psm.has_late_transaction(t)
    t += 500
    assert psm.has_late_transaction(t)
    append_marker(psm, 39, 2, COMMIT, 200, ts=t)
    assert psm.has_late_transaction(t)  # the second transaction is still late
    append_marker(psm, 57, 9, COMMIT, 250, ts=t)
    assert not psm.has_late_transaction(t)


def test_has_late_transaction_initialized_after_reload(psm):
    late = 300_000 + P.LATE_TRANSACTION_BUFFER_MS
    append_client(psm, 39, 2, 0, 100, ts=NOW, txn=True)
    append_client(psm, 57, 9, 0, 150, ts=NOW + 500, txn=True)
    psm.take_snapshot()
    t = NOW + late + 1
    assert psm.has_late_transaction(t)
    reloaded = reopen(psm)
    reloaded.truncate_and_reload(0, psm.map_end_offset, t)
    assert reloaded.has_late_transaction(t)


def test_has_late_transaction_updated_after_partial_and_full_truncation(psm):
    late = 300_000 + P.LATE_TRANSACTION_BUFFER_MS
    append_client(psm, 39, 2, 0, 100, ts=NOW, txn=True)
    assert psm.has_late_transaction(NOW + late + 1)
    psm.truncate_and_reload(0, 80, NOW + late + 1)
    assert not psm.has_late_transaction(NOW + late + 1)
    append_client(psm, 39, 2, 0, 100, ts=NOW, txn=True)
    assert psm.has_late_transaction(NOW + late + 1)
    psm.truncate_fully_and_start_at(150)
    assert not psm.has_late_transaction(NOW + late + 1)


def test_prepare_update_does_not_mutate(psm):
    info = psm.prepare_update(PID, AppendOrigin.CLIENT)
    info.append_data_batch(EPOCH, 0, 5, NOW, 15, 20, False)
    assert psm.last_entry(PID) is None
    psm.update(info)
    nxt = psm.prepare_update(PID, AppendOrigin.CLIENT)
    nxt.append_data_batch(EPOCH, 6, 10, NOW, 26, 30, False)
    entry = last(psm)
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (0, 5, 20)
    psm.update(nxt)
    entry = last(psm)
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (0, 10, 30)


def test_update_producer_transaction_state(psm):
    append_client(psm, PID, EPOCH, 0, 9)
    info = psm.prepare_update(PID, AppendOrigin.CLIENT)
    info.append_data_batch(EPOCH, 1, 5, NOW, 16, 20, True)
    e = info.to_entry()
    assert (e.first_seq, e.last_seq, e.first_data_offset, e.last_data_offset) == (1, 5, 16, 20)
    assert e.current_txn_first_offset == 16
    info.append_data_batch(EPOCH, 6, 10, NOW, 26, 30, True)
    e = info.to_entry()
    assert (e.first_seq, e.last_seq, e.first_data_offset, e.last_data_offset) == (1, 10, 16, 30)
    assert [(t.producer_id, t.first_offset) for t in info.started_transactions] == [(PID, 16)]
    done = info.append_end_txn_marker(EndTransactionMarker(COMMIT, 15), EPOCH, 40, NOW)
    assert done == CompletedTxn(PID, 16, 40, False)
    e = info.to_entry()
    # the marker does not change the cached batches
    assert (e.first_seq, e.last_seq, e.first_data_offset, e.last_data_offset) == (1, 10, 16, 30)
    assert e.current_txn_first_offset is None
    assert e.coordinator_epoch == 15


def test_out_of_sequence_after_control_record_epoch_bump(psm):
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_client(psm, PID, EPOCH, 1, 1, txn=True)
    append_marker(psm, PID, 1, ABORT, 1)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, 1, 2, 2, txn=True)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, 2, 2, 2, txn=True)
    append_client(psm, PID, 1, 0, 0, txn=True)
    assert (last(psm).producer_epoch, last(psm).last_seq) == (1, 0)


def test_non_transactional_append_with_ongoing_transaction(psm):
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    with pytest.raises(InvalidTxnStateError) as info:
        append_client(psm, PID, EPOCH, 1, 1, txn=False)
    assert info.value.code == 48


def test_truncate_and_reload_removes_out_of_range_snapshots(psm):
    for seq in range(5):
        append_client(psm, PID, EPOCH, seq, seq)
        psm.take_snapshot()
    psm.truncate_and_reload(1, 3, NOW)
    assert psm.oldest_snapshot_offset == 2
    assert psm.latest_snapshot_offset == 3


def test_take_snapshot(psm, tmp_path):
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    path = psm.take_snapshot()
    assert path == tmp_path / "00000000000000000002.snapshot"
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000002.snapshot"]
    assert path.stat().st_size == 6 + 4 + 46


def test_fetch_snapshot_empty_snapshot(psm):
    assert psm.fetch_snapshot(1) is None


def test_recover_from_snapshot_unfinished_transaction(psm):
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_client(psm, PID, EPOCH, 1, 1, txn=True)
    psm.take_snapshot()
    rec = reopen(psm)
    rec.truncate_and_reload(0, 3, NOW)
    entry = last(rec)  # the snapshot only persists the last batch
    assert (entry.first_data_offset, entry.first_seq, entry.last_data_offset, entry.last_seq) == (
        1,
        1,
        1,
        1,
    )
    assert entry.current_txn_first_offset == 0
    assert rec.first_undecided_offset() == 0
    append_client(rec, PID, EPOCH, 2, 2, txn=True)


def test_recover_from_snapshot_finished_transaction(psm):
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_client(psm, PID, EPOCH, 1, 1, txn=True)
    append_marker(psm, PID, EPOCH, ABORT, 2)
    psm.take_snapshot()
    rec = reopen(psm)
    rec.truncate_and_reload(0, 3, NOW)
    entry = last(rec)
    assert (entry.first_data_offset, entry.first_seq, entry.last_data_offset, entry.last_seq) == (
        1,
        1,
        1,
        1,
    )
    assert entry.current_txn_first_offset is None


def test_recover_from_snapshot_empty_transaction(psm):
    append_marker(psm, PID, EPOCH, ABORT, 0, ts=NOW - 5)
    psm.take_snapshot()
    rec = reopen(psm)
    rec.truncate_and_reload(0, 1, NOW)
    entry = last(rec)
    assert entry.last_timestamp == NOW - 5
    assert entry.current_txn_first_offset is None


def test_producer_state_after_fencing_abort_marker(psm):
    append_client(psm, PID, EPOCH, 0, 0, txn=True)
    append_marker(psm, PID, EPOCH + 1, ABORT, 1)
    entry = last(psm)
    assert entry.current_txn_first_offset is None
    assert (entry.last_data_offset, entry.first_data_offset) == (-1, -1)
    psm.remove_expired_producers(NOW)  # fencing epochs are preserved
    assert psm.last_entry(PID) is not None


def test_remove_expired_pids_on_reload(psm):
    append_client(psm, PID, EPOCH, 0, 0, ts=0)
    append_client(psm, PID, EPOCH, 1, 1, ts=1)
    psm.take_snapshot()
    rec = reopen(psm)
    rec.producer_id_expiration_ms = 60_000
    rec.truncate_and_reload(0, 1, 70_000)
    assert rec.active_producers == {}
    # the producer expired, so any sequence is accepted and it comes back
    append_client(rec, PID, EPOCH, 2, 2, ts=70_001)
    assert len(rec.active_producers) == 1
    assert rec.active_producers[PID].last_seq == 2
    assert rec.map_end_offset == 3


def test_expired_producers_are_not_loaded_from_a_snapshot(psm):
    append_client(psm, 1, EPOCH, 0, 0, ts=0)
    append_client(psm, 2, EPOCH, 0, 1, ts=65_000)
    psm.take_snapshot()
    rec = reopen(psm)
    rec.producer_id_expiration_ms = 60_000
    rec.truncate_and_reload(0, 2, 70_000)
    assert rec.snapshot_offsets == [2]
    assert set(rec.active_producers) == {2}


def test_accept_append_without_producer_state_on_replica(psm):
    append_client(psm, PID, EPOCH, 0, 0, ts=0)
    append_client(psm, PID, EPOCH, 1, 1, ts=1)
    psm.take_snapshot()
    rec = reopen(psm)
    rec.producer_id_expiration_ms = 60_000
    rec.truncate_and_reload(0, 1, 70_000)
    assert PID not in rec.active_producers
    append_replication(rec, EPOCH, 2, 2, 70_001)
    entry = rec.active_producers[PID]
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (EPOCH, 2, 2)


def test_accept_append_with_sequence_gaps_on_replica(psm):
    append_client(psm, PID, EPOCH, 0, 0, ts=0)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(psm, PID, EPOCH, 3, 1, ts=1)
    assert psm.active_producers[PID].last_seq == 0
    append_replication(psm, EPOCH, 3, 1, 1)
    assert psm.active_producers[PID].last_seq == 3


def test_delete_snapshots_before(psm, tmp_path):
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 2, 2)
    psm.take_snapshot()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000002.snapshot",
        "00000000000000000003.snapshot",
    ]
    psm.delete_snapshots_before(3)
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000003.snapshot"]
    psm.delete_snapshots_before(4)
    assert list(tmp_path.iterdir()) == []
    assert psm.snapshot_offsets == []


def test_truncate_fully_and_start_at(psm, tmp_path):
    append_client(psm, PID, EPOCH, 0, 0)
    append_client(psm, PID, EPOCH, 1, 1)
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 2, 2)
    psm.take_snapshot()
    psm.truncate_fully_and_start_at(0)
    assert list(tmp_path.iterdir()) == []
    assert psm.active_producers == {}
    append_client(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    assert psm.snapshot_offsets == [1]


def test_reload_snapshots(psm, tmp_path):
    append_client(psm, PID, EPOCH, 1, 1)
    append_client(psm, PID, EPOCH, 2, 2)
    psm.take_snapshot()
    saved = {p: p.read_bytes() for p in tmp_path.iterdir()}
    append_client(psm, PID, EPOCH, 3, 3)
    append_client(psm, PID, EPOCH, 4, 4)
    psm.take_snapshot()
    assert psm.snapshot_offsets == [3, 5]
    psm.truncate_and_reload(3, 5, NOW)
    assert psm.snapshot_offsets == [5]
    for p, data in saved.items():
        p.write_bytes(data)
    psm.truncate_fully_and_reload_snapshots()
    assert psm.latest_snapshot_offset == 3
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000003.snapshot"]


def test_first_unstable_offset_after_truncation(psm):
    append_client(psm, PID, EPOCH, 0, 99, txn=True)
    assert psm.first_unstable_offset() == 99
    psm.take_snapshot()
    append_marker(psm, PID, EPOCH, COMMIT, 105)
    psm.on_high_watermark_updated(106)
    assert psm.first_unstable_offset() is None
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 1, 106)
    psm.truncate_and_reload(0, 106, NOW)
    assert psm.first_unstable_offset() is None
    psm.truncate_and_reload(0, 100, NOW)
    assert psm.first_unstable_offset() == 99


def test_load_from_snapshot_retains_non_expired_producers(psm):
    append_client(psm, 1, EPOCH, 0, 0)
    append_client(psm, 2, EPOCH, 0, 1)
    psm.take_snapshot()
    assert len(psm.active_producers) == 2
    psm.truncate_and_reload(1, 2, NOW)
    assert len(psm.active_producers) == 2
    assert (last(psm, 1).last_seq, last(psm, 1).last_data_offset) == (0, 0)
    assert (last(psm, 2).last_seq, last(psm, 2).last_data_offset) == (0, 1)


def test_skip_snapshot_if_offset_unchanged(psm, tmp_path):
    append_client(psm, PID, EPOCH, 0, 0)
    assert psm.take_snapshot() is not None
    assert psm.take_snapshot() is None
    assert psm.snapshot_offsets == [1]
    assert len(list(tmp_path.iterdir())) == 1


def test_remove_expired_producers_with_explicit_timeout(psm):
    append_client(psm, 1, EPOCH, 0, 0, ts=NOW)
    append_client(psm, 2, EPOCH, 0, 1, ts=NOW + 10)
    psm.remove_expired_producers(NOW + 15, 10)
    assert set(psm.active_producers) == {2}
    psm.remove_expired_producers(NOW + 15)  # default: producer.id.expiration.ms = 1 day
    assert set(psm.active_producers) == {2}
    assert psm.producer_id_expiration_ms == 86_400_000


def test_pid_expiration_timeout(psm):
    append_client(psm, PID, 5, 0, 1, ts=NOW)
    psm.remove_expired_producers(NOW + P.DEFAULT_PRODUCER_ID_EXPIRATION_MS + 1)
    assert psm.active_producers == {}
    append_client(psm, PID, 5, 1, 2, ts=NOW)
    assert len(psm.active_producers) == 1
    assert psm.active_producers[PID].last_seq == 1
    assert psm.map_end_offset == 3


def test_first_unstable_offset(psm):
    assert psm.first_undecided_offset() is None
    append_client(psm, PID, 5, 0, 99, txn=True)
    assert psm.first_undecided_offset() == 99
    assert psm.first_unstable_offset() == 99
    append_client(psm, 2, 5, 0, 105, txn=True)
    assert psm.first_undecided_offset() == 99
    assert psm.first_unstable_offset() == 99
    append_marker(psm, PID, 5, COMMIT, 109)
    assert psm.first_undecided_offset() == 105
    assert psm.first_unstable_offset() == 99
    psm.on_high_watermark_updated(100)
    assert psm.first_unstable_offset() == 99
    psm.on_high_watermark_updated(110)
    assert psm.first_unstable_offset() == 105
    append_marker(psm, 2, 5, ABORT, 112)
    assert psm.first_undecided_offset() is None
    assert psm.first_unstable_offset() == 105
    psm.on_high_watermark_updated(113)
    assert psm.first_unstable_offset() is None


def test_producers_with_ongoing_transactions_dont_expire(psm):
    append_client(psm, PID, 5, 0, 99, ts=NOW, txn=True)
    psm.remove_expired_producers(NOW + P.DEFAULT_PRODUCER_ID_EXPIRATION_MS + 1)
    assert psm.last_entry(PID) is not None
    assert psm.first_undecided_offset() == 99


def test_sequence_not_validated_for_coordinator_origin(psm):
    append_entry(psm, PID, EPOCH, -1, 99, origin=AppendOrigin.COORDINATOR, txn=True)
    append_entry(psm, PID, EPOCH, -1, 100, origin=AppendOrigin.COORDINATOR, txn=True)
    with pytest.raises(InvalidProducerEpochError):  # the epoch still is
        append_entry(psm, PID, EPOCH - 1, -1, 101, origin=AppendOrigin.COORDINATOR, txn=True)


def test_old_epoch_for_control_record(psm):
    append_client(psm, PID, 5, 0, 99, txn=True)
    with pytest.raises(InvalidProducerEpochError):
        append_marker(psm, PID, 3, COMMIT, 100)


def test_coordinator_fencing(psm):
    append_client(psm, PID, 5, 0, 99, txn=True)
    append_marker(psm, PID, 5, COMMIT, 100, coordinator_epoch=1)
    assert last(psm).coordinator_epoch == 1
    append_marker(psm, PID, 5, COMMIT, 101, coordinator_epoch=1)
    append_marker(psm, PID, 5, COMMIT, 102, coordinator_epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError) as info:
        append_marker(psm, PID, 5, COMMIT, 103, coordinator_epoch=1)
    assert info.value.code == 52


def test_coordinator_fenced_after_reload(psm):
    append_client(psm, PID, EPOCH, 0, 99, txn=True)
    append_marker(psm, PID, EPOCH, COMMIT, 100, coordinator_epoch=1)
    psm.take_snapshot()
    rec = reopen(psm)
    rec.truncate_and_reload(0, 101, NOW)  # (Kafka's test reloads to 2 and checks the original)
    assert last(rec).coordinator_epoch == 1
    with pytest.raises(TransactionCoordinatorFencedError):
        append_marker(rec, PID, EPOCH, COMMIT, 101, coordinator_epoch=0)


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_load_from_corrupt_snapshot_falls_back_to_the_previous_one(psm, damage):
    append_client(psm, PID, EPOCH, 0, 0)
    psm.take_snapshot()
    append_client(psm, PID, EPOCH, 1, 1)
    path = psm.take_snapshot()
    assert psm.latest_snapshot_offset == 2
    data = path.read_bytes()
    path.write_bytes(
        {"empty": b"", "truncated": data[: len(data) // 2], "garbage": data[:6] + bytes(37)}[damage]
    )
    rec = reopen(psm)
    rec.truncate_and_reload(0, 20, NOW)
    assert not path.exists()
    assert rec.active_producers[PID].last_data_offset == 0


def test_append_empty_control_batch(psm):
    info = psm.prepare_update(23423, AppendOrigin.CLIENT)
    empty = ProducerBatch(23423, 0, -1, -1, 15, 15, NOW, True, True, 0, None)
    assert info.append(empty) is None
    psm.update(info)
    psm.update_map_end_offset(16)
    assert last(psm, 23423).current_txn_first_offset is None


def test_control_batch_without_marker_is_a_caller_error(psm):
    info = psm.prepare_update(PID, AppendOrigin.REPLICATION)
    with pytest.raises(TypeError, match="EndTransactionMarker"):
        info.append(ProducerBatch(PID, 0, -1, -1, 15, 15, NOW, True, True, 1, None))


def test_remove_stray_snapshots_keep_clean_shutdown_snapshot(tmp_path):
    for off in (5, 2, 42):
        P.snapshot_file(tmp_path, off).touch()
    psm = ProducerStateManager(tmp_path)
    psm.remove_stray_snapshots([5])
    assert psm.latest_snapshot_offset == 42
    assert psm.oldest_snapshot_offset == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000005.snapshot",
        "00000000000000000042.snapshot",
    ]


def test_remove_all_stray_snapshots(tmp_path):
    for off in (5, 2, 42):
        P.snapshot_file(tmp_path, off).touch()
    psm = ProducerStateManager(tmp_path)
    psm.remove_stray_snapshots([42])
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000042.snapshot"]


def test_remove_and_mark_snapshot_for_deletion(tmp_path):
    P.snapshot_file(tmp_path, 5).touch()
    psm = ProducerStateManager(tmp_path)
    assert psm.latest_snapshot_offset == 5
    marked = psm.remove_and_mark_snapshot_for_deletion(5)
    assert marked is not None and marked.name == "00000000000000000005.snapshot.deleted"
    assert marked.exists()
    assert psm.latest_snapshot_offset is None


def test_remove_and_mark_snapshot_for_deletion_already_deleted(tmp_path):
    path = P.snapshot_file(tmp_path, 5)
    path.touch()
    psm = ProducerStateManager(tmp_path)
    path.unlink()
    assert psm.remove_and_mark_snapshot_for_deletion(5) is None
    assert psm.latest_snapshot_offset is None


def test_only_snapshot_files_are_picked_up(tmp_path):
    P.snapshot_file(tmp_path, 7).touch()
    (tmp_path / "00000000000000000009.snapshot.deleted").touch()
    (tmp_path / "00000000000000000011.snapshot.tmp").touch()  # torn write from a crash
    (tmp_path / "00000000000000000000.log").touch()
    (tmp_path / "junk.snapshot").touch()
    psm = ProducerStateManager(tmp_path)
    assert psm.snapshot_offsets == [7]
    assert not (tmp_path / "00000000000000000011.snapshot.tmp").exists()


def test_last_stable_offset_completed_txn(psm):
    base = 992342

    def begin(pid, offset):
        info = psm.prepare_update(pid, AppendOrigin.CLIENT)
        info.append_data_batch(EPOCH, 0, 0, NOW, offset, offset, True)
        psm.update(info)

    begin(1, base)
    begin(2, base + 25)
    begin(3, base + 57)
    last1 = base + 57 + 15
    t1 = CompletedTxn(1, base, last1, False)
    assert psm.last_stable_offset(t1) == base + 25
    psm.complete_txn(t1)
    psm.on_high_watermark_updated(last1 + 1)
    assert psm.first_unstable_offset() == base + 25
    last3 = last1 + 20
    t3 = CompletedTxn(3, base + 57, last3, False)
    assert psm.last_stable_offset(t3) == base + 25
    psm.complete_txn(t3)
    psm.on_high_watermark_updated(last3 + 1)
    assert psm.first_unstable_offset() == base + 25
    last2 = last3 + 78
    t2 = CompletedTxn(2, base + 25, last2, False)
    assert psm.last_stable_offset(t2) == last2 + 1
    psm.complete_txn(t2)
    psm.on_high_watermark_updated(last2 + 1)
    assert psm.first_unstable_offset() is None
    with pytest.raises(ValueError, match="which was not started"):
        psm.complete_txn(t2)


def test_skip_empty_transactions(psm):
    seq = 0

    def data(start, end, info):
        nonlocal seq
        count = end - start
        info.append_data_batch(EPOCH, seq, seq + count, NOW, start, end, True)
        seq += count + 1

    def end_txn(ctype, offset, info):
        return info.append_end_txn_marker(EndTransactionMarker(ctype, 27), EPOCH, offset, NOW)

    first = psm.prepare_update(PID, AppendOrigin.CLIENT)
    data(16, 20, first)
    assert [(t.producer_id, t.first_offset) for t in first.started_transactions] == [(PID, 16)]
    psm.update(first)
    psm.on_high_watermark_updated(21)
    assert psm.first_unstable_offset() == 16

    second = psm.prepare_update(PID, AppendOrigin.CLIENT)
    c1 = end_txn(COMMIT, 21, second)
    assert c1 == CompletedTxn(PID, 16, 21, False)
    assert end_txn(COMMIT, 22, second) is None
    assert end_txn(ABORT, 23, second) is None
    data(24, 27, second)
    c2 = end_txn(ABORT, 28, second)
    assert c2 == CompletedTxn(PID, 24, 28, True)
    assert end_txn(ABORT, 29, second) is None
    data(30, 31, second)
    assert [t.first_offset for t in second.started_transactions] == [24, 30]
    psm.update(second)
    psm.complete_txn(c1)
    psm.complete_txn(c2)
    psm.on_high_watermark_updated(32)
    assert psm.first_unstable_offset() == 30


def test_reject_non_zero_sequence_for_direct_epoch_bump(psm):
    for seq in range(3):
        append_client(psm, PID, EPOCH, seq, seq)
    info = psm.prepare_update(PID, AppendOrigin.CLIENT)
    with pytest.raises(OutOfOrderSequenceError) as err:
        info.append_data_batch(1, 5, 5, NOW, 3, 3, False)
    message = str(err.value)
    for part in (
        "Invalid sequence number for new epoch",
        "1 (request epoch)",
        "5 (seq. number)",
        "0 (current producer epoch)",
    ):
        assert part in message
    psm.prepare_update(PID, AppendOrigin.CLIENT).append_data_batch(1, 0, 0, NOW, 3, 3, False)


def test_read_write_snapshot(tmp_path):
    entries = [
        ProducerStateEntry(1, 2, 3, -1, 100, [BatchMetadata(1, 2, 3, -1)]),
        ProducerStateEntry(11, 12, 13, 123456, None, []),
    ]
    path = tmp_path / "testReadWriteSnapshot"
    P.write_snapshot(path, entries)
    assert P.read_snapshot(path) == entries


# ---------------------------------------------------------------------------------------------
# snapshot bytes

# PID_SNAPSHOT_MAP_SCHEMA, written out field by field for the two entries of
# test_read_write_snapshot (in producer id order).
GOLDEN_BODY = bytes.fromhex(
    "00000002"  # producer_entries: array of 2
    # producer 1
    "0000000000000001"  # producer_id
    "0002"  # epoch
    "00000001"  # last_sequence
    "0000000000000002"  # last_offset
    "00000003"  # offset_delta
    "ffffffffffffffff"  # timestamp (-1)
    "00000003"  # coordinator_epoch
    "0000000000000064"  # current_txn_first_offset (100)
    # producer 11: no batch metadata, no transaction
    "000000000000000b"
    "000c"
    "ffffffff"  # last_sequence -1
    "ffffffffffffffff"  # last_offset -1
    "00000000"  # offset_delta 0
    "000000000001e240"  # timestamp 123456
    "0000000d"  # coordinator_epoch 13
    "ffffffffffffffff"  # current_txn_first_offset -1
)
GOLDEN_SNAPSHOT = b"\x00\x01" + struct.pack(">I", crc32c(GOLDEN_BODY)) + GOLDEN_BODY


def test_crc32c_is_castagnoli():
    assert crc32c(b"123456789") == 0xE3069283


def test_snapshot_golden_bytes(tmp_path):
    entries = [
        ProducerStateEntry(11, 12, 13, 123456, None, []),
        ProducerStateEntry(1, 2, 3, -1, 100, [BatchMetadata(1, 2, 3, -1)]),
    ]
    assert P.encode_snapshot(entries) == GOLDEN_SNAPSHOT
    path = P.snapshot_file(tmp_path, 42)
    assert path.name == "00000000000000000042.snapshot"
    P.write_snapshot(path, entries)
    assert path.read_bytes() == GOLDEN_SNAPSHOT
    assert P.decode_snapshot(GOLDEN_SNAPSHOT) == sorted(entries, key=lambda e: e.producer_id)


def test_empty_snapshot_golden_bytes():
    body = b"\x00\x00\x00\x00"
    assert P.encode_snapshot([]) == b"\x00\x01" + struct.pack(">I", crc32c(body)) + body
    assert P.decode_snapshot(P.encode_snapshot([])) == []


def test_manager_writes_golden_snapshot(psm):
    append_client(psm, 7, 3, 0, 0, ts=1000, txn=True)
    info = psm.prepare_update(7, AppendOrigin.CLIENT)
    info.append_data_batch(3, 1, 4, 2000, 1, 4, True)
    psm.update(info)
    psm.update_map_end_offset(5)
    path = psm.take_snapshot()
    body = struct.pack(">iqhiqiqiq", 1, 7, 3, 4, 4, 3, 2000, -1, 0)
    assert path.read_bytes() == b"\x00\x01" + struct.pack(">I", crc32c(body)) + body


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "shorter than the 10-byte header"),
        (b"\x00\x01\x00\x00", "shorter than"),
        (b"\x00\x02" + GOLDEN_SNAPSHOT[2:], "unknown file version 2"),
        (GOLDEN_SNAPSHOT[:-1] + b"\x00", "CRC is no longer valid"),
        (GOLDEN_SNAPSHOT[:20], "CRC is no longer valid"),
    ],
)
def test_corrupt_snapshots(data, message):
    with pytest.raises(CorruptSnapshotError, match=message):
        P.decode_snapshot(data)


def test_snapshot_with_wrong_entry_count_is_corrupt():
    body = b"\x00\x00\x00\x03" + GOLDEN_BODY[4:]
    data = b"\x00\x01" + struct.pack(">I", crc32c(body)) + body
    with pytest.raises(CorruptSnapshotError, match="3 entries declared"):
        P.decode_snapshot(data)


entries_st = st.lists(
    st.builds(
        lambda pid, epoch, coord, ts, txn, batch: ProducerStateEntry(
            pid,
            epoch,
            coord,
            ts if batch is None else batch.timestamp,
            txn,
            [] if batch is None else [batch],
        ),
        st.integers(0, 2**63 - 1),
        st.integers(-1, 2**15 - 1),
        st.integers(-1, 2**31 - 1),
        st.integers(-1, 2**63 - 1),
        st.none() | st.integers(0, 2**63 - 1),
        st.none()
        | st.builds(
            BatchMetadata,
            st.integers(0, 2**31 - 1),
            st.integers(0, 2**63 - 1),
            st.integers(0, 2**31 - 1),
            st.integers(-1, 2**63 - 1),
        ),
    ),
    unique_by=lambda e: e.producer_id,
    max_size=10,
)


@given(entries_st)
def test_snapshot_round_trip(entries):
    data = P.encode_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    assert P.decode_snapshot(data) == sorted(entries, key=lambda e: e.producer_id)


# ---------------------------------------------------------------------------------------------
# the produce path: duplicates and sequence rules


def produce(psm, b):
    """What the broker does for one client batch: analyze, then write + apply unless dup."""
    analysis = psm.analyze_and_validate([b], AppendOrigin.CLIENT)
    if analysis.duplicate is None:
        psm.apply_append(analysis, b.last_offset + 1)
    return analysis


def test_duplicate_of_each_of_the_last_five_batches(psm):
    offset = 0
    sent = []
    for i in range(7):  # 7 batches of 3 records: only the last 5 are remembered
        b = batch(PID, EPOCH, 3 * i, offset, 3, ts=NOW + i)
        assert produce(psm, b).duplicate is None
        sent.append(b)
        offset += 3
    assert len(last(psm).batch_metadata) == 5
    for b in sent[2:]:
        retry = b._replace(base_offset=999, last_offset=1001)  # the broker re-assigns offsets
        analysis = psm.analyze_and_validate([retry], AppendOrigin.CLIENT)
        dup = analysis.duplicate
        assert dup == BatchMetadata(b.last_sequence, b.last_offset, 2, b.max_timestamp)
        assert (dup.first_offset, dup.last_offset) == (b.base_offset, b.last_offset)
        assert (dup.first_seq, dup.last_seq) == (b.base_sequence, b.last_sequence)
        with pytest.raises(ValueError):
            psm.apply_append(analysis, 1002)
    for b in sent[:2]:  # too old to be recognised: out of order
        with pytest.raises(OutOfOrderSequenceError):
            psm.analyze_and_validate([b], AppendOrigin.CLIENT)
    # a partial overlap is not a duplicate either
    with pytest.raises(OutOfOrderSequenceError):
        psm.analyze_and_validate([batch(PID, EPOCH, 19, 50, 2)], AppendOrigin.CLIENT)
    assert psm.map_end_offset == 21


def test_duplicate_needs_the_same_epoch(psm):
    produce(psm, batch(PID, 1, 0, 0, 2))
    with pytest.raises(InvalidProducerEpochError):
        psm.analyze_and_validate([batch(PID, 0, 0, 5, 2)], AppendOrigin.CLIENT)
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch must start at sequence 0 ...
        psm.analyze_and_validate([batch(PID, 2, 2, 5, 2)], AppendOrigin.CLIENT)
    assert produce(psm, batch(PID, 2, 0, 5, 2)).duplicate is None  # ... which is no duplicate


def test_duplicates_are_only_detected_for_clients(psm):
    produce(psm, batch(PID, EPOCH, 0, 0))
    analysis = psm.analyze_and_validate([batch(PID, EPOCH, 0, 1)], AppendOrigin.REPLICATION)
    assert analysis.duplicate is None


def test_gap_is_out_of_order(psm):
    produce(psm, batch(PID, EPOCH, 0, 0, 5))
    with pytest.raises(OutOfOrderSequenceError) as info:
        psm.analyze_and_validate([batch(PID, EPOCH, 6, 5)], AppendOrigin.CLIENT)
    assert info.value.info.name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert "6 (incoming seq. number), 4 (current end sequence number)" in info.value.message
    produce(psm, batch(PID, EPOCH, 5, 5))


def test_epoch_bump_resets_sequence(psm):
    produce(psm, batch(PID, 3, 0, 0, 10))
    produce(psm, batch(PID, 4, 0, 10, 10))
    assert (last(psm).producer_epoch, last(psm).last_seq) == (4, 9)
    assert len(last(psm).batch_metadata) == 1  # the old epoch's batches are gone


def test_stale_epoch(psm):
    produce(psm, batch(PID, 3, 0, 0))
    with pytest.raises(InvalidProducerEpochError) as info:
        psm.analyze_and_validate([batch(PID, 2, 1, 1)], AppendOrigin.CLIENT)
    assert info.value.code == 47
    # transactional producers get the same error from the log (Kafka 2.7+); the coordinator,
    # not the log, answers PRODUCER_FENCED
    with pytest.raises(InvalidProducerEpochError):
        psm.analyze_and_validate([batch(PID, 2, 0, 1, txn=True)], AppendOrigin.CLIENT)


@pytest.mark.parametrize("seq", [0, 1, 17, INT32_MAX])
def test_unknown_producer_any_sequence_is_accepted_as_kafka_3x(psm, seq):
    assert produce(psm, batch(PID, 0, seq, 0)).duplicate is None
    assert last(psm).last_seq == seq


def test_sequence_wrap_around_in_a_batch(psm):
    produce(psm, batch(PID, 0, INT32_MAX - 1, 0, 1))
    b = batch(PID, 0, INT32_MAX, 1, 3)  # sequences MAX, 0, 1
    assert (b.base_sequence, b.last_sequence) == (INT32_MAX, 1)
    produce(psm, b)
    assert psm.analyze_and_validate([b], AppendOrigin.CLIENT).duplicate is not None
    produce(psm, batch(PID, 0, 2, 4))
    assert last(psm).last_seq == 2


def test_several_batches_in_one_append(psm):
    batches = [batch(PID, 0, 0, 0, 2), batch(2, 0, 0, 2, 1), batch(PID, 0, 2, 3, 2)]
    analysis = psm.analyze_and_validate(batches, AppendOrigin.CLIENT)
    assert set(analysis.updated_producers) == {PID, 2}
    assert psm.active_producers == {}  # nothing committed yet
    psm.apply_append(analysis, 5)
    assert last(psm).last_seq == 3 and last(psm, 2).last_seq == 0
    assert psm.map_end_offset == 5
    with pytest.raises(OutOfOrderSequenceError):  # validated against the batch before it
        psm.analyze_and_validate([batch(PID, 0, 4, 5), batch(PID, 0, 6, 6)], AppendOrigin.CLIENT)


def test_non_idempotent_batches_are_ignored(psm):
    plain = ProducerBatch(-1, -1, -1, -1, 0, 9, NOW, False, False, 10)
    analysis = psm.analyze_and_validate([plain], AppendOrigin.CLIENT)
    assert analysis == P.ProducerStateAnalysis({}, [], None)
    psm.apply_append(analysis, 10)
    assert psm.map_end_offset == 10 and psm.active_producers == {}


def test_transactions_through_the_produce_path(psm):
    produce(psm, batch(PID, 0, 0, 0, 2, txn=True))
    produce(psm, batch(2, 0, 0, 2, 1, txn=True))
    assert psm.first_unstable_offset() == 0
    marker = ProducerBatch(PID, 0, -1, -1, 3, 3, NOW, True, True, 1, EndTransactionMarker(ABORT, 5))
    analysis = psm.analyze_and_validate([marker], AppendOrigin.COORDINATOR)
    assert analysis.completed_txns == [CompletedTxn(PID, 0, 3, True)]
    done = psm.apply_append(analysis, 4)
    assert done == [(CompletedTxn(PID, 0, 3, True), 2)]  # LSO = producer 2's open txn
    assert AbortedTxn.of(*done[0]) == AbortedTxn(PID, 0, 3, 2)
    assert psm.first_undecided_offset() == 2
    assert psm.first_unstable_offset() == 0  # the marker is not yet below the HW
    psm.on_high_watermark_updated(4)
    assert psm.first_unstable_offset() == 2


def test_real_batch_headers_work_for_data_batches(psm):
    raw = R.build_batch(
        [Record(offset_delta=i, value=b"v") for i in range(3)],
        base_offset=10,
        producer_id=PID,
        producer_epoch=0,
        base_sequence=0,
        base_timestamp=NOW,
    )
    header = R.read_header(raw)
    analysis = psm.analyze_and_validate([header], AppendOrigin.CLIENT)
    psm.apply_append(analysis, header.next_offset)
    entry = last(psm)
    assert (entry.first_seq, entry.last_seq, entry.first_data_offset, entry.last_data_offset) == (
        0,
        2,
        10,
        12,
    )
    assert psm.analyze_and_validate([header], AppendOrigin.CLIENT).duplicate is not None


# ---------------------------------------------------------------------------------------------
# recovery from the log


def build_log():
    """pid 1: data, then an aborted transaction; pid 2: a committed transaction; a plain batch."""
    out = bytearray()

    def data(base, pid, epoch, seq, n, txn=False):
        out.extend(
            R.build_batch(
                [Record(offset_delta=i, value=b"x") for i in range(n)],
                base_offset=base,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                is_transactional=txn,
                base_timestamp=NOW + base,
            )
        )

    def marker(base, pid, epoch, commit, coord):
        out.extend(
            R.build_control_batch(commit, coord, pid, epoch, base_offset=base, timestamp=NOW + base)
        )

    data(0, 1, 0, 0, 2)  # 0-1
    data(2, 1, 0, 2, 3, txn=True)  # 2-4, pid 1 transaction starts
    data(5, 2, 7, 0, 1, txn=True)  # 5, pid 2 transaction starts
    out.extend(R.build_batch([Record(value=b"plain")], base_offset=6, base_timestamp=NOW))  # 6
    marker(7, 1, 0, False, 3)  # 7: pid 1 ABORT
    marker(8, 2, 7, True, 3)  # 8: pid 2 COMMIT
    data(9, 1, 0, 5, 1)  # 9
    return bytes(out)


def test_producer_batches_reads_markers():
    batches = list(P.producer_batches(build_log()))
    assert [b.base_offset for b in batches] == [0, 2, 5, 7, 8, 9]  # the plain batch is skipped
    assert batches[3].marker == EndTransactionMarker(ABORT, 3)
    assert batches[4].marker == EndTransactionMarker(COMMIT, 3)
    assert batches[1].is_transactional and not batches[1].is_control
    assert (batches[1].base_sequence, batches[1].last_sequence, batches[1].last_offset) == (2, 4, 4)


def test_rebuild_from_batches(psm):
    log = build_log()
    done = psm.rebuild_from_batches(P.producer_batches(log))
    assert done == [(CompletedTxn(1, 2, 7, True), 5), (CompletedTxn(2, 5, 8, False), 9)]
    assert psm.map_end_offset == 10
    e1, e2 = last(psm, 1), last(psm, 2)
    assert (e1.producer_epoch, e1.last_seq, e1.last_data_offset, e1.coordinator_epoch) == (
        0,
        5,
        9,
        3,
    )
    assert [b.last_seq for b in e1.batch_metadata] == [1, 4, 5]
    assert (e2.producer_epoch, e2.last_seq, e2.current_txn_first_offset) == (7, 0, None)
    assert psm.first_undecided_offset() is None
    # replaying the same batches again changes nothing: they are below the map end offset
    assert psm.rebuild_from_batches(P.producer_batches(log)) == []
    assert [b.last_seq for b in last(psm, 1).batch_metadata] == [1, 4, 5]
    # and the rebuilt state validates the next client append
    with pytest.raises(OutOfOrderSequenceError):
        psm.analyze_and_validate([batch(1, 0, 7, 10)], AppendOrigin.CLIENT)
    produce(psm, batch(1, 0, 6, 10))


def test_rebuild_from_snapshot_then_log_tail(psm, tmp_path):
    log = build_log()
    batches = list(P.producer_batches(log))
    psm.rebuild_from_batches(batches[:3])  # up to offset 5: both transactions open
    psm.update_map_end_offset(7)  # the plain batch at 6
    psm.take_snapshot()
    rec = reopen(psm)
    rec.truncate_and_reload(0, 10, NOW)
    assert rec.map_end_offset == 7
    assert [t.first_offset for t in rec.ongoing_transactions()] == [2, 5]
    done = rec.rebuild_from_batches(batches)
    assert [t for t, _ in done] == [CompletedTxn(1, 2, 7, True), CompletedTxn(2, 5, 8, False)]
    assert rec.map_end_offset == 10
    assert last(rec, 1).last_seq == 5


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4)), max_size=25))
def test_client_appends_round_trip_through_snapshots(tmp_path_factory, plan):
    """Whatever in-order appends happen, a snapshot reload keeps each producer's epoch, last
    sequence and last offset, and the next in-order append is accepted."""
    d = tmp_path_factory.mktemp("psm")
    psm = ProducerStateManager(d)
    next_seq = {0: 0, 1: 0, 2: 0}
    offset = 0
    for pid, n in plan:
        produce(psm, batch(pid, 0, next_seq[pid], offset, n))
        next_seq[pid] += n
        offset += n
    psm.take_snapshot(sync=False)
    rec = ProducerStateManager(d)
    rec.truncate_and_reload(0, offset, NOW)
    for pid, entry in psm.active_producers.items():
        got = rec.last_entry(pid)
        assert got is not None
        assert (got.producer_epoch, got.last_seq, got.last_data_offset) == (
            entry.producer_epoch,
            entry.last_seq,
            entry.last_data_offset,
        )
        produce(rec, batch(pid, 0, next_seq[pid], offset, 1))
        offset += 1
