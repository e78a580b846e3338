"""TransactionStateManager: the transaction coordinator's state and its `__transaction_state`
topic (Kafka 3.9's TransactionStateManager.scala, ZooKeeper mode), on the coordinator runtime.

* The topic: `transaction.state.log.num.partitions` partitions, replication factor
  `transaction.state.log.replication.factor` capped by the live brokers, and Kafka's topic
  configs (TransactionLog's transactionTopicConfigs): compacted, uncompressed, no unclean
  election, `min.insync.replicas` = `transaction.state.log.min.isr`, `segment.bytes` =
  `transaction.state.log.segment.bytes`. Created on first use (FindCoordinator), as Kafka does.
  With the default min.isr of 2, a single broker cannot write it (NOT_ENOUGH_REPLICAS, answered
  COORDINATOR_NOT_AVAILABLE), exactly as Kafka: a one-broker setup sets
  transaction.state.log.min.isr=1, as Kafka's example server.properties does.
* One `TransactionShard` per partition this broker coordinates, rebuilt by replaying the
  partition's records (a TransactionLogValue sets the id's metadata, a tombstone removes it; a
  key of another version is skipped, as Kafka's loader does), dropped on resignation.
* The coordinator epoch of a partition is its leader epoch when it was taken
  (`CoordinatorRuntime.epoch`); a write is applied to the metadata only when, after its acks,
  the partition is still this broker's at that epoch and the id's metadata is still the one the
  write was computed from (Kafka's appendTransactionToLog callback), else NOT_COORDINATOR.

Threading: none; everything on the event loop. The only await is the write's acks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from broker.coordinator import CoordinatorRuntime, InternalTopic
from broker.txn.metadata import (
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from broker.txn.transaction_log import read_txn_record_value, value_to_bytes
from protocol.coordinator_records import (
    UnknownVersionError,
    decode_transaction_log_key,
    transaction_log_key,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager
    from controller.interface import Controller

log = structlog.get_logger("odradek.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"


def transaction_topic(config: Any) -> InternalTopic:
    """`__transaction_state` as Kafka creates it (TransactionStateManager.transactionTopicConfigs)."""
    return InternalTopic(
        TRANSACTION_STATE_TOPIC,
        config["transaction.state.log.num.partitions"],
        config["transaction.state.log.replication.factor"],
        {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        },
    )


class TransactionShard:
    """The transactional ids of one `__transaction_state` partition (Kafka's
    transactionMetadataCache entry for the partition)."""

    def __init__(self, partition: int, on_loaded: Callable[[TransactionShard], None] | None = None) -> None:
        self.partition = partition
        self.transactions: dict[str, TransactionMetadata] = {}
        self._on_loaded = on_loaded

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record in offset order: the id's latest metadata, or its removal (tombstone). A
        key of another version is skipped (Kafka's readTxnRecordKey answers Left(version)); an
        unreadable value raises and the runtime logs it, as Kafka's loader fails on it."""
        try:
            transactional_id = decode_transaction_log_key(key)
        except UnknownVersionError:
            return
        metadata = read_txn_record_value(transactional_id, value)
        if metadata is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = metadata

    def on_loaded(self) -> None:
        """The partition is active here: the state manager's hook resends the markers of the
        transactions found in PrepareCommit / PrepareAbort (Kafka's load completion)."""
        if self._on_loaded is not None:
            self._on_loaded(self)

    def pending_markers(self) -> list[TransactionMetadata]:
        """The transactions in PrepareCommit / PrepareAbort with no transition in progress."""
        return [m for m in self.transactions.values()
                if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
                and not m.pending_transition_in_progress]

    def on_unloaded(self) -> None:
        """Kafka's removeTransactionsForTxnTopicPartition: the ids are the new leader's now."""
        if self.transactions:
            log.info(f"Unloaded transaction metadata of {len(self.transactions)} transactional ids from "
                     f"{TRANSACTION_STATE_TOPIC}-{self.partition}")
        self.transactions.clear()


class CoordinatorEpochAndTxnMetadata(NamedTuple):
    """Kafka's CoordinatorEpochAndTxnMetadata: an id's metadata and the epoch it was read at."""

    coordinator_epoch: int
    metadata: TransactionMetadata


class TransactionListing(NamedTuple):
    """ListTransactions' answer from the coordinator: an error, the state filters that name no
    state, and the transactions listed."""

    error: int
    unknown_state_filters: Sequence[str] = ()
    transactions: Sequence[TransactionMetadata] = ()


class TransactionStateManager:
    def __init__(
        self,
        config: Any,
        *,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        controller: Controller | None,
        spawn: Callable[[Any], asyncio.Task[Any]],
        elections: bool,
    ) -> None:
        self.transaction_max_timeout_ms: int = config["transaction.max.timeout.ms"]
        # the coordinator's hook for a loaded partition (its Prepare transactions, its timers)
        self.on_partition_loaded: Callable[[int, list[TransactionMetadata]], None] | None = None
        self.runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
            transaction_topic(config), lambda p: TransactionShard(p, self._shard_loaded), replica_manager=replica_manager,
            metadata_cache=metadata_cache, controller=controller, spawn=spawn, elections=elections,
            what="transaction metadata", write_timeout_ms=config["request.timeout.ms"])

    def _shard_loaded(self, shard: TransactionShard) -> None:
        pending = shard.pending_markers()
        if self.on_partition_loaded is None:
            if not pending:
                return
            log.warning(f"{len(pending)} transactions of {TRANSACTION_STATE_TOPIC}-{shard.partition} wait for "
                        "their markers and no marker sender is set",
                        transactional_ids=[m.transactional_id for m in pending[:10]])
            return
        self.on_partition_loaded(shard.partition, pending)

    async def startup(self, leadership_listeners: list[Any]) -> int:
        """Start the runtime, load the partitions led here (a single node, before clients
        connect) and follow the leadership changes of `__transaction_state` partitions
        (ZooKeeper mode: LeaderAndIsr, StopReplica, a failed log dir), as the group
        coordinator does. Returns the records replayed."""
        self.runtime.start()
        replayed = await self.runtime.load_led_partitions()
        leadership_listeners.append(self.runtime.on_leadership_change)
        return replayed

    async def shutdown(self) -> None:
        await self.runtime.shutdown()

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.transaction_max_timeout_ms

    def _owned(self, transactional_id: str) -> int | tuple[int, TransactionShard]:
        """The coordinator epoch and shard of the id's partition, or why this broker does not
        coordinate the id now (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS)."""
        error = self.runtime.error_for(transactional_id)
        if error is not None:
            return error
        partition = self.partition_for(transactional_id)
        shard = self.runtime.shard(partition)
        epoch = self.runtime.epoch(partition)
        return ErrorCode.NOT_COORDINATOR if shard is None or epoch is None else (epoch, shard)

    def get_transaction_state(self, transactional_id: str) -> int | CoordinatorEpochAndTxnMetadata | None:
        """Kafka's getTransactionState: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this
        broker does not coordinate the id now, None when it has no metadata for it."""
        owned = self._owned(transactional_id)
        if not isinstance(owned, tuple):
            return owned
        epoch, shard = owned
        metadata = shard.transactions.get(transactional_id)
        return None if metadata is None else CoordinatorEpochAndTxnMetadata(epoch, metadata)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata) -> int | CoordinatorEpochAndTxnMetadata:
        """The id's metadata, `metadata` if it had none (Kafka's putTransactionStateIfNotExists;
        another request may have created it while a producer id was allocated)."""
        owned = self._owned(metadata.transactional_id)
        if not isinstance(owned, tuple):
            return owned
        epoch, shard = owned
        return CoordinatorEpochAndTxnMetadata(epoch, shard.transactions.setdefault(metadata.transactional_id, metadata))

    def list_transaction_states(
        self, producer_ids: set[int], state_names: Iterable[str], duration_ms: int, now_ms: int
    ) -> TransactionListing:
        """Kafka 3.9's listTransactionStates: COORDINATOR_LOAD_IN_PROGRESS while any partition
        loads here; else every id of the loaded partitions but the Dead ones (being removed),
        narrowed by producer id, by state (a name that is not a state is reported as unknown and
        matches nothing) and, with `duration_ms` >= 0 (KIP-994), to transactions started more
        than `duration_ms` before `now_ms`."""
        if self.runtime.loading_partitions:
            return TransactionListing(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        names = list(state_names)
        states = {s for s in map(TransactionState.from_name, names) if s is not None}
        unknown = [n for n in names if TransactionState.from_name(n) is None]
        listed = []
        for partition in self.runtime.active_partitions:
            shard = self.runtime.shard(partition)
            for metadata in shard.transactions.values() if shard is not None else ():
                if (metadata.state == TransactionState.DEAD
                        or (producer_ids and metadata.producer_id not in producer_ids)
                        or (names and metadata.state not in states)
                        or (duration_ms >= 0 and now_ms - metadata.txn_start_timestamp <= duration_ms)):
                    continue
                listed.append(metadata)
        return TransactionListing(ErrorCode.NONE, unknown, listed)

    def timed_out_transactions(self, partition: int, now_ms: int) -> list[tuple[str, int, int]]:
        """Kafka's timedOutTransactions for one loaded partition: (id, producer id, epoch) of
        each Ongoing transaction with no transition pending that started more than its
        transaction timeout ago."""
        shard = self.runtime.shard(partition)
        if shard is None:
            return []
        return [(t, m.producer_id, m.producer_epoch) for t, m in shard.transactions.items()
                if m.state == TransactionState.ONGOING and not m.pending_transition_in_progress
                and m.txn_start_timestamp + m.txn_timeout_ms < now_ms]

    async def remove_expired_transactional_ids(self, partition: int, now_ms: int, expiration_ms: int) -> int:
        """Kafka's removeExpiredTransactionalIds for one loaded partition: every id in Empty,
        CompleteCommit or CompleteAbort, with no transition pending and no update for
        `expiration_ms`, goes to Dead (pending while its tombstone is written, so its requests
        answer CONCURRENT_TRANSACTIONS) and is dropped once the tombstones are written with
        acks=all, if its metadata is still the one expired. Returns the ids removed."""
        shard = self.runtime.shard(partition)
        if shard is None:
            return 0
        expired: list[tuple[str, TransactionMetadata]] = []
        for transactional_id, metadata in shard.transactions.items():
            if (metadata.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                   TransactionState.COMPLETE_ABORT)
                    and not metadata.pending_transition_in_progress
                    and metadata.txn_last_update_timestamp <= now_ms - expiration_ms):
                metadata.prepare_dead()
                expired.append((transactional_id, metadata))
        if not expired:
            return 0
        error = await self.runtime.append(partition, [(transaction_log_key(t), None) for t, _ in expired])
        removed = 0
        for transactional_id, metadata in expired:
            if (error == ErrorCode.NONE and self.runtime.shard(partition) is shard
                    and shard.transactions.get(transactional_id) is metadata
                    and metadata.pending_state == TransactionState.DEAD):
                del shard.transactions[transactional_id]
                removed += 1
            metadata.pending_state = None
        log.info(f"Removed {removed} expired transactional ids from {TRANSACTION_STATE_TOPIC}-{partition}",
                 error=error, expired=len(expired))
        return removed

    async def append_transaction_to_log(
        self, transactional_id: str, coordinator_epoch: int, transit: TxnTransitMetadata
    ) -> int:
        """Write `transit` (whose pending state the caller's decision set) with acks=all; on
        success adopt it (`complete_transition_to`), on failure clear the pending state -- both
        only when the id's metadata is still the one the write was computed from. Returns the
        coordinator's error (see CoordinatorRuntime.append: NOT_COORDINATOR when the partition
        resigned, or resigned and was elected again, while the write waited; its metadata was
        then reloaded from the log and is not this write's to change).

        A new leader epoch of a partition this broker kept leading keeps its metadata (the
        runtime keeps the context), so `coordinator_epoch` -- read with the metadata in the same
        step as the decision -- only names the epoch in the log line."""
        partition = self.partition_for(transactional_id)
        before = self.get_transaction_state(transactional_id)
        if not isinstance(before, CoordinatorEpochAndTxnMetadata):
            return ErrorCode.NOT_COORDINATOR
        metadata = before.metadata
        error = await self.runtime.append(
            partition, [(transaction_log_key(transactional_id), value_to_bytes(transit))])
        after = self.get_transaction_state(transactional_id)
        if not isinstance(after, CoordinatorEpochAndTxnMetadata) or after.metadata is not metadata:
            log.info(f"The coordinator of {transactional_id} (epoch {coordinator_epoch}) changed while its "
                     f"{transit.txn_state.state_name} record was written", error=error)
            return ErrorCode.NOT_COORDINATOR if error == ErrorCode.NONE else error
        if error != ErrorCode.NONE:
            log.info(f"Appending {transactional_id}'s transition to {transit.txn_state.state_name} with "
                     f"coordinator epoch {coordinator_epoch} failed", error=error)
            metadata.pending_state = None
            return error
        try:
            metadata.complete_transition_to(transit)
        except IllegalStateError:
            log.exception(f"Completing {transactional_id}'s transition failed after its record was written")
            metadata.pending_state = None
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NONE
