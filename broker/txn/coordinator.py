"""TransactionCoordinator: InitProducerId, AddPartitionsToTxn / AddOffsetsToTxn and EndTxn for
transactional ids (Kafka 3.9's TransactionCoordinator.scala, transaction.version 0).

The I/O half around decisions.py: each request looks the id up in the state manager
(NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker does not coordinate it now),
takes a decision in one synchronous step (which claims the metadata's pending state, so a
concurrent request for the id answers CONCURRENT_TRANSACTIONS), writes the transit to
`__transaction_state` with acks=all, and answers only after the write.

* InitProducerId: an unknown id gets a producer id from the controller's blocks and an Empty
  metadata at epoch -1, bumped to 0 by the write; a known one a bumped epoch (or, once the
  epochs are exhausted, a new producer id); KIP-360 callers name their producer id and epoch
  (PRODUCER_FENCED when another producer replaced it). An open transaction is fenced: its
  epoch is bumped and PrepareAbort written with it, and the caller answered
  CONCURRENT_TRANSACTIONS, so it retries once the abort completed: the abort completes when the
  marker sender (markers.py, Kafka's TransactionMarkerChannelManager) has written its markers
  and CompleteAbort; until then every retry is answered CONCURRENT_TRANSACTIONS.
* AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the partitions added.
* EndTxn: PrepareCommit / PrepareAbort written, then the client answered NONE, as Kafka does;
  the transaction is handed to the marker sender with its CompleteCommit / CompleteAbort
  transit (whose pending state makes a retried EndTxn or the next InitProducerId answer
  CONCURRENT_TRANSACTIONS until the sender wrote it).
* A `__transaction_state` partition loaded here with ids in PrepareCommit / PrepareAbort (a
  coordinator that took over between EndTxn and the markers): their markers are sent likewise
  (Kafka's TransactionStateManager load completion).

Threading: none; the awaits are the producer id allocation and the writes, and every decision
is taken again from the metadata as it is after them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from broker.coordinator.steps import run_to_the_end, runs_to_the_end
from broker.txn.decisions import (
    EndTxnTransit,
    ProducerIdAndEpoch,
    TransactionResult,
    new_transaction_metadata,
    prepare_add_partitions_transit,
    prepare_complete_transaction_transit,
    prepare_end_transaction_transit,
    prepare_init_producer_id_transit,
)
from broker.txn.metadata import (
    IllegalStateError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from broker.txn.state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionListing,
    TransactionStateManager,
)
from protocol.errors import ErrorCode, KafkaProtocolError, error_name
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

log = structlog.get_logger("odradek.txn")


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' answer for one id: an error, or the id's metadata."""

    error: int
    metadata: TransactionMetadata | None = None


MarkerSender = Callable[[int, TransactionResult, str, TxnTransitMetadata], None]

ABORT_TIMED_OUT_TIMER = "abort-timed-out-transactions"
EXPIRE_IDS_TIMER = "remove-expired-transactional-ids"


@dataclass(frozen=True, slots=True)
class TransactionTimeouts:
    """Kafka's TransactionConfig intervals (defaults as Kafka 3.9's)."""

    abort_timed_out_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    remove_expired_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms

    @classmethod
    def from_config(cls, config: Any) -> TransactionTimeouts:
        return cls(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   config["transactional.id.expiration.ms"],
                   config["transaction.remove.expired.transaction.cleanup.interval.ms"])


STEP = "transaction coordinator"


class TransactionCoordinator:
    def __init__(
        self,
        state_manager: TransactionStateManager,
        allocate_producer_id: Callable[[], Awaitable[int]],
        *,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        send_markers: MarkerSender | None = None,
        timeouts: TransactionTimeouts | None = None,
        spawn: Callable[[Any], asyncio.Task[Any]] | None = None,
    ) -> None:
        """`allocate_producer_id`: the next producer id, durable before it is returned (raises
        KafkaProtocolError, a StorageError included, with the code to answer). `send_markers(coordinator_epoch, result, id,
        complete_transit)`: the marker sender (markers.py). With `timeouts` and `spawn`, every
        loaded partition aborts its timed-out transactions and removes its expired ids on the
        runtime's timers."""
        self.state_manager = state_manager
        self._allocate_producer_id = allocate_producer_id
        self._clock_ms = clock_ms
        self._send_markers = send_markers
        self._timeouts = timeouts
        self._spawn = spawn
        state_manager.on_partition_loaded = self._on_partition_loaded

    def _on_partition_loaded(self, partition: int, pending: list[TransactionMetadata]) -> None:
        """A partition is this coordinator's now: its Prepare transactions' markers are sent and
        its timers started."""
        self._send_markers_of_loaded(partition, pending)
        if self._timeouts is not None and self._spawn is not None:
            self._schedule_abort_timed_out(partition)
            self._schedule_remove_expired(partition)

    # -- timeouts (Kafka's abortTimedOutTransactions / removeExpiredTransactionalIds) --------------

    def _schedule_abort_timed_out(self, partition: int) -> None:
        assert self._timeouts is not None

        def run() -> None:
            try:
                self.abort_timed_out_transactions(partition)
            finally:
                self._schedule_abort_timed_out(partition)  # not scheduled when the partition resigned

        self.state_manager.runtime.schedule(partition, ABORT_TIMED_OUT_TIMER,
                                            self._timeouts.abort_timed_out_interval_ms, run)

    def _schedule_remove_expired(self, partition: int) -> None:
        assert self._timeouts is not None and self._spawn is not None
        timeouts, spawn = self._timeouts, self._spawn

        async def remove() -> None:
            try:
                await self.state_manager.remove_expired_transactional_ids(
                    partition, self._clock_ms(), timeouts.transactional_id_expiration_ms)
            finally:
                self._schedule_remove_expired(partition)

        self.state_manager.runtime.schedule(partition, EXPIRE_IDS_TIMER, timeouts.remove_expired_interval_ms,
                                            lambda: spawn(remove()))

    def abort_timed_out_transactions(self, partition: int) -> list[str]:
        """Kafka 3.9's abortTimedOutTransactions for one partition: each Ongoing transaction open
        longer than its timeout has its producer's epoch fenced (PrepareEpochFence) and is
        aborted with the fencing epoch, as InitProducerId fences one; the producer's later
        requests with its old epoch are fenced. Returns the ids being aborted."""
        assert self._spawn is not None
        aborting = []
        for transactional_id, producer_id, _epoch in self.state_manager.timed_out_transactions(
                partition, self._clock_ms()):
            found = self.state_manager.get_transaction_state(transactional_id)
            if not isinstance(found, CoordinatorEpochAndTxnMetadata):
                continue
            metadata = found.metadata
            if metadata.producer_id != producer_id or metadata.pending_transition_in_progress:
                continue
            try:
                fence = metadata.prepare_fence_producer_epoch()
            except IllegalStateError:
                log.exception(f"Not aborting {transactional_id}'s timed-out transaction")
                continue
            log.info(f"Aborting {transactional_id}'s transaction: open longer than its timeout of "
                     f"{metadata.txn_timeout_ms} ms", producer_id=producer_id, fencing_epoch=fence.producer_epoch)
            # the abort's decision in the same step as the fence (Kafka calls endTransaction at
            # once), so no request for the id comes between them
            decided = self._decide_end_transaction(transactional_id, fence.producer_id, fence.producer_epoch,
                                                   TransactionResult.ABORT, is_from_client=False)
            if isinstance(decided, int):
                if metadata.pending_state == TransactionState.PREPARE_EPOCH_FENCE:
                    metadata.pending_state = None  # refused: the fence is not left claimed
                log.warning(f"Not aborting {transactional_id}'s timed-out transaction: {error_name(decided)}")
                continue
            aborting.append(transactional_id)
            self._spawn(self._abort_timed_out(transactional_id, producer_id, decided))
        return aborting

    async def _abort_timed_out(self, transactional_id: str, producer_id: int,
                               decided: tuple[int, EndTxnTransit]) -> None:
        error = await self._write_end_transaction(transactional_id, producer_id, TransactionResult.ABORT, *decided)
        (log.info if error == ErrorCode.NONE else log.warning)(
            f"Rollback of {transactional_id}'s timed-out transaction: {error_name(error)}")

    # -- a loaded partition's Prepare transactions ---------------------------------------------------

    def _send_markers_of_loaded(self, partition: int, pending: list[TransactionMetadata]) -> None:
        """A loaded partition's transactions in PrepareCommit / PrepareAbort: their markers sent
        and their Complete* written (Kafka's loadTransactionsForTxnTopicPartition)."""
        if not pending:
            return
        coordinator_epoch = self.state_manager.runtime.epoch(partition)
        if self._send_markers is None or coordinator_epoch is None:
            log.warning(f"{len(pending)} transactions of partition {partition} wait for their markers; none are "
                        "sent (no marker sender, or the partition is not active)")
            return
        for metadata in pending:
            result = (TransactionResult.COMMIT if metadata.state == TransactionState.PREPARE_COMMIT
                      else TransactionResult.ABORT)
            transit = prepare_complete_transaction_transit(metadata, metadata.producer_id, metadata.producer_epoch,
                                                           result, self._clock_ms())
            if isinstance(transit, ErrorCode):
                log.warning(f"Not sending {metadata.transactional_id}'s markers after the load: {transit.name}")
                continue
            log.info(f"Sending {metadata.transactional_id}'s transaction markers for {result.name} after loading "
                     f"partition {partition}", coordinator_epoch=coordinator_epoch)
            self._send_markers(coordinator_epoch, result, metadata.transactional_id, transit)

    def partition_for(self, transactional_id: str) -> int:
        return self.state_manager.partition_for(transactional_id)

    # -- InitProducerId -----------------------------------------------------------------------------

    @runs_to_the_end(STEP)
    async def handle_init_producer_id(
        self, transactional_id: str, transaction_timeout_ms: int, expected: ProducerIdAndEpoch | None
    ) -> InitProducerIdResult:
        """Kafka's handleInitProducerId for a (non-null) transactional id (run to its end: see
        broker/coordinator/steps.py)."""
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not self.state_manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        found = self.state_manager.get_transaction_state(transactional_id)
        if found is None:
            try:
                producer_id = await self._allocate_producer_id()
            except KafkaProtocolError as e:
                return InitProducerIdResult(e.code)
            found = self.state_manager.put_transaction_state_if_not_exists(
                new_transaction_metadata(transactional_id, producer_id, transaction_timeout_ms, self._clock_ms()))
        if not isinstance(found, CoordinatorEpochAndTxnMetadata):
            return InitProducerIdResult(found)
        # a new producer id is needed only when the epochs are exhausted: allocated before the
        # decision, which is then taken on the metadata as it is after the allocation
        rotation_id: int | None = None
        if found.metadata.is_producer_epoch_exhausted:
            try:
                rotation_id = await self._allocate_producer_id()
            except KafkaProtocolError as e:
                return InitProducerIdResult(e.code)
            found = self.state_manager.get_transaction_state(transactional_id)
            if not isinstance(found, CoordinatorEpochAndTxnMetadata):
                return InitProducerIdResult(ErrorCode.NOT_COORDINATOR if found is None else found)

        def rotated() -> int:
            if rotation_id is None:  # the epochs ran out between the checks: retriable
                raise KafkaProtocolError(ErrorCode.CONCURRENT_TRANSACTIONS, "producer id not allocated yet")
            return rotation_id

        coordinator_epoch, metadata = found
        decision = prepare_init_producer_id_transit(
            metadata, transaction_timeout_ms, expected, self._clock_ms(), rotated)
        if isinstance(decision, ErrorCode):
            return InitProducerIdResult(decision)
        if decision.txn_state == TransactionState.PREPARE_EPOCH_FENCE:
            # abort the open transaction with the fencing epoch; the caller retries meanwhile
            error = await self._end_transaction(transactional_id, decision.producer_id, decision.producer_epoch,
                                                TransactionResult.ABORT, is_from_client=False)
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, decision)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        return InitProducerIdResult(ErrorCode.NONE, decision.producer_id, decision.producer_epoch)

    def _existing(self, transactional_id: str) -> int | CoordinatorEpochAndTxnMetadata:
        """The id's metadata for AddPartitionsToTxn and EndTxn, else their answer: INVALID_REQUEST
        for an empty id, INVALID_PRODUCER_ID_MAPPING for an unknown one, NOT_COORDINATOR /
        COORDINATOR_LOAD_IN_PROGRESS."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        found = self.state_manager.get_transaction_state(transactional_id)
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING if found is None else found

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------

    @runs_to_the_end(STEP)
    async def handle_add_partitions_to_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> int:
        """Kafka's handleAddPartitionsToTransaction (the client path): the error for every
        partition of the request (run to its end: see broker/coordinator/steps.py)."""
        found = self._existing(transactional_id)
        if not isinstance(found, CoordinatorEpochAndTxnMetadata):
            return found
        decision = prepare_add_partitions_transit(found.metadata, producer_id, producer_epoch, partitions,
                                                  self._clock_ms())
        if isinstance(decision, ErrorCode):
            return decision
        return await self.state_manager.append_transaction_to_log(transactional_id, found.coordinator_epoch,
                                                                  decision)

    def handle_verify_partitions_in_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ with verify_only,
        KIP-890: a partition leader asks whether a transactional produce's partition is in the
        transaction): NONE per partition in it, TRANSACTION_ABORTABLE per partition not in it, or
        one error for all. Nothing is written; the pending state is not checked (the transit's
        write checks again)."""
        wanted = list(partitions)
        found = self._existing(transactional_id)
        if not isinstance(found, CoordinatorEpochAndTxnMetadata):
            return dict.fromkeys(wanted, found)
        metadata = found.metadata
        if metadata.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif metadata.producer_epoch != producer_epoch:
            error = ErrorCode.PRODUCER_FENCED
        elif metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            return {tp: ErrorCode.NONE if tp in metadata.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE
                    for tp in wanted}
        return dict.fromkeys(wanted, error)

    # -- DescribeTransactions / ListTransactions --------------------------------------------------

    def handle_describe_transactions(self, transactional_id: str) -> TransactionDescription:
        """Kafka 3.9's handleDescribeTransactions: INVALID_REQUEST for an empty id,
        NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker does not coordinate it
        now, TRANSACTIONAL_ID_NOT_FOUND when it has no metadata (or the id is Dead, being
        removed); else the metadata as it is, its partitions included (which are only non-empty
        while a transaction is Ongoing or being completed)."""
        if not transactional_id:
            return TransactionDescription(ErrorCode.INVALID_REQUEST)
        found = self.state_manager.get_transaction_state(transactional_id)
        if found is None:
            return TransactionDescription(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        if not isinstance(found, CoordinatorEpochAndTxnMetadata):
            return TransactionDescription(found)
        if found.metadata.state == TransactionState.DEAD:
            return TransactionDescription(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return TransactionDescription(ErrorCode.NONE, found.metadata)

    def handle_list_transactions(self, producer_ids: set[int], state_names: Iterable[str],
                                 duration_ms: int = -1) -> TransactionListing:
        """Kafka 3.9's handleListTransactions (see TransactionStateManager.list_transaction_states)."""
        return self.state_manager.list_transaction_states(producer_ids, state_names, duration_ms, self._clock_ms())

    # -- EndTxn -------------------------------------------------------------------------------------

    async def handle_end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, result: TransactionResult
    ) -> int:
        """Kafka's handleEndTransaction from a client (run to its end: see broker/coordinator/steps.py)."""
        return await run_to_the_end(self._end_transaction(transactional_id, producer_id, producer_epoch, result,
                                                          is_from_client=True), STEP)

    async def _end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, result: TransactionResult,
        *, is_from_client: bool,
    ) -> int:
        """Kafka's endTransaction: the Prepare* record written, then the markers handed on."""
        decided = self._decide_end_transaction(transactional_id, producer_id, producer_epoch, result,
                                               is_from_client=is_from_client)
        if isinstance(decided, int):
            return decided
        return await self._write_end_transaction(transactional_id, producer_id, result, *decided)

    def _decide_end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, result: TransactionResult,
        *, is_from_client: bool,
    ) -> int | tuple[CoordinatorEpochAndTxnMetadata, EndTxnTransit]:
        """endTransaction's synchronous half: the error to answer, or the id's metadata (with the
        coordinator epoch it was read at) and the Prepare* transit whose pending state is now
        claimed."""
        found = self._existing(transactional_id)
        if not isinstance(found, CoordinatorEpochAndTxnMetadata):
            return found
        decision = prepare_end_transaction_transit(found.metadata, producer_id, producer_epoch, result,
                                                   self._clock_ms(), is_from_client=is_from_client)
        if isinstance(decision, ErrorCode):
            return decision
        assert isinstance(decision, EndTxnTransit)
        return found, decision

    async def _write_end_transaction(
        self, transactional_id: str, producer_id: int, result: TransactionResult,
        before: CoordinatorEpochAndTxnMetadata, decision: EndTxnTransit,
    ) -> int:
        """endTransaction's write of the Prepare* transit, then the markers handed on.

        Kafka compares coordinator epochs after the write to tell whether the partition was
        reloaded meanwhile (its epoch changes only with a load there). Here the runtime also
        takes a new leader epoch of a partition this broker kept leading (the ISR shrink of a
        follower's controlled shutdown) without a reload: the metadata stays, its coordinator
        epoch moves on. So "reloaded" is the metadata object being another one; a mere epoch
        change after a successful write must still hand the markers on (with the epoch it is
        now), or nobody would ever send them -- no load follows to resend them -- and the
        producer's EndTxn retries would be answered CONCURRENT_TRANSACTIONS for ever."""
        coordinator_epoch = before.coordinator_epoch
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch,
                                                                   decision.transit)
        after = self.state_manager.get_transaction_state(transactional_id)
        same = isinstance(after, CoordinatorEpochAndTxnMetadata) and after.metadata is before.metadata
        if error != ErrorCode.NONE:
            if decision.is_epoch_fence and same:
                before.metadata.has_failed_epoch_fence = True  # the next fence reuses the bumped epoch
            log.info(f"Aborting sending of transaction markers and returning {error} error to client for "
                     f"{transactional_id}'s EndTransaction request of {result.name}, since appending "
                     f"{decision.transit.txn_state.state_name} to transaction log with coordinator epoch "
                     f"{coordinator_epoch} failed")
            return error
        if not same:
            log.info(f"Not sending {transactional_id}'s transaction markers after appending "
                     f"{decision.transit.txn_state.state_name}: the partition was reloaded meanwhile (the new "
                     "coordinator sends them)", coordinator_epoch=coordinator_epoch)
            return ErrorCode.NOT_COORDINATOR
        now = after
        assert isinstance(now, CoordinatorEpochAndTxnMetadata)
        if self._send_markers is None:
            # unit tests of the coordinator without a sender: the transaction stays in its Prepare state
            log.warning(f"{transactional_id}'s transaction is {decision.transit.txn_state.state_name}; its markers "
                        "are not sent (no marker sender)", producer_id=producer_id)
            return ErrorCode.NONE
        complete = prepare_complete_transaction_transit(now.metadata, decision.transit.producer_id,
                                                        decision.transit.producer_epoch, result, self._clock_ms())
        if isinstance(complete, ErrorCode):
            log.info(f"Aborting sending of transaction markers after appending {result.name} to the transaction log "
                     f"and returning {error_name(complete)} error to client for {transactional_id}'s EndTransaction "
                     "request", state=now.metadata.state.state_name,
                     pending=now.metadata.pending_state.state_name if now.metadata.pending_state else None)
            return complete
        self._send_markers(now.coordinator_epoch, result, transactional_id, complete)
        return ErrorCode.NONE
