"""A transactional id's state and its state machine (Kafka 3.9's TransactionMetadata.scala).

The coordinator keeps one `TransactionMetadata` per transactional id. A change is two steps,
because it only counts once the `__transaction_state` record saying so is replicated:

1. a `prepare_*` method checks the transition, records the target state as `pending_state`
   (which blocks every other transition until this one ends) and returns a `TxnTransitMetadata`,
   the immutable picture of the metadata after the change, which is what gets written;
2. after the write succeeds, `complete_transition_to(transit)` copies it in, checking that it
   is still the change that was prepared; after the write fails, the caller clears
   `pending_state` (Kafka's TransactionStateManager does the same) and nothing else changed.

States and their valid previous states (a transition to X is legal only from X's set):

    Empty             <- Empty, CompleteCommit, CompleteAbort        (InitProducerId)
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitions/Offsets)
    PrepareCommit     <- Ongoing                                       (EndTxn commit)
    PrepareAbort      <- Ongoing, PrepareEpochFence                    (EndTxn abort, fencing)
    CompleteCommit    <- PrepareCommit                                 (markers written)
    CompleteAbort     <- PrepareAbort                                  (markers written)
    Dead              <- Empty, CompleteAbort, CompleteCommit          (id expiration)
    PrepareEpochFence <- Ongoing                     (InitProducerId or a timeout fences it)

PrepareEpochFence is only ever a pending state: the coordinator clears it and writes
PrepareAbort with the bumped epoch instead, so it is never completed nor written.

This is transaction.version 0, what every Kafka 3.9 cluster (and every ZooKeeper-mode cluster)
runs: a commit or abort does not bump the producer epoch (KIP-890 part 2's TV2 does, from 4.0),
the epoch is bumped only by InitProducerId and by fencing, and the log value carries no
previous/next producer id, so `last_producer_id` and `last_producer_epoch` live in memory only
and a coordinator that loads the log starts without them (a KIP-360 retry across a coordinator
move is then fenced, as in Kafka).

Pure logic: no I/O, no clock (callers pass timestamps), no asyncio. Not thread-safe; the
coordinator mutates a metadata only on the event loop, each change in one synchronous step.
Kafka's IllegalStateException is `IllegalStateError`, its IllegalArgumentException `ValueError`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

TopicPartition = tuple[str, int]

SHORT_MAX = 32767  # Java's Short.MaxValue: the largest producer epoch


class IllegalStateError(Exception):
    """A transition the state machine forbids: a coordinator bug, never a client's error (Kafka
    answers clients with error codes before it gets here, and logs these as fatal)."""


class TransactionState(enum.IntEnum):
    """A transaction's state; the value is the id stored in `__transaction_state`."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name ("PrepareCommit"), which DescribeTransactions and ListTransactions show."""
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire
        (`transactional.id.expiration.ms`): only when no transaction is in flight."""
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        """The state of a log value's status byte; an unknown id is a corrupt or future record."""
        try:
            return cls(state_id)
        except ValueError:
            raise IllegalStateError(
                f"Unknown transaction state id {state_id} from the transaction status message"
            ) from None

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state called `name` in Kafka's API (ListTransactions' state filter), or None."""
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No epoch above Short.MaxValue - 1 is handed to a client, so the coordinator can always
    fence the current producer by bumping once more."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The metadata a prepared transition leads to: what is written to `__transaction_state`,
    then copied into the TransactionMetadata by `complete_transition_to`."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


class TransactionMetadata:
    """The coordinator's state of one transactional id.

    `txn_start_timestamp` is when the first partition of the current transaction was added (-1
    when none is open); `txn_last_update_timestamp` is bumped by every change and drives
    transactional id expiration. `has_failed_epoch_fence` records that writing a fencing epoch
    bump failed, so the next fence reuses that epoch instead of bumping again (the bumped epoch
    was never handed to a client).
    """

    __slots__ = (
        "has_failed_epoch_fence",
        "last_producer_epoch",
        "last_producer_id",
        "pending_state",
        "producer_epoch",
        "producer_id",
        "state",
        "topic_partitions",
        "transactional_id",
        "txn_last_update_timestamp",
        "txn_start_timestamp",
        "txn_timeout_ms",
    )

    def __init__(
        self,
        transactional_id: str,
        *,
        producer_id: int,
        last_producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        txn_timeout_ms: int,
        state: TransactionState = TransactionState.EMPTY,
        topic_partitions: set[TopicPartition] | None = None,
        txn_start_timestamp: int = -1,
        txn_last_update_timestamp: int,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        # the state a prepared transition leads to, until it completes or its write fails
        self.pending_state: TransactionState | None = None
        self.has_failed_epoch_fence = False

    # --- bookkeeping -------------------------------------------------------------------------

    def add_partitions(self, partitions: set[TopicPartition] | frozenset[TopicPartition]) -> None:
        self.topic_partitions |= partitions

    def remove_partition(self, topic_partition: TopicPartition) -> None:
        """Drop a partition whose marker has been written; only while the markers are sent."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalStateError(
                f"Transaction metadata's current state is {self.state.state_name}, and its pending "
                f"state is {self._pending_name()} while trying to remove partitions whose txn "
                "marker has been sent, this is not expected"
            )
        self.topic_partitions.discard(topic_partition)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _has_pending_transaction(self) -> bool:
        return self.state in (
            TransactionState.ONGOING,
            TransactionState.PREPARE_ABORT,
            TransactionState.PREPARE_COMMIT,
        )

    # --- preparing transitions ---------------------------------------------------------------

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current metadata as a transit, without claiming a pending state (Kafka uses it to
        resend markers after a load, where a later abort sets its own pending state)."""
        return TxnTransitMetadata(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with the epoch bumped, to fence the producer of an open
        transaction before aborting it (InitProducerId from a new producer, or a timeout)."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalStateError(
                "Cannot fence producer with epoch equal to Short.MaxValue since this would overflow"
            )
        # a fence whose write failed already bumped the epoch, and never returned it to a client
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(
            TransactionState.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp: int
    ) -> TxnTransitMetadata | ErrorCode:
        """-> Empty with the next epoch, for InitProducerId (KIP-360 when the producer gives its
        current epoch); PRODUCER_FENCED when the given epoch is neither the current nor the last
        one (another producer has been initialised since)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalStateError(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}"
            )
        current = self.producer_epoch
        bumped = current + 1
        if expected_producer_epoch is None:
            # a new producer: bump, and forget the last epoch (an old one can no longer retry)
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif current == NO_PRODUCER_EPOCH or expected_producer_epoch == current:
            # the current producer recovering from an error (or a just-created id): bump, and
            # remember the epoch it had so a retry of this call is recognised
            next_epoch, last_epoch = bumped, current
        elif expected_producer_epoch == self.last_producer_epoch:
            # a retry of a bump that succeeded: answer the same epoch again
            next_epoch, last_epoch = current, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare_transition_to(
            TransactionState.EMPTY,
            self.producer_id,
            next_epoch,
            last_epoch,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp,
        )

    def prepare_producer_id_rotation(
        self,
        new_producer_id: int,
        new_txn_timeout_ms: int,
        update_timestamp: int,
        record_last_epoch: bool,
    ) -> TxnTransitMetadata:
        """-> Empty with a new producer id at epoch 0, once the epochs of the current id are
        exhausted. `record_last_epoch` (the producer gave its epoch) keeps the old epoch so a
        retry of this call can be recognised by `last_producer_id`."""
        if self._has_pending_transaction():
            raise IllegalStateError(
                "Cannot rotate producer ids while a transaction is still pending"
            )
        return self._prepare_transition_to(
            TransactionState.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp,
        )

    def prepare_add_partitions(
        self,
        added_topic_partitions: set[TopicPartition] | frozenset[TopicPartition],
        update_timestamp: int,
    ) -> TxnTransitMetadata:
        """-> Ongoing with the partitions added; the first partition starts the transaction."""
        if self.state in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_ABORT,
            TransactionState.COMPLETE_COMMIT,
        ):
            new_txn_start_timestamp = update_timestamp
        else:
            new_txn_start_timestamp = self.txn_start_timestamp
        return self._prepare_same_producer(
            TransactionState.ONGOING,
            frozenset(self.topic_partitions | set(added_topic_partitions)),
            new_txn_start_timestamp,
            update_timestamp,
        )

    def prepare_abort_or_commit(
        self, new_state: TransactionState, update_timestamp: int
    ) -> TxnTransitMetadata:
        """-> PrepareCommit or PrepareAbort (EndTxn): the decision that the markers will carry."""
        return self._prepare_same_producer(
            new_state, frozenset(self.topic_partitions), self.txn_start_timestamp, update_timestamp
        )

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort once every marker is
        written; the partitions are dropped."""
        if self.state == TransactionState.PREPARE_COMMIT:
            new_state = TransactionState.COMPLETE_COMMIT
        else:
            new_state = TransactionState.COMPLETE_ABORT
        # the Prepare* record (with any fencing epoch) is in the log: a fence did not fail
        self.has_failed_epoch_fence = False
        return self._prepare_same_producer(
            new_state, frozenset(), self.txn_start_timestamp, update_timestamp
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """-> Dead, for an expired transactional id: written as a tombstone, then dropped from
        the cache (never completed)."""
        return self._prepare_same_producer(
            TransactionState.DEAD,
            frozenset(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def _prepare_same_producer(
        self,
        new_state: TransactionState,
        new_topic_partitions: frozenset[TopicPartition],
        new_txn_start_timestamp: int,
        update_timestamp: int,
    ) -> TxnTransitMetadata:
        """A transition that keeps the producer (id, epochs) and the timeout: every one but
        InitProducerId's and the fence's."""
        return self._prepare_transition_to(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            new_topic_partitions,
            new_txn_start_timestamp,
            update_timestamp,
        )

    def _prepare_transition_to(
        self,
        new_state: TransactionState,
        new_producer_id: int,
        new_epoch: int,
        new_last_epoch: int,
        new_txn_timeout_ms: int,
        new_topic_partitions: frozenset[TopicPartition],
        new_txn_start_timestamp: int,
        update_timestamp: int,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalStateError(
                f"Preparing transaction state transition to {new_state.state_name} while it "
                f"already a pending state {self.pending_state.state_name}"
            )
        if new_producer_id < 0:
            raise ValueError(f"Illegal new producer id {new_producer_id}")
        # a just-created id keeps epoch -1 until InitProducerId completes, and may expire so
        if new_state != TransactionState.DEAD and new_epoch < 0:
            raise ValueError(f"Illegal new producer epoch {new_epoch}")
        if self.state not in new_state.valid_previous_states:
            raise IllegalStateError(
                f"Preparing transaction state transition to {new_state.state_name} failed since "
                f"the target state {new_state.state_name} is not a valid previous state of the "
                f"current state {self.state.state_name}"
            )
        transit = TxnTransitMetadata(
            new_producer_id,
            self.producer_id,
            new_epoch,
            new_last_epoch,
            new_txn_timeout_ms,
            new_state,
            new_topic_partitions,
            new_txn_start_timestamp,
            update_timestamp,
        )
        self.pending_state = new_state
        return transit

    # --- completing --------------------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Adopt `transit` after its record was written and replicated.

        Valid only if the target is the pending state and the transit is the change that state
        allows: the same epoch (or, for Empty, the next one or 0 with a new producer id), the
        same timeout and start time where they must not change, no partition dropped by
        AddPartitions. Anything else means the metadata changed under the write: a bug.
        """
        to_state = self.pending_state
        if to_state is None:
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id} completing transaction state transition "
                "while it does not have a pending state"
            )
        if to_state != transit.txn_state:
            self._throw_state_transition_failure(transit)
        S = TransactionState
        if to_state == S.EMPTY:  # from InitProducerId
            if (
                (
                    self.producer_epoch != transit.producer_epoch
                    and not self._valid_producer_epoch_bump(transit)
                )
                or transit.topic_partitions
                or transit.txn_start_timestamp != -1
            ):
                self._throw_state_transition_failure(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state == S.ONGOING:  # from AddPartitions
            if (
                not self._valid_producer_epoch(transit)
                or not self.topic_partitions <= transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._throw_state_transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.add_partitions(transit.topic_partitions)
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # from EndTxn
            if (
                not self._valid_producer_epoch(transit)
                or self.topic_partitions != transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or self.txn_start_timestamp != transit.txn_start_timestamp
            ):
                self._throw_state_transition_failure(transit)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # from the markers
            if (
                not self._valid_producer_epoch(transit)
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp == -1
            ):
                self._throw_state_transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        elif to_state == S.PREPARE_EPOCH_FENCE:
            # the fence's pending state is replaced by PrepareAbort before anything is written
            self._throw_state_transition_failure(transit)
        else:  # Dead: an expired id is removed from the cache, never completed
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id} is trying to complete a transition to "
                f"{to_state.state_name}. This means that the transactionalId was being expired, "
                "and the only acceptable completion of this operation is to remove the "
                "transaction metadata from the cache, not to persist the "
                f"{to_state.state_name} in the log."
            )
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _throw_state_transition_failure(self, transit: TxnTransitMetadata) -> None:
        raise IllegalStateError(
            f"TransactionalId {self.transactional_id} failed transition to state {transit} due to "
            f"unexpected metadata (current {self!r})"
        )

    def _pending_name(self) -> str:
        return "None" if self.pending_state is None else self.pending_state.state_name

    # --- identity ----------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        """Kafka's equality: the persisted fields and the epochs; not the pending state, the
        failed-fence flag nor `last_producer_id`."""
        if not isinstance(other, TransactionMetadata):
            return NotImplemented
        return (
            self.transactional_id == other.transactional_id
            and self.producer_id == other.producer_id
            and self.producer_epoch == other.producer_epoch
            and self.last_producer_epoch == other.last_producer_epoch
            and self.txn_timeout_ms == other.txn_timeout_ms
            and self.state == other.state
            and self.topic_partitions == other.topic_partitions
            and self.txn_start_timestamp == other.txn_start_timestamp
            and self.txn_last_update_timestamp == other.txn_last_update_timestamp
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata(transactional_id={self.transactional_id!r}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"txn_timeout_ms={self.txn_timeout_ms}, state={self.state.state_name}, "
            f"pending_state={self._pending_name()}, "
            f"topic_partitions={sorted(self.topic_partitions)}, "
            f"txn_start_timestamp={self.txn_start_timestamp}, "
            f"txn_last_update_timestamp={self.txn_last_update_timestamp})"
        )
