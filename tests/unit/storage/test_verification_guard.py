"""KIP-890 part 1 in the producer state (storage.verification_guard, ProducerStateManager):
a transactional batch of a producer without an ongoing transaction is appended only with the
guard its verification entry holds. Oracles: Kafka's ProducerStateManagerTest
(testVerificationStateEntry*, testSequenceAndEpochInVerificationEntry) and UnifiedLogTest's
verification cases (names kept where they match)."""

from __future__ import annotations

import pytest

from protocol import records as R
from storage.producer_state import (
    AppendOrigin,
    EndTransactionMarker,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerBatch,
    ProducerStateManager,
)
from storage.verification_guard import SENTINEL, VerificationGuard

PID = 7
NOW = 1_700_000_000_000


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(tmp_path, topic_partition="t-0", producer_id_expiration_ms=1000)


def data(offset, seq=0, epoch=0, *, txn=True):
    return ProducerBatch(PID, epoch, seq, seq, offset, offset, NOW, txn, False, 1)


def marker(offset, epoch=0, ctype=R.CONTROL_ABORT):
    return ProducerBatch(PID, epoch, -1, -1, offset, offset, NOW, True, True, 1, EndTransactionMarker(ctype, 0))


def append(psm, batch, guard, origin=AppendOrigin.CLIENT):
    analysis = psm.analyze_and_validate([batch], origin, guard)
    psm.apply_append(analysis, batch.last_offset + 1)


def test_verification_state_entry_reused_then_cleared_by_the_transactional_append(psm):
    entry = psm.maybe_create_verification_state_entry(PID, 0, 0, NOW)
    assert psm.maybe_create_verification_state_entry(PID, 0, 0, NOW).verification_guard is entry.verification_guard
    append(psm, data(0), entry.verification_guard)
    assert psm.verification_state_entry(PID) is None
    assert psm.has_ongoing_transaction(PID)


def test_sequence_and_epoch_in_verification_entry(psm):
    entry = psm.maybe_create_verification_state_entry(PID, 1, 0, NOW)
    psm.maybe_create_verification_state_entry(PID, 0, 0, NOW)  # a lower sequence: kept
    assert (entry.lowest_sequence, entry.epoch) == (0, 0)
    psm.maybe_create_verification_state_entry(PID, 5, 0, NOW)  # higher: ignored
    assert entry.lowest_sequence == 0
    psm.maybe_create_verification_state_entry(PID, 3, 1, NOW)  # a new epoch restarts it
    assert (entry.lowest_sequence, entry.epoch) == (3, 1)


def test_unverified_transactional_batch_is_refused(psm):
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        psm.analyze_and_validate([data(0)], AppendOrigin.CLIENT, SENTINEL)
    psm.maybe_create_verification_state_entry(PID, 0, 0, NOW)
    with pytest.raises(InvalidTxnStateError):  # another guard than the entry's
        psm.analyze_and_validate([data(0)], AppendOrigin.CLIENT, VerificationGuard())
    with pytest.raises(InvalidTxnStateError):  # the sentinel verifies nothing
        psm.analyze_and_validate([data(0)], AppendOrigin.COORDINATOR, SENTINEL)


def test_no_guard_needed_during_an_ongoing_transaction_nor_for_other_batches(psm):
    guard = psm.maybe_create_verification_state_entry(PID, 0, 0, NOW).verification_guard
    append(psm, data(0), guard)
    append(psm, data(1, seq=1), SENTINEL)  # the ongoing transaction is the proof
    other = ProducerBatch(PID + 1, 0, 0, 0, 2, 2, NOW, False, False, 1)
    psm.analyze_and_validate([other], AppendOrigin.CLIENT, SENTINEL)  # not transactional
    psm.analyze_and_validate([data(2, seq=2)], AppendOrigin.REPLICATION, SENTINEL)  # followers never check


def test_none_means_the_caller_does_not_verify(psm):
    """verification disabled (or a caller that does not verify): the batch is appended."""
    append(psm, data(0), None)
    assert psm.has_ongoing_transaction(PID)


def test_a_stale_guard_after_an_abort_is_refused(psm):
    """The ABA case: verified, then the transaction aborted (its marker clears the entry) and a
    new one started that never added the partition: the first guard must not let a batch in."""
    stale = psm.maybe_create_verification_state_entry(PID, 0, 0, NOW).verification_guard
    append(psm, data(0), stale)
    append(psm, marker(1), None, AppendOrigin.COORDINATOR)
    assert not psm.has_ongoing_transaction(PID)
    assert psm.verification_state_entry(PID) is None
    with pytest.raises(InvalidTxnStateError):
        psm.analyze_and_validate([data(2, seq=1)], AppendOrigin.CLIENT, stale)


def test_verification_entries_expire_with_producers(psm):
    psm.maybe_create_verification_state_entry(PID, 0, 0, NOW)
    psm.remove_expired_producers(NOW + 999)
    assert psm.verification_state_entry(PID) is not None
    psm.remove_expired_producers(NOW + 1000)
    assert psm.verification_state_entry(PID) is None


def test_a_later_sequence_cannot_overtake_the_first_verified_one(psm):
    """Kafka's checkSequence with a verification entry: an unknown producer's sequence is free,
    but not above the lowest sequence that started a verification (a pipelined later batch
    must not be appended before the first)."""
    guard = psm.maybe_create_verification_state_entry(PID, 0, 0, NOW).verification_guard
    psm.maybe_create_verification_state_entry(PID, 5, 0, NOW)  # the next request's batch asked too
    with pytest.raises(OutOfOrderSequenceError, match="earliest seen sequence"):
        psm.analyze_and_validate([data(0, seq=5)], AppendOrigin.CLIENT, guard)
    append(psm, data(0, seq=0), guard)
    append(psm, data(1, seq=1), SENTINEL)  # the entry is gone with the first append
