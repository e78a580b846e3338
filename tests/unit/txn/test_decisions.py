"""The decisions of Kafka 3.9's TransactionCoordinator, ported from the pure-logic cases of its
TransactionCoordinatorTest.scala (Kafka's test names in the docstrings). Where Kafka's test
mocks the state manager's write, these complete the transition as the write's success would
(`complete_transition_to`) or clear the pending state as its failure would."""

from __future__ import annotations

import itertools

import pytest

from broker.txn.decisions import (
    EndTxnTransit,
    ProducerIdAndEpoch,
    TransactionResult,
    check_transactional_id,
    new_transaction_metadata,
    prepare_add_partitions_transit,
    prepare_complete_transaction_transit,
    prepare_end_transaction_transit,
    prepare_init_producer_id_transit,
    validate_transaction_timeout_ms,
)
from broker.txn.metadata import (
    SHORT_MAX,
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from broker.txn.transaction_log import read_txn_record_value, value_to_bytes
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

S = TransactionState
COMMIT = TransactionResult.COMMIT
ABORT = TransactionResult.ABORT
TRANSACTIONAL_ID = "known"
PRODUCER_ID = 10
PRODUCER_EPOCH = 1
TXN_TIMEOUT_MS = 1
NOW = 1_700_000_000_000
PARTITIONS = frozenset({("topic1", 0)})


def metadata(
    state: TransactionState,
    *,
    producer_id: int = PRODUCER_ID,
    last_producer_id: int = PRODUCER_ID,
    producer_epoch: int = PRODUCER_EPOCH,
    last_producer_epoch: int = PRODUCER_EPOCH - 1,
    partitions: frozenset[tuple[str, int]] = frozenset(),
    txn_timeout_ms: int = TXN_TIMEOUT_MS,
) -> TransactionMetadata:
    return TransactionMetadata(
        TRANSACTIONAL_ID,
        producer_id=producer_id,
        last_producer_id=last_producer_id,
        producer_epoch=producer_epoch,
        last_producer_epoch=last_producer_epoch,
        txn_timeout_ms=txn_timeout_ms,
        state=state,
        topic_partitions=set(partitions),
        txn_start_timestamp=NOW,
        txn_last_update_timestamp=NOW,
    )


class Pids:
    """The producer id manager: hands out 0, 1, 2, ... and counts the calls."""

    def __init__(self, start: int = 0) -> None:
        self.ids = itertools.count(start)
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return next(self.ids)


def no_new_id() -> int:
    raise AssertionError("no producer id should be generated")


def init(
    md: TransactionMetadata,
    expected: ProducerIdAndEpoch | None = None,
    pids: Pids | None = None,
    timeout: int = TXN_TIMEOUT_MS,
) -> ErrorCode | TxnTransitMetadata:
    return prepare_init_producer_id_transit(md, timeout, expected, NOW, pids or no_new_id)


def init_ok(
    md: TransactionMetadata, expected: ProducerIdAndEpoch | None = None, pids: Pids | None = None
) -> TxnTransitMetadata:
    """An InitProducerId whose write succeeds; the transit is the answer (id, epoch)."""
    transit = init(md, expected, pids)
    assert isinstance(transit, TxnTransitMetadata), transit
    md.complete_transition_to(transit)
    return transit


# --- request checks before the lookup -----------------------------------------------------


def test_invalid_request_when_transactional_id_is_empty_or_null() -> None:
    """shouldReturnInvalidRequestWhenTransactionalIdIsEmpty, and the AddPartitions / EndTxn
    ...WhenTransactionalIdIsEmpty / IsNull cases."""
    assert check_transactional_id("") == ErrorCode.INVALID_REQUEST
    assert check_transactional_id(None) == ErrorCode.INVALID_REQUEST
    assert check_transactional_id("known") is None


def test_transaction_timeout_bounds() -> None:
    assert validate_transaction_timeout_ms(900_000, 900_000)
    assert validate_transaction_timeout_ms(1, 900_000)
    assert not validate_transaction_timeout_ms(900_001, 900_000)
    assert not validate_transaction_timeout_ms(0, 900_000)
    assert not validate_transaction_timeout_ms(-1, 900_000)


# --- InitProducerId -------------------------------------------------------------------------


def test_init_pid_with_epoch_zero_for_new_transactional_id() -> None:
    """shouldInitPidWithEpochZeroForNewTransactionalId"""
    pids = Pids(start=7)
    md = new_transaction_metadata(TRANSACTIONAL_ID, pids(), TXN_TIMEOUT_MS, NOW)
    assert (md.state, md.producer_epoch) == (S.EMPTY, NO_PRODUCER_EPOCH)
    transit = init_ok(md)
    assert (transit.producer_id, transit.producer_epoch) == (7, 0)
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (7, 0, NO_PRODUCER_EPOCH)


def test_generate_new_producer_id_if_no_state_and_producer_id_and_epoch_provided() -> None:
    """shouldGenerateNewProducerIdIfNoStateAndProducerIdAndEpochProvided: a producer recovering
    from UNKNOWN_PRODUCER_ID gets the newly created id, epoch 0."""
    md = new_transaction_metadata(TRANSACTIONAL_ID, 3, TXN_TIMEOUT_MS, NOW)
    transit = init_ok(md, ProducerIdAndEpoch(PRODUCER_ID, PRODUCER_EPOCH))
    assert (transit.producer_id, transit.producer_epoch) == (3, 0)


def test_generate_new_producer_id_if_epochs_exhausted() -> None:
    """shouldGenerateNewProducerIdIfEpochsExhausted"""
    md = metadata(S.EMPTY, producer_epoch=SHORT_MAX - 1, last_producer_epoch=SHORT_MAX - 2)
    pids = Pids(start=500)
    transit = init_ok(md, pids=pids)
    assert (transit.producer_id, transit.producer_epoch) == (500, 0)
    assert pids.calls == 1
    assert (md.last_producer_id, md.last_producer_epoch) == (PRODUCER_ID, NO_PRODUCER_EPOCH)


def test_producer_id_generation_failure_is_answered_with_its_error() -> None:
    md = metadata(S.EMPTY, producer_epoch=SHORT_MAX - 1)

    def unavailable() -> int:
        raise KafkaProtocolError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    assert (
        prepare_init_producer_id_transit(md, TXN_TIMEOUT_MS, None, NOW, unavailable)
        == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    )
    assert md.pending_state is None


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT])
def test_increment_epoch_and_update_metadata_on_init_pid(state: TransactionState) -> None:
    """shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExisting{Empty,Complete,
    CompleteCommit}Transaction: the epoch is bumped and the new timeout taken."""
    md = metadata(state, txn_timeout_ms=60_000)
    transit = init(md, timeout=TXN_TIMEOUT_MS)
    assert isinstance(transit, TxnTransitMetadata)
    assert transit == TxnTransitMetadata(
        producer_id=PRODUCER_ID,
        last_producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=TXN_TIMEOUT_MS,
        txn_state=S.EMPTY,
        topic_partitions=frozenset(),
        txn_start_timestamp=-1,
        txn_last_update_timestamp=NOW,
    )
    md.complete_transition_to(transit)
    assert (md.state, md.producer_epoch, md.txn_timeout_ms) == (S.EMPTY, 2, TXN_TIMEOUT_MS)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_wait_for_markers_on_init_pid(state: TransactionState) -> None:
    """shouldWaitForCommitToCompleteOnHandleInitPidAndExistingTransactionIn{PrepareCommit,
    PrepareAbort}State"""
    assert init(metadata(state)) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_concurrent_transactions_on_init_pid_while_a_transition_is_pending() -> None:
    md = metadata(S.EMPTY)
    md.pending_state = S.ONGOING
    assert init(md) == ErrorCode.CONCURRENT_TRANSACTIONS
    # pending wins over a fenced producer: the retry decides
    assert init(md, ProducerIdAndEpoch(PRODUCER_ID + 5, 0)) == ErrorCode.CONCURRENT_TRANSACTIONS


def fence_and_abort(md: TransactionMetadata) -> EndTxnTransit:
    """handleInitProducerId on an Ongoing transaction: the fence, then the coordinator's abort
    with the fenced epoch, in one step."""
    fence = init(md)
    assert isinstance(fence, TxnTransitMetadata) and fence.txn_state == S.PREPARE_EPOCH_FENCE
    end = prepare_end_transaction_transit(
        md, fence.producer_id, fence.producer_epoch, ABORT, NOW, is_from_client=False
    )
    assert isinstance(end, EndTxnTransit), end
    return end


def test_abort_transaction_on_init_pid_when_existing_transaction_in_ongoing_state() -> None:
    """shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState: the abort
    written carries the bumped epoch and no last epoch (the client gets
    CONCURRENT_TRANSACTIONS)."""
    md = metadata(S.ONGOING, partitions=PARTITIONS)
    end = fence_and_abort(md)
    original = metadata(
        S.ONGOING,
        producer_epoch=PRODUCER_EPOCH + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        partitions=PARTITIONS,
    )
    assert end.transit == original.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)
    assert end.is_epoch_fence
    assert md.pending_state == S.PREPARE_ABORT
    assert md.producer_epoch == PRODUCER_EPOCH + 1


def test_fail_to_abort_transaction_on_init_pid_when_producer_epoch_is_smaller() -> None:
    """shouldFailToAbortTransactionOnHandleInitPidWhenProducerEpochIsSmaller: another fence got
    in first, so this one's abort is fenced."""
    md = metadata(S.ONGOING, partitions=PARTITIONS)
    fence = init(md)
    assert isinstance(fence, TxnTransitMetadata)
    bumped = metadata(S.ONGOING, producer_epoch=PRODUCER_EPOCH + 2, partitions=PARTITIONS)
    assert (
        prepare_end_transaction_transit(
            bumped, PRODUCER_ID, fence.producer_epoch, ABORT, NOW, is_from_client=False
        )
        == ErrorCode.PRODUCER_FENCED
    )


def test_not_repeatedly_bump_epoch_due_to_init_pid_during_ongoing_txn_if_append_fails() -> None:
    """shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppendToLogFails"""
    md = metadata(S.ONGOING, last_producer_epoch=NO_PRODUCER_EPOCH, partitions=PARTITIONS)
    for _ in range(2):  # two writes fail (NOT_ENOUGH_REPLICAS)
        end = fence_and_abort(md)
        assert end.transit.producer_epoch == PRODUCER_EPOCH + 1
        md.pending_state = None  # the state manager's failure path
        md.has_failed_epoch_fence = end.is_epoch_fence  # the coordinator's
        assert md.producer_epoch == PRODUCER_EPOCH + 1
        assert md.has_failed_epoch_fence
    end = fence_and_abort(md)  # the third succeeds
    assert end.transit.producer_epoch == PRODUCER_EPOCH + 1
    md.complete_transition_to(end.transit)
    complete = prepare_complete_transaction_transit(md, PRODUCER_ID, PRODUCER_EPOCH + 1, ABORT, NOW)
    assert isinstance(complete, TxnTransitMetadata) and complete.txn_state == S.COMPLETE_ABORT
    assert md.producer_epoch == PRODUCER_EPOCH + 1
    assert not md.has_failed_epoch_fence


def test_use_last_epoch_to_fence_when_epochs_are_exhausted() -> None:
    """shouldUseLastEpochToFenceWhenEpochsAreExhausted"""
    md = metadata(
        S.ONGOING,
        producer_epoch=SHORT_MAX - 1,
        last_producer_epoch=SHORT_MAX - 2,
        partitions=PARTITIONS,
    )
    assert md.is_producer_epoch_exhausted
    end = fence_and_abort(md)
    assert md.producer_epoch == SHORT_MAX
    assert end.transit == TxnTransitMetadata(
        producer_id=PRODUCER_ID,
        last_producer_id=PRODUCER_ID,
        producer_epoch=SHORT_MAX,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=TXN_TIMEOUT_MS,
        txn_state=S.PREPARE_ABORT,
        topic_partitions=PARTITIONS,
        txn_start_timestamp=NOW,
        txn_last_update_timestamp=NOW,
    )
    # once aborted, the producer's retry gets a new producer id
    md.complete_transition_to(end.transit)
    complete = prepare_complete_transaction_transit(md, PRODUCER_ID, SHORT_MAX, ABORT, NOW)
    assert isinstance(complete, TxnTransitMetadata)
    md.complete_transition_to(complete)
    transit = init_ok(md, pids=Pids(start=77))
    assert (transit.producer_id, transit.producer_epoch) == (77, 0)


def test_init_producer_id_with_no_last_producer_data() -> None:
    """testInitProducerIdWithNoLastProducerData: metadata loaded from the log knows no last
    epoch, so the old producer's retry is fenced."""
    md = metadata(
        S.EMPTY,
        last_producer_id=NO_PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        partitions=PARTITIONS,
    )
    assert init(md, ProducerIdAndEpoch(PRODUCER_ID, PRODUCER_EPOCH)) == ErrorCode.PRODUCER_FENCED


def test_fence_producer_when_mapping_exists_with_different_producer_id() -> None:
    """testFenceProducerWhenMappingExistsWithDifferentProducerId"""
    md = metadata(S.EMPTY, producer_id=PRODUCER_ID + 1, partitions=PARTITIONS)
    assert init(md, ProducerIdAndEpoch(PRODUCER_ID, PRODUCER_EPOCH)) == ErrorCode.PRODUCER_FENCED


def test_init_producer_id_with_current_epoch_provided() -> None:
    """testInitProducerIdWithCurrentEpochProvided: re-initialisation bumps; its retry (the
    answer was lost) gets the same epoch again."""
    md = metadata(S.EMPTY, producer_epoch=10, last_producer_epoch=9)
    transit = init_ok(md, ProducerIdAndEpoch(PRODUCER_ID, 10))
    assert (transit.producer_id, transit.producer_epoch) == (PRODUCER_ID, 11)
    retry = init_ok(md, ProducerIdAndEpoch(PRODUCER_ID, 10))
    assert (retry.producer_id, retry.producer_epoch) == (PRODUCER_ID, 11)


def test_init_producer_id_stale_current_epoch_provided() -> None:
    """testInitProducerIdStaleCurrentEpochProvided: after a new producer took epoch 11, the old
    one continuing from 10 is fenced."""
    md = metadata(S.EMPTY, producer_epoch=10, last_producer_epoch=9)
    transit = init_ok(md)
    assert (transit.producer_id, transit.producer_epoch) == (PRODUCER_ID, 11)
    assert init(md, ProducerIdAndEpoch(PRODUCER_ID, 10)) == ErrorCode.PRODUCER_FENCED


def test_retry_init_producer_id_after_producer_id_rotation() -> None:
    """testRetryInitProducerIdAfterProducerIdRotation"""
    md = metadata(S.EMPTY, producer_epoch=SHORT_MAX - 1, last_producer_epoch=SHORT_MAX - 2)
    pids = Pids(start=PRODUCER_ID + 1)
    old = ProducerIdAndEpoch(PRODUCER_ID, SHORT_MAX - 1)
    transit = init_ok(md, old, pids)
    assert (transit.producer_id, transit.producer_epoch) == (PRODUCER_ID + 1, 0)
    retry = init_ok(md, old, pids)
    assert (retry.producer_id, retry.producer_epoch) == (PRODUCER_ID + 1, 0)
    assert pids.calls == 1


def test_init_producer_id_with_invalid_epoch_after_producer_id_rotation() -> None:
    """testInitProducerIdWithInvalidEpochAfterProducerIdRotation"""
    md = metadata(S.EMPTY, producer_epoch=SHORT_MAX - 1, last_producer_epoch=SHORT_MAX - 2)
    init_ok(md, ProducerIdAndEpoch(PRODUCER_ID, SHORT_MAX - 1), Pids(start=PRODUCER_ID + 1))
    stale = ProducerIdAndEpoch(PRODUCER_ID, SHORT_MAX - 2)
    assert init(md, stale) == ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_states_init_producer_id_never_sees(state: TransactionState) -> None:
    with pytest.raises(IllegalStateError, match="should never have transitioned"):
        init(metadata(state))


# --- AddPartitionsToTxn ----------------------------------------------------------------------


def add(
    md: TransactionMetadata | None, producer_id: int = PRODUCER_ID, epoch: int = PRODUCER_EPOCH
) -> ErrorCode | TxnTransitMetadata:
    return prepare_add_partitions_transit(md, producer_id, epoch, PARTITIONS, NOW)


def test_invalid_pid_mapping_on_add_partitions_when_transactional_id_not_present() -> None:
    """shouldRespondWithInvalidPidMappingOnAddPartitionsToTransactionWhenTransactionalIdNotPresent"""
    assert add(None, 0, 1) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert add(metadata(S.EMPTY), PRODUCER_ID + 1) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_concurrent_transactions_on_add_partitions_while_markers_are_written(
    state: TransactionState,
) -> None:
    """shouldRespondWithConcurrentTransactionsOnAddPartitionsWhenStateIs{PrepareCommit,
    PrepareAbort}"""
    md = metadata(state, producer_id=0, last_producer_id=0, producer_epoch=0)
    assert add(md, 0, 0) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_producer_fenced_on_add_partitions_when_epochs_are_different() -> None:
    """shouldRespondWithProducerFencedOnAddPartitionsWhenEpochsAreDifferent (before the state
    is looked at)"""
    md = metadata(S.PREPARE_COMMIT, producer_id=0, last_producer_id=0, producer_epoch=10)
    assert add(md, 0, 0) == ErrorCode.PRODUCER_FENCED


def test_concurrent_transactions_on_add_partitions_while_a_transition_is_pending() -> None:
    md = metadata(S.ONGOING, partitions=PARTITIONS)
    md.pending_state = S.PREPARE_COMMIT
    assert add(md) == ErrorCode.CONCURRENT_TRANSACTIONS


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_append_new_metadata_on_add_partitions(state: TransactionState) -> None:
    """shouldAppendNewMetadataToLogOnAddPartitionsWhenPartitionsAdded and
    shouldRespondWithSuccessOnAddPartitionsWhenStateIs{Ongoing,CompleteCommit,CompleteAbort}"""
    md = metadata(
        state, partitions=frozenset({("topic0", 3)}) if state == S.ONGOING else frozenset()
    )
    md.txn_start_timestamp = NOW - 100
    transit = add(md)
    assert isinstance(transit, TxnTransitMetadata)
    assert transit.txn_state == S.ONGOING
    assert md.pending_state == S.ONGOING
    assert PARTITIONS <= transit.topic_partitions
    # a new transaction starts now; an open one keeps its start
    assert transit.txn_start_timestamp == (NOW - 100 if state == S.ONGOING else NOW)
    md.complete_transition_to(transit)
    assert PARTITIONS <= md.topic_partitions


def test_no_write_on_add_partitions_when_partitions_are_already_in_the_transaction() -> None:
    """shouldRespondWithErrorsNoneOnAddPartitionWhenNoErrorsAndPartitionsTheSame (Kafka's mock
    answers NONE either way; the optimisation is for an Ongoing transaction only)"""
    md = metadata(S.ONGOING, partitions=PARTITIONS | {("topic2", 1)})
    assert add(md) == ErrorCode.NONE
    assert md.pending_state is None
    # an Empty metadata holding the same partitions still starts a transaction
    assert isinstance(add(metadata(S.EMPTY, partitions=PARTITIONS)), TxnTransitMetadata)


# --- EndTxn ------------------------------------------------------------------------------------


def end(
    md: TransactionMetadata | None,
    result: TransactionResult,
    producer_id: int = PRODUCER_ID,
    epoch: int = PRODUCER_EPOCH,
) -> ErrorCode | EndTxnTransit:
    return prepare_end_transaction_transit(md, producer_id, epoch, result, NOW)


def test_invalid_pid_mapping_on_end_txn() -> None:
    """shouldReplyWithInvalidPidMappingOnEndTxnWhenTxnIdDoesntExist / ...WhenPidDosentMatchMapped"""
    assert end(None, COMMIT, 0, 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    md = metadata(S.ONGOING, producer_id=10, last_producer_id=10, producer_epoch=0)
    assert end(md, COMMIT, 0, 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_producer_fenced_on_end_txn_when_epoch_is_not_same_as_transaction() -> None:
    """shouldReplyWithProducerFencedOnEndTxnWhenEpochIsNotSameAsTransaction"""
    assert end(metadata(S.ONGOING), COMMIT, epoch=0) == ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize(
    ("state", "result", "answer"),
    [
        # shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIsCommit (a retry)
        (S.COMPLETE_COMMIT, COMMIT, ErrorCode.NONE),
        # shouldReturnOkOnEndTxnWhenStatusIsCompleteAbortAndResultIsAbort
        (S.COMPLETE_ABORT, ABORT, ErrorCode.NONE),
        # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsCompleteAbortAndResultIsNotAbort
        (S.COMPLETE_ABORT, COMMIT, ErrorCode.INVALID_TXN_STATE),
        # ...WhenStatusIsCompleteCommitAndResultIsNotCommit
        (S.COMPLETE_COMMIT, ABORT, ErrorCode.INVALID_TXN_STATE),
        # shouldReturnConcurrentTxnRequestOnEndTxnRequestWhenStatusIsPrepareCommit
        (S.PREPARE_COMMIT, COMMIT, ErrorCode.CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, ABORT, ErrorCode.CONCURRENT_TRANSACTIONS),
        # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsPrepareAbort
        (S.PREPARE_ABORT, COMMIT, ErrorCode.INVALID_TXN_STATE),
        (S.PREPARE_COMMIT, ABORT, ErrorCode.INVALID_TXN_STATE),
        # no transaction open
        (S.EMPTY, COMMIT, ErrorCode.INVALID_TXN_STATE),
        (S.EMPTY, ABORT, ErrorCode.INVALID_TXN_STATE),
    ],
)
def test_end_txn_answers_per_state(
    state: TransactionState, result: TransactionResult, answer: ErrorCode
) -> None:
    md = metadata(state)
    assert end(md, result) == answer
    assert md.pending_state is None and md.state == state


@pytest.mark.parametrize(
    ("result", "target"), [(COMMIT, S.PREPARE_COMMIT), (ABORT, S.PREPARE_ABORT)]
)
def test_append_prepare_on_end_txn_when_ongoing(
    result: TransactionResult, target: TransactionState
) -> None:
    """shouldAppendPrepare{Commit,Abort}ToLogOnEndTxnWhenStatusIsOngoingAndResultIs{Commit,Abort}"""
    md = metadata(S.ONGOING, partitions=PARTITIONS)
    decision = end(md, result)
    assert decision == EndTxnTransit(
        TxnTransitMetadata(
            producer_id=PRODUCER_ID,
            last_producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            last_producer_epoch=PRODUCER_EPOCH - 1,
            txn_timeout_ms=TXN_TIMEOUT_MS,
            txn_state=target,
            topic_partitions=PARTITIONS,
            txn_start_timestamp=NOW,
            txn_last_update_timestamp=NOW,
        ),
        is_epoch_fence=False,
    )
    assert md.pending_state == target


@pytest.mark.parametrize("request_epoch", [PRODUCER_EPOCH + 1, PRODUCER_EPOCH - 1])
def test_producer_fenced_on_end_txn_when_epoch_is_larger_or_smaller(request_epoch: int) -> None:
    """shouldReturnInvalidEpochOnEndTxnWhenEpochIs{Larger,Smaller}: a client's epoch must be the
    current one, even for a retry of a completed commit"""
    md = metadata(S.COMPLETE_COMMIT, last_producer_epoch=0)
    assert end(md, COMMIT, epoch=request_epoch) == ErrorCode.PRODUCER_FENCED


def test_concurrent_transactions_on_end_txn_while_a_transition_is_pending() -> None:
    md = metadata(S.ONGOING, partitions=PARTITIONS)
    md.pending_state = S.ONGOING
    assert end(md, COMMIT) == ErrorCode.CONCURRENT_TRANSACTIONS


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_states_end_txn_never_sees(state: TransactionState) -> None:
    with pytest.raises(IllegalStateError, match="should never have transitioned"):
        end(metadata(state), ABORT)


# --- after EndTxn's write: the markers' transit ----------------------------------------------


def prepared(state: TransactionState) -> TransactionMetadata:
    return metadata(state, partitions=PARTITIONS)


@pytest.mark.parametrize(
    ("state", "result", "completed"),
    [(S.PREPARE_COMMIT, COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, ABORT, S.COMPLETE_ABORT)],
)
def test_complete_transit_after_prepare_is_written(
    state: TransactionState, result: TransactionResult, completed: TransactionState
) -> None:
    md = prepared(state)
    transit = prepare_complete_transaction_transit(md, PRODUCER_ID, PRODUCER_EPOCH, result, NOW + 5)
    assert isinstance(transit, TxnTransitMetadata)
    assert (transit.txn_state, transit.topic_partitions) == (completed, frozenset())
    assert transit.txn_last_update_timestamp == NOW + 5
    assert md.pending_state == completed


@pytest.mark.parametrize(
    ("md", "producer_id", "epoch", "result", "answer"),
    [
        (
            prepared(S.PREPARE_COMMIT),
            PRODUCER_ID + 1,
            PRODUCER_EPOCH,
            COMMIT,
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ),
        (
            prepared(S.PREPARE_COMMIT),
            PRODUCER_ID,
            PRODUCER_EPOCH + 1,
            COMMIT,
            ErrorCode.PRODUCER_FENCED,
        ),
        (
            prepared(S.PREPARE_COMMIT),
            PRODUCER_ID,
            PRODUCER_EPOCH,
            ABORT,
            ErrorCode.INVALID_TXN_STATE,
        ),
        (
            prepared(S.PREPARE_ABORT),
            PRODUCER_ID,
            PRODUCER_EPOCH,
            COMMIT,
            ErrorCode.INVALID_TXN_STATE,
        ),
        (prepared(S.ONGOING), PRODUCER_ID, PRODUCER_EPOCH, COMMIT, ErrorCode.INVALID_TXN_STATE),
        (
            prepared(S.COMPLETE_COMMIT),
            PRODUCER_ID,
            PRODUCER_EPOCH,
            COMMIT,
            ErrorCode.INVALID_TXN_STATE,
        ),
        (prepared(S.EMPTY), PRODUCER_ID, PRODUCER_EPOCH, ABORT, ErrorCode.INVALID_TXN_STATE),
    ],
)
def test_complete_transit_refused_when_the_metadata_moved_on(
    md: TransactionMetadata,
    producer_id: int,
    epoch: int,
    result: TransactionResult,
    answer: ErrorCode,
) -> None:
    assert prepare_complete_transaction_transit(md, producer_id, epoch, result, NOW) == answer
    assert md.pending_state is None


def test_complete_transit_waits_for_a_pending_transition() -> None:
    md = prepared(S.PREPARE_COMMIT)
    md.pending_state = S.COMPLETE_COMMIT
    assert (
        prepare_complete_transaction_transit(md, PRODUCER_ID, PRODUCER_EPOCH, COMMIT, NOW)
        == ErrorCode.CONCURRENT_TRANSACTIONS
    )


# --- a whole transaction, through the log records ------------------------------------------


def write(md: TransactionMetadata, transit: TxnTransitMetadata) -> None:
    """What the I/O half will do on a successful write: the record goes to the log, then the
    metadata adopts the transit. Also checks that the record reads back as the transit."""
    record = value_to_bytes(transit)
    md.complete_transition_to(transit)
    assert read_txn_record_value(md.transactional_id, record) == TransactionMetadata(
        md.transactional_id,
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,  # not in the record
        txn_timeout_ms=transit.txn_timeout_ms,
        state=transit.txn_state,
        topic_partitions=set(transit.topic_partitions),
        txn_start_timestamp=transit.txn_start_timestamp,
        txn_last_update_timestamp=transit.txn_last_update_timestamp,
    )


def test_a_committed_transaction_then_a_retried_end_txn_then_a_new_producer() -> None:
    pids = Pids(start=4000)
    md = new_transaction_metadata("tx", pids(), 60_000, NOW)
    first = init(md, timeout=60_000)
    assert isinstance(first, TxnTransitMetadata)
    write(md, first)
    assert (md.producer_id, md.producer_epoch) == (4000, 0)

    added = prepare_add_partitions_transit(md, 4000, 0, [("a", 0), ("b", 1)], NOW + 1)
    assert isinstance(added, TxnTransitMetadata)
    write(md, added)
    more = prepare_add_partitions_transit(md, 4000, 0, [("a", 1)], NOW + 2)
    assert isinstance(more, TxnTransitMetadata)
    write(md, more)
    assert md.state == S.ONGOING and md.txn_start_timestamp == NOW + 1

    ended = prepare_end_transaction_transit(md, 4000, 0, COMMIT, NOW + 3)
    assert isinstance(ended, EndTxnTransit)
    write(md, ended.transit)
    assert md.state == S.PREPARE_COMMIT
    assert prepare_end_transaction_transit(md, 4000, 0, COMMIT, NOW + 4) == (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    complete = prepare_complete_transaction_transit(md, 4000, 0, COMMIT, NOW + 5)
    assert isinstance(complete, TxnTransitMetadata)
    for tp in sorted(md.topic_partitions):  # the markers, one partition at a time
        md.remove_partition(tp)
    write(md, complete)
    assert md.state == S.COMPLETE_COMMIT and md.topic_partitions == set()

    # the client's EndTxn retry (its answer was lost) succeeds without a write
    assert prepare_end_transaction_transit(md, 4000, 0, COMMIT, NOW + 6) == ErrorCode.NONE
    # no epoch bump on commit (transaction.version 0); a new producer instance bumps it
    second = init(md, timeout=60_000)
    assert isinstance(second, TxnTransitMetadata)
    write(md, second)
    assert (md.producer_id, md.producer_epoch, md.state) == (4000, 1, S.EMPTY)
    # as in Kafka, completing Empty leaves the old start time in memory; the record says -1
    assert (second.txn_start_timestamp, md.txn_start_timestamp) == (-1, NOW + 1)
    assert (
        prepare_end_transaction_transit(md, 4000, 0, COMMIT, NOW + 7) == ErrorCode.PRODUCER_FENCED
    )
    assert pids.calls == 1
