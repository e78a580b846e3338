"""TransactionMetadata's state machine: the cases of Kafka 3.9's TransactionMetadataTest.scala
(same names in snake_case, same values), then the transition table and the checks of
completeTransitionTo that Kafka's file leaves to the coordinator tests."""

from __future__ import annotations

import pytest

from broker.txn.metadata import (
    SHORT_MAX,
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from protocol.errors import ErrorCode
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

S = TransactionState
PRODUCER_ID = 23423
TRANSACTIONAL_ID = "txnlId"
NOW = 1_700_000_000_000


def metadata(
    state: TransactionState = S.EMPTY,
    *,
    producer_epoch: int,
    last_producer_id: int = NO_PRODUCER_ID,
    last_producer_epoch: int = NO_PRODUCER_EPOCH,
    partitions: set[tuple[str, int]] | None = None,
    txn_start_timestamp: int = -1,
) -> TransactionMetadata:
    return TransactionMetadata(
        TRANSACTIONAL_ID,
        producer_id=PRODUCER_ID,
        last_producer_id=last_producer_id,
        producer_epoch=producer_epoch,
        last_producer_epoch=last_producer_epoch,
        txn_timeout_ms=30000,
        state=state,
        topic_partitions=partitions,
        txn_start_timestamp=txn_start_timestamp,
        txn_last_update_timestamp=NOW,
    )


def bump(md: TransactionMetadata, expected: int | None, now: int = NOW) -> TxnTransitMetadata:
    """prepareSuccessfulIncrementProducerEpoch of Kafka's test."""
    result = md.prepare_increment_producer_epoch(30000, expected, now)
    assert isinstance(result, TxnTransitMetadata), result
    return result


# --- Kafka's TransactionMetadataTest --------------------------------------------------------


def test_initialize_epoch() -> None:
    md = metadata(producer_epoch=NO_PRODUCER_EPOCH)
    md.complete_transition_to(bump(md, None))
    assert md.producer_id == PRODUCER_ID
    assert md.producer_epoch == 0
    assert md.last_producer_epoch == NO_PRODUCER_EPOCH


def test_normal_epoch_bump() -> None:
    md = metadata(producer_epoch=735)
    md.complete_transition_to(bump(md, None))
    assert md.producer_id == PRODUCER_ID
    assert md.producer_epoch == 736
    assert md.last_producer_epoch == NO_PRODUCER_EPOCH


def test_bump_epoch_not_allowed_if_epochs_exhausted() -> None:
    md = metadata(producer_epoch=SHORT_MAX - 1)
    assert md.is_producer_epoch_exhausted
    with pytest.raises(IllegalStateError):
        md.prepare_increment_producer_epoch(30000, None, NOW)


def test_tolerate_update_time_shift_during_epoch_bump() -> None:
    md = metadata(producer_epoch=1, txn_start_timestamp=1)
    md.complete_transition_to(bump(md, 1, now=NOW - 1))  # a clock that went back
    assert md.producer_id == PRODUCER_ID
    assert md.producer_epoch == 2
    assert md.last_producer_epoch == 1
    assert md.txn_start_timestamp == 1
    assert md.txn_last_update_timestamp == NOW - 1


def test_tolerate_update_time_reset_during_producer_id_rotation() -> None:
    md = metadata(producer_epoch=1, txn_start_timestamp=1)
    md.complete_transition_to(
        md.prepare_producer_id_rotation(PRODUCER_ID + 1, 30000, NOW - 1, record_last_epoch=True)
    )
    assert md.producer_id == PRODUCER_ID + 1
    assert md.last_producer_epoch == 1
    assert md.producer_epoch == 0
    assert md.txn_start_timestamp == 1
    assert md.txn_last_update_timestamp == NOW - 1


def test_tolerate_time_shift_during_add_partitions() -> None:
    md = metadata(producer_epoch=1, txn_start_timestamp=NOW)
    # from Empty the start time becomes the update time, even an earlier one
    md.complete_transition_to(md.prepare_add_partitions({("topic1", 0)}, NOW - 1))
    assert md.topic_partitions == {("topic1", 0)}
    assert (md.producer_id, md.producer_epoch) == (PRODUCER_ID, 1)
    assert md.last_producer_epoch == NO_PRODUCER_EPOCH
    assert md.txn_start_timestamp == NOW - 1
    assert md.txn_last_update_timestamp == NOW - 1

    # in Ongoing another partition does not move the start time
    md.complete_transition_to(md.prepare_add_partitions({("topic2", 0)}, NOW - 2))
    assert md.topic_partitions == {("topic1", 0), ("topic2", 0)}
    assert (md.producer_id, md.producer_epoch) == (PRODUCER_ID, 1)
    assert md.last_producer_epoch == NO_PRODUCER_EPOCH
    assert md.txn_start_timestamp == NOW - 1
    assert md.txn_last_update_timestamp == NOW - 2


@pytest.mark.parametrize("target", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_tolerate_time_shift_during_prepare_commit_or_abort(target: TransactionState) -> None:
    md = metadata(S.ONGOING, producer_epoch=1, txn_start_timestamp=1)
    md.complete_transition_to(md.prepare_abort_or_commit(target, NOW - 1))
    assert md.state == target
    assert (md.producer_id, md.producer_epoch) == (PRODUCER_ID, 1)
    assert md.last_producer_epoch == NO_PRODUCER_EPOCH
    assert md.txn_start_timestamp == 1
    assert md.txn_last_update_timestamp == NOW - 1


@pytest.mark.parametrize(
    ("prepared", "completed"),
    [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT)],
)
def test_tolerate_time_shift_during_complete_commit_or_abort(
    prepared: TransactionState, completed: TransactionState
) -> None:
    md = metadata(prepared, producer_epoch=1, txn_start_timestamp=1)
    md.complete_transition_to(md.prepare_complete(NOW - 1))
    assert md.state == completed
    assert (md.producer_id, md.producer_epoch) == (PRODUCER_ID, 1)
    assert md.last_producer_epoch == NO_PRODUCER_EPOCH
    assert md.txn_start_timestamp == 1
    assert md.txn_last_update_timestamp == NOW - 1


def test_fence_producer_after_epochs_exhausted() -> None:
    md = metadata(S.ONGOING, producer_epoch=SHORT_MAX - 1)
    assert md.is_producer_epoch_exhausted
    fencing = md.prepare_fence_producer_epoch()
    assert fencing.producer_epoch == SHORT_MAX
    assert fencing.last_producer_epoch == NO_PRODUCER_EPOCH
    assert md.pending_state == S.PREPARE_EPOCH_FENCE

    md.pending_state = None  # as the coordinator does to make way for the abort
    transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)
    md.complete_transition_to(transit)
    assert transit.producer_id == PRODUCER_ID


def test_fence_producer_not_allowed_if_it_would_overflow() -> None:
    md = metadata(S.ONGOING, producer_epoch=SHORT_MAX)
    assert md.is_producer_epoch_exhausted
    with pytest.raises(IllegalStateError):
        md.prepare_fence_producer_epoch()


def test_rotate_producer_id() -> None:
    md = metadata(producer_epoch=SHORT_MAX - 1)
    md.complete_transition_to(
        md.prepare_producer_id_rotation(9893, 30000, NOW, record_last_epoch=True)
    )
    assert md.producer_id == 9893
    assert md.last_producer_id == PRODUCER_ID
    assert md.producer_epoch == 0
    assert md.last_producer_epoch == SHORT_MAX - 1


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT])
def test_rotate_producer_id_in_a_pending_transaction(state: TransactionState) -> None:
    md = metadata(state, producer_epoch=SHORT_MAX - 1, last_producer_id=PRODUCER_ID)
    with pytest.raises(IllegalStateError, match="still pending"):
        md.prepare_producer_id_rotation(9893, 30000, NOW, record_last_epoch=False)
    assert md.pending_state is None


def test_attempted_epoch_bump_with_newly_created_metadata() -> None:
    md = metadata(producer_epoch=NO_PRODUCER_EPOCH)
    md.complete_transition_to(bump(md, 735))
    assert md.producer_id == PRODUCER_ID
    assert md.producer_epoch == 0
    assert md.last_producer_epoch == NO_PRODUCER_EPOCH


def test_epoch_bump_with_current_epoch_provided() -> None:
    md = metadata(producer_epoch=735)
    md.complete_transition_to(bump(md, 735))
    assert md.producer_id == PRODUCER_ID
    assert md.producer_epoch == 736
    assert md.last_producer_epoch == 735


def test_attempted_epoch_bump_with_last_epoch() -> None:
    md = metadata(producer_epoch=735, last_producer_epoch=734)
    md.complete_transition_to(bump(md, 734))
    assert md.producer_id == PRODUCER_ID
    assert md.producer_epoch == 735
    assert md.last_producer_epoch == 734


def test_attempted_epoch_bump_with_fenced_epoch() -> None:
    md = metadata(producer_epoch=735, last_producer_id=PRODUCER_ID, last_producer_epoch=734)
    assert md.prepare_increment_producer_epoch(30000, 733, NOW) == ErrorCode.PRODUCER_FENCED
    assert md.pending_state is None  # nothing was prepared


# --- states and the transition table ----------------------------------------------------------


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.state_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert S.from_id(7) is S.PREPARE_EPOCH_FENCE
    with pytest.raises(IllegalStateError, match="Unknown transaction state id 8"):
        S.from_id(8)
    assert S.from_name("CompleteAbort") is S.COMPLETE_ABORT
    assert S.from_name("COMPLETE_ABORT") is None
    assert {s for s in S if s.is_expiration_allowed} == {
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    }
    assert is_epoch_exhausted(SHORT_MAX - 1) and not is_epoch_exhausted(SHORT_MAX - 2)


# Kafka's validPreviousStates, written out again from TransactionMetadata.scala
KAFKA_VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}

PREPARES = {
    "increment_epoch": (S.EMPTY, lambda md: md.prepare_increment_producer_epoch(30000, None, NOW)),
    "add_partitions": (S.ONGOING, lambda md: md.prepare_add_partitions({("t", 0)}, NOW)),
    "prepare_commit": (
        S.PREPARE_COMMIT,
        lambda md: md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW),
    ),
    "prepare_abort": (S.PREPARE_ABORT, lambda md: md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)),
    "dead": (S.DEAD, lambda md: md.prepare_dead()),
    "fence": (S.PREPARE_EPOCH_FENCE, lambda md: md.prepare_fence_producer_epoch()),
    "rotate": (S.EMPTY, lambda md: md.prepare_producer_id_rotation(99, 30000, NOW, False)),
}


@pytest.mark.parametrize("prepare", sorted(PREPARES))
@pytest.mark.parametrize("state", list(S))
def test_prepare_is_legal_exactly_from_kafkas_previous_states(
    prepare: str, state: TransactionState
) -> None:
    target, call = PREPARES[prepare]
    md = metadata(state, producer_epoch=5, txn_start_timestamp=NOW - 10)
    if state in KAFKA_VALID_PREVIOUS[target]:
        transit = call(md)
        assert transit.txn_state == target
        assert md.pending_state == target
        assert md.state == state  # nothing changes before the write completes
    else:
        with pytest.raises(IllegalStateError, match=r"not a valid previous state|still pending"):
            call(md)
        assert md.pending_state is None


@pytest.mark.parametrize("state", list(S))
def test_valid_previous_states_are_kafkas(state: TransactionState) -> None:
    assert state.valid_previous_states == KAFKA_VALID_PREVIOUS[state]


@pytest.mark.parametrize(
    ("state", "completed"),
    [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT)],
)
def test_prepare_complete_follows_the_prepared_decision(
    state: TransactionState, completed: TransactionState
) -> None:
    md = metadata(state, producer_epoch=5, partitions={("t", 0)}, txn_start_timestamp=NOW - 10)
    transit = md.prepare_complete(NOW)
    assert transit.txn_state == completed
    assert transit.topic_partitions == frozenset()
    md.complete_transition_to(transit)
    assert md.topic_partitions == set()
    assert md.txn_start_timestamp == NOW - 10


def test_a_pending_transition_blocks_another() -> None:
    md = metadata(S.ONGOING, producer_epoch=5, partitions={("t", 0)}, txn_start_timestamp=NOW)
    md.prepare_add_partitions({("t", 1)}, NOW)
    assert md.pending_transition_in_progress
    with pytest.raises(IllegalStateError, match="already a pending state Ongoing"):
        md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    md.pending_state = None  # what a failed write leaves
    md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)


def test_illegal_producer_id_or_epoch_are_value_errors() -> None:
    md = metadata(producer_epoch=5)
    with pytest.raises(ValueError, match="producer id -1"):
        md.prepare_producer_id_rotation(-1, 30000, NOW, record_last_epoch=False)
    # a just-created id (epoch -1) may expire, and only expire, without an epoch
    created = metadata(producer_epoch=NO_PRODUCER_EPOCH)
    assert created.prepare_dead().producer_epoch == NO_PRODUCER_EPOCH
    created.pending_state = None
    with pytest.raises(ValueError, match="producer epoch -1"):
        created.prepare_add_partitions({("t", 0)}, NOW)


def test_transit_carries_the_current_producer_id_as_last() -> None:
    md = metadata(producer_epoch=SHORT_MAX - 1, last_producer_id=7)
    transit = md.prepare_producer_id_rotation(9893, 45000, NOW, record_last_epoch=False)
    assert transit == TxnTransitMetadata(
        producer_id=9893,
        last_producer_id=PRODUCER_ID,
        producer_epoch=0,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=45000,
        txn_state=S.EMPTY,
        topic_partitions=frozenset(),
        txn_start_timestamp=-1,
        txn_last_update_timestamp=NOW,
    )
    assert md.prepare_no_transit().producer_id == PRODUCER_ID  # no pending state needed


# --- the failed-fence flag ----------------------------------------------------------------------


def test_a_failed_fence_is_not_bumped_again_until_a_prepare_completes() -> None:
    md = metadata(S.ONGOING, producer_epoch=5, partitions={("t", 0)}, txn_start_timestamp=NOW)
    assert md.prepare_fence_producer_epoch().producer_epoch == 6
    # the coordinator wrote epoch 6 into the metadata and the write failed
    md.pending_state = None
    md.producer_epoch = 6
    md.has_failed_epoch_fence = True
    assert md.prepare_fence_producer_epoch().producer_epoch == 6
    md.pending_state = None
    md.complete_transition_to(md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW))
    md.prepare_complete(NOW)
    assert not md.has_failed_epoch_fence


# --- completeTransitionTo's checks ------------------------------------------------------------


def test_complete_without_a_pending_state_fails() -> None:
    md = metadata(producer_epoch=5)
    transit = bump(md, None)
    md.pending_state = None
    with pytest.raises(IllegalStateError, match="does not have a pending state"):
        md.complete_transition_to(transit)


def test_complete_of_another_state_than_the_pending_one_fails() -> None:
    md = metadata(S.ONGOING, producer_epoch=5, txn_start_timestamp=NOW)
    other = metadata(S.ONGOING, producer_epoch=5, txn_start_timestamp=NOW)
    md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    with pytest.raises(IllegalStateError, match="unexpected metadata"):
        md.complete_transition_to(other.prepare_abort_or_commit(S.PREPARE_ABORT, NOW))
    assert md.state == S.ONGOING and md.pending_state == S.PREPARE_COMMIT


def _claim(md: TransactionMetadata, transit: TxnTransitMetadata) -> TxnTransitMetadata:
    md.pending_state = transit.txn_state
    return transit


def _transit(md: TransactionMetadata, **changes: object) -> TxnTransitMetadata:
    fields = {
        "producer_id": md.producer_id,
        "last_producer_id": md.last_producer_id,
        "producer_epoch": md.producer_epoch,
        "last_producer_epoch": md.last_producer_epoch,
        "txn_timeout_ms": md.txn_timeout_ms,
        "txn_state": md.state,
        "topic_partitions": frozenset(md.topic_partitions),
        "txn_start_timestamp": md.txn_start_timestamp,
        "txn_last_update_timestamp": NOW + 1,
    }
    fields.update(changes)
    return TxnTransitMetadata(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "changes", "ok"),
    [
        # Empty (InitProducerId): same epoch, +1, or 0 with a new id; no partitions; no start
        (S.EMPTY, {"producer_epoch": 6}, True),
        (S.EMPTY, {"producer_epoch": 7}, False),
        (S.EMPTY, {"producer_epoch": 0, "producer_id": 99}, True),
        (S.EMPTY, {"producer_epoch": 0}, False),
        (S.EMPTY, {"topic_partitions": frozenset({("t", 0)})}, False),
        (S.EMPTY, {"txn_start_timestamp": NOW}, False),
        (S.EMPTY, {"txn_timeout_ms": 1}, True),
        # Ongoing (AddPartitions): same producer, no partition dropped, same timeout
        (S.ONGOING, {"topic_partitions": frozenset({("t", 0), ("t", 1)})}, True),
        (S.ONGOING, {"topic_partitions": frozenset({("t", 1)})}, False),
        (S.ONGOING, {"producer_epoch": 6}, False),
        (S.ONGOING, {"producer_id": 99}, False),
        (S.ONGOING, {"txn_timeout_ms": 1}, False),
        # Prepare* (EndTxn): everything but the update time unchanged
        (S.PREPARE_COMMIT, {}, True),
        (S.PREPARE_COMMIT, {"topic_partitions": frozenset()}, False),
        (S.PREPARE_ABORT, {"txn_start_timestamp": NOW + 1}, False),
        (S.PREPARE_ABORT, {"txn_timeout_ms": 1}, False),
        (S.PREPARE_ABORT, {"producer_epoch": 6}, False),
        # Complete* (markers written): same producer and timeout, a start time
        (S.COMPLETE_COMMIT, {"topic_partitions": frozenset()}, True),
        (S.COMPLETE_ABORT, {"txn_start_timestamp": -1}, False),
        (S.COMPLETE_ABORT, {"txn_timeout_ms": 1}, False),
        (S.COMPLETE_COMMIT, {"producer_epoch": 6}, False),
    ],
)
def test_complete_checks_the_transit_against_the_metadata(
    state: TransactionState, changes: dict[str, object], ok: bool
) -> None:
    current = S.EMPTY if state == S.EMPTY else S.ONGOING
    md = metadata(current, producer_epoch=5, partitions=set() if current == S.EMPTY else {("t", 0)})
    if current == S.ONGOING:
        md.txn_start_timestamp = NOW
    changes = {"txn_state": state, **changes}
    if state == S.EMPTY:
        changes.setdefault("txn_start_timestamp", -1)
    transit = _claim(md, _transit(md, **changes))
    if ok:
        md.complete_transition_to(transit)
        assert md.state == state and md.pending_state is None
        assert md.txn_last_update_timestamp == NOW + 1
    else:
        with pytest.raises(IllegalStateError, match="unexpected metadata"):
            md.complete_transition_to(transit)
        assert md.state == current and md.txn_last_update_timestamp == NOW


def test_fence_and_dead_are_never_completed() -> None:
    md = metadata(S.ONGOING, producer_epoch=5, txn_start_timestamp=NOW)
    fence = md.prepare_fence_producer_epoch()
    with pytest.raises(IllegalStateError, match="unexpected metadata"):
        md.complete_transition_to(fence)
    empty = metadata(producer_epoch=5)
    with pytest.raises(IllegalStateError, match="remove the transaction metadata from the cache"):
        empty.complete_transition_to(empty.prepare_dead())


def test_remove_partition_only_while_markers_are_sent() -> None:
    md = metadata(S.PREPARE_COMMIT, producer_epoch=5, partitions={("t", 0), ("t", 1)})
    md.remove_partition(("t", 0))
    assert md.topic_partitions == {("t", 1)}
    ongoing = metadata(S.ONGOING, producer_epoch=5, partitions={("t", 0)})
    with pytest.raises(IllegalStateError, match="current state is Ongoing"):
        ongoing.remove_partition(("t", 0))


def test_equality_is_kafkas() -> None:
    a = metadata(S.ONGOING, producer_epoch=5, partitions={("t", 0)}, last_producer_id=1)
    b = metadata(S.ONGOING, producer_epoch=5, partitions={("t", 0)}, last_producer_id=2)
    b.pending_state = S.PREPARE_COMMIT
    assert a == b  # pending state and last producer id are not compared
    b.last_producer_epoch = 4
    assert a != b
