"""The decision half of Kafka 3.9's TransactionCoordinator.scala: what InitProducerId,
AddPartitionsToTxn and EndTxn do to a transactional id's metadata, without the I/O.

Each `prepare_*` function looks at one TransactionMetadata (None when the coordinator has no
entry for the id) and the request, and returns either

* an `ErrorCode` to answer at once -- NONE included: a retried EndTxn after the transaction
  completed, or AddPartitions of partitions already in the transaction, succeed with nothing
  to write -- or
* the `TxnTransitMetadata` to write to `__transaction_state`; the metadata's `pending_state`
  is then set, so every other request for the id answers CONCURRENT_TRANSACTIONS until the
  write ends.

The coordinator (coordinator.py, the I/O half) stays a thin loop around them, run on the event
loop with no await between a decision and the start of its write:

    decision = prepare_add_partitions_transit(metadata, producer_id, epoch, partitions, now)
    if isinstance(decision, ErrorCode):
        return decision
    error = await append(transactional_id, coordinator_epoch, decision)
    # on success (same coordinator epoch): metadata.complete_transition_to(decision)
    # on failure: metadata.pending_state = None, and answer the error

Two requests need a second step after their write:

* EndTxn: after PrepareCommit/PrepareAbort is written, `prepare_complete_transaction_transit`
  re-checks the metadata and gives the CompleteCommit/CompleteAbort transit; the client is
  answered NONE at once, and the marker sender writes the transit once every partition has its
  marker. If the
  Prepare* write fails and `EndTxnTransit.is_epoch_fence`, the caller sets
  `metadata.has_failed_epoch_fence` so the next fence does not bump the epoch again.
* InitProducerId in an Ongoing transaction: the decision is a PrepareEpochFence transit, which
  is never written. The caller at once calls `prepare_end_transaction_transit(..., ABORT,
  is_from_client=False)` with the fenced epoch, writes that PrepareAbort, and answers the
  producer CONCURRENT_TRANSACTIONS (or the write's error) so it retries once the abort is done.

Checks made before the metadata is looked up (a null or empty transactional id, the timeout
bound) are `check_transactional_id` and `validate_transaction_timeout_ms`; NOT_COORDINATOR and
COORDINATOR_LOAD_IN_PROGRESS come from the state manager and stay with the caller.

Kafka 3.9 semantics with transaction.version 0 (see metadata.py): EndTxn never bumps the epoch.
Pure logic: no I/O, no clock (callers pass `now_ms`), no asyncio.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from broker.txn.metadata import (
    IllegalStateError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.records import CONTROL_ABORT, CONTROL_COMMIT, NO_PRODUCER_EPOCH

S = TransactionState


class TransactionResult(enum.IntEnum):
    """How a transaction ends; the value is the control record type of its markers."""

    ABORT = CONTROL_ABORT
    COMMIT = CONTROL_COMMIT


class ProducerIdAndEpoch(NamedTuple):
    """The producer id and epoch an InitProducerId names (KIP-360), or that a request carries."""

    producer_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class EndTxnTransit:
    """EndTxn's decision: the Prepare* transit to write, and whether it fences a producer (its
    epoch was bumped in memory here, so a failed write must be remembered on the metadata)."""

    transit: TxnTransitMetadata
    is_epoch_fence: bool


def check_transactional_id(transactional_id: str | None) -> ErrorCode | None:
    """INVALID_REQUEST for a null or empty transactional id (AddPartitionsToTxn, EndTxn, and
    InitProducerId with an empty one; a null one there asks for a non-transactional id)."""
    return ErrorCode.INVALID_REQUEST if not transactional_id else None


def validate_transaction_timeout_ms(txn_timeout_ms: int, transaction_max_timeout_ms: int) -> bool:
    """Kafka's TransactionStateManager.validateTransactionTimeoutMs: positive and at most
    `transaction.max.timeout.ms`; else InitProducerId answers INVALID_TRANSACTION_TIMEOUT."""
    return 0 < txn_timeout_ms <= transaction_max_timeout_ms


def new_transaction_metadata(
    transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int
) -> TransactionMetadata:
    """The metadata InitProducerId creates for an unknown transactional id: Empty, epoch -1
    (the first InitProducerId bumps it to 0), nothing of a previous producer."""
    return TransactionMetadata(
        transactional_id,
        producer_id=producer_id,
        producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=txn_timeout_ms,
        state=S.EMPTY,
        txn_last_update_timestamp=now_ms,
    )


def prepare_init_producer_id_transit(
    metadata: TransactionMetadata,
    transaction_timeout_ms: int,
    expected: ProducerIdAndEpoch | None,
    now_ms: int,
    generate_producer_id: Callable[[], int],
) -> ErrorCode | TxnTransitMetadata:
    """InitProducerId for an existing (or just created) transactional id.

    A new epoch (or, once the epochs are exhausted, a new producer id from
    `generate_producer_id`, called only then) when no transaction is open; PrepareEpochFence
    when one is (see the module docstring); CONCURRENT_TRANSACTIONS while a transition or the
    markers are pending; PRODUCER_FENCED when `expected` names a producer that another has
    replaced. `generate_producer_id` may raise KafkaProtocolError, answered with its code.
    """
    if metadata.pending_transition_in_progress:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if expected is not None and not _is_valid_producer_id(metadata, expected):
        return ErrorCode.PRODUCER_FENCED
    state = metadata.state
    if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
        if metadata.is_producer_epoch_exhausted and (
            expected is None or expected.epoch == metadata.producer_epoch
        ):
            try:
                new_producer_id = generate_producer_id()
            except KafkaProtocolError as e:
                return ErrorCode(e.info.code)  # UNKNOWN_SERVER_ERROR for a code Kafka lacks
            return metadata.prepare_producer_id_rotation(
                new_producer_id, transaction_timeout_ms, now_ms, expected is not None
            )
        return metadata.prepare_increment_producer_epoch(
            transaction_timeout_ms, None if expected is None else expected.epoch, now_ms
        )
    if state == S.ONGOING:
        # This epoch is never returned: the transaction is aborted with it and the client,
        # answered CONCURRENT_TRANSACTIONS, retries and gets the next one (or a new producer id
        # if this fence exhausted the epochs).
        return metadata.prepare_fence_producer_epoch()
    raise _illegal_state(metadata)  # Dead, PrepareEpochFence


def _is_valid_producer_id(metadata: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
    """Whether the producer an InitProducerId names may continue (its epoch is checked later):
    the metadata was just created (a producer recovering from UNKNOWN_PRODUCER_ID), or it names
    the current producer id, or the previous one with an exhausted epoch (a retry of the call
    that rotated the id, whose answer was lost)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or expected.producer_id == metadata.producer_id
        or (
            expected.producer_id == metadata.last_producer_id and is_epoch_exhausted(expected.epoch)
        )
    )


def prepare_add_partitions_transit(
    metadata: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now_ms: int,
) -> ErrorCode | TxnTransitMetadata:
    """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition): Ongoing
    with the partitions added, or the error; NONE when all are already in the transaction."""
    wanted = frozenset(partitions)
    if metadata is None or metadata.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if metadata.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if metadata.pending_transition_in_progress:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if metadata.state == S.ONGOING and wanted <= metadata.topic_partitions:
        return ErrorCode.NONE
    return metadata.prepare_add_partitions(wanted, now_ms)


def prepare_end_transaction_transit(
    metadata: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    result: TransactionResult,
    now_ms: int,
    *,
    is_from_client: bool = True,
) -> ErrorCode | EndTxnTransit:
    """EndTxn (or the coordinator's own abort of a fenced or timed-out transaction,
    `is_from_client=False`): PrepareCommit/PrepareAbort to write, or the answer.

    A client's epoch must be the current one; the coordinator's may be higher (the fencing
    epoch). A retried EndTxn of a transaction that already completed the same way is NONE; one
    still writing its markers is CONCURRENT_TRANSACTIONS; the opposite decision, or no open
    transaction, is INVALID_TXN_STATE.
    """
    if metadata is None or metadata.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # strict equality for clients: an EndTxn from a client never bumps the epoch
    current_epoch = metadata.producer_epoch
    if (is_from_client and producer_epoch != current_epoch) or producer_epoch < current_epoch:
        return ErrorCode.PRODUCER_FENCED
    if metadata.pending_transition_in_progress and metadata.pending_state != S.PREPARE_EPOCH_FENCE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    state = metadata.state
    commit = result == TransactionResult.COMMIT
    if state == S.ONGOING:
        next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        is_epoch_fence = (
            next_state == S.PREPARE_ABORT and metadata.pending_state == S.PREPARE_EPOCH_FENCE
        )
        if is_epoch_fence:
            # make way for PrepareAbort, carrying the fencing epoch (never given to a client)
            metadata.pending_state = None
            metadata.producer_epoch = producer_epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        return EndTxnTransit(metadata.prepare_abort_or_commit(next_state, now_ms), is_epoch_fence)
    if state == S.COMPLETE_COMMIT:
        return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
    if state == S.COMPLETE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE
    if state == S.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
    if state == S.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS
    if state == S.EMPTY:
        return ErrorCode.INVALID_TXN_STATE
    raise _illegal_state(metadata)  # Dead, PrepareEpochFence


def prepare_complete_transaction_transit(
    metadata: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    result: TransactionResult,
    now_ms: int,
) -> ErrorCode | TxnTransitMetadata:
    """After EndTxn's Prepare* record is written (by the same coordinator epoch; else the
    caller answers NOT_COORDINATOR): the Complete* transit the markers lead to, or the error if
    the metadata moved on meanwhile. With the transit, the client is answered NONE and the
    markers are sent; the transit is written when they all are."""
    if metadata.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if metadata.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if metadata.pending_transition_in_progress:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    state = metadata.state
    if state in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return ErrorCode.INVALID_TXN_STATE
    if state == S.PREPARE_COMMIT:
        if result != TransactionResult.COMMIT:
            return ErrorCode.INVALID_TXN_STATE
        return metadata.prepare_complete(now_ms)
    if state == S.PREPARE_ABORT:
        if result != TransactionResult.ABORT:
            return ErrorCode.INVALID_TXN_STATE
        return metadata.prepare_complete(now_ms)
    raise _illegal_state(metadata)  # Dead, PrepareEpochFence


def _illegal_state(metadata: TransactionMetadata) -> IllegalStateError:
    return IllegalStateError(
        f"Found transactionalId {metadata.transactional_id} with state "
        f"{metadata.state.state_name}. This is illegal as we should never have transitioned to "
        "this state."
    )
