"""The leader's half of KIP-890 part 1 for Produce (Kafka 3.9's ReplicaManager.handleProduceAppend /
maybeStartTransactionVerificationForPartitions, transaction.partition.verification.enable=true).

For a Produce with a transactional id, before anything is appended:

* The transactional batches' producer: more than one (producer id, epoch) in one request is
  INVALID_PRODUCER_ID_MAPPING for every partition (Kafka throws InvalidPidMappingException and
  answers the whole request with it).
* Per partition with a transactional batch, the partition (as leader) gives the producer's
  verification guard: none needed when the producer's transaction already has data there (the
  hot path: one dict lookup, no request), else a guard from its verification entry.
* The partitions that need one are verified with the transaction coordinator in one
  AddPartitionsToTxn v4+ verify_only request (AddPartitionsToTxnManager); a partition the
  coordinator did not confirm is not appended and gets Kafka's answer: INVALID_TXN_STATE with
  "Partition was not added to the transaction"; the coordinator's retriable errors
  (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) as NOT_ENOUGH_REPLICAS "Unable to verify the
  partition has been added to the transaction. Underlying error: ..." (older clients retry it
  without a metadata refresh); others (INVALID_PRODUCER_EPOCH for a fenced producer,
  INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE for v11) as they are, without a message.
* The confirmed partitions append carrying their guard; the log appends a transactional batch of
  a producer without an ongoing transaction only with the guard its entry holds
  (storage.verification_guard), so a confirmation that an abort overtook is refused there.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from protocol.errors import ErrorCode, KafkaProtocolError, error_name
from protocol.records import ATTRIBUTES, MAGIC, NO_SEQUENCE, TRANSACTIONAL_MASK
from storage.verification_guard import SENTINEL, VerificationGuard

if TYPE_CHECKING:
    from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
    from broker.partition import Partition

TopicPartition = tuple[str, int]

_PRODUCER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
# the first request versions whose clients handle TRANSACTION_ABORTABLE (Kafka's
# produceRequestVersionToTransactionSupportedOperation / txnOffsetCommitRequestVersionTo...:
# genericErrorSupported)
FIRST_GENERIC_ERROR_PRODUCE_VERSION = 11
FIRST_GENERIC_ERROR_TXN_OFFSET_COMMIT_VERSION = 4
_PRODUCER_ID_OFFSET = 43  # in a RecordBatch v2 header

# Kafka's ReplicaManager: coordinator errors an older producer might not retry, told as one it does
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
})


class TransactionalBatch(NamedTuple):
    producer_id: int
    producer_epoch: int
    base_sequence: int


def transactional_batch(records: Any) -> TransactionalBatch | None:
    """The producer of the first batch of `records` if it is a transactional v2 batch (a Produce
    v3+ carries one batch per partition, checked before this)."""
    if records is None or len(records) < _PRODUCER_ID_OFFSET + _PRODUCER.size or records[MAGIC] != 2:
        return None
    if not records[ATTRIBUTES + 1] & TRANSACTIONAL_MASK:
        return None
    return TransactionalBatch(*_PRODUCER.unpack_from(records, _PRODUCER_ID_OFFSET))


class VerificationFailure(NamedTuple):
    error: int
    message: str | None


def failure_for_produce(error: int) -> VerificationFailure:
    """A verification error as the Produce answers it (Kafka's postVerificationCallback)."""
    if error == ErrorCode.INVALID_TXN_STATE:
        return VerificationFailure(error, "Partition was not added to the transaction")
    if error in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return VerificationFailure(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"Unable to verify the partition has been added to the transaction. Underlying error: {error_name(error)}")
    return VerificationFailure(error, None)


async def verify_transactional_produce(
    entries: Iterable[tuple[TopicPartition, Any]],
    transactional_id: str,
    produce_version: int,
    partition_of: Any,
    manager: AddPartitionsToTxnManager,
) -> tuple[dict[TopicPartition, VerificationFailure], dict[TopicPartition, VerificationGuard]]:
    """The partitions refused before the append (with their answer) and the guards the others'
    appends carry (a partition absent from both needs none). `partition_of(topic, partition)`
    is the hosted Partition or raises KafkaProtocolError (Kafka's getPartitionOrException)."""
    entries = list(entries)
    batches: dict[TopicPartition, TransactionalBatch] = {}
    for tp, records in entries:
        batch = transactional_batch(records)
        if batch is not None:
            batches[tp] = batch
    if not batches:
        return {}, {}
    producers = {(b.producer_id, b.producer_epoch) for b in batches.values()}
    if len(producers) > 1:
        refused = VerificationFailure(ErrorCode.INVALID_PRODUCER_ID_MAPPING, None)
        return {tp: refused for tp, _ in entries}, {}
    ((producer_id, producer_epoch),) = producers
    failures: dict[TopicPartition, VerificationFailure] = {}
    guards: dict[TopicPartition, VerificationGuard] = {}
    for tp, batch in batches.items():
        try:
            p: Partition = partition_of(*tp)
            guard = await p.maybe_start_transaction_verification(producer_id, batch.base_sequence, producer_epoch)
        except KafkaProtocolError as e:
            failures[tp] = VerificationFailure(e.code, None)
            continue
        if guard is not SENTINEL:
            guards[tp] = guard
    if guards:
        unverified = await manager.verify_transaction(transactional_id, producer_id, producer_epoch, list(guards),
                                                      produce_version >= FIRST_GENERIC_ERROR_PRODUCE_VERSION)
        for tp, error in unverified.items():
            if tp in guards:
                failures[tp] = failure_for_produce(error)
                del guards[tp]
    return failures, guards


async def verify_partition(
    partition: Partition, transactional_id: str, producer_id: int, producer_epoch: int,
    generic_error_supported: bool, manager: AddPartitionsToTxnManager,
) -> tuple[int, VerificationGuard]:
    """Kafka's maybeStartTransactionVerificationForPartition for one partition and no sequence
    (TxnOffsetCommit's `__consumer_offsets` partition): the coordinator's error (as the manager
    tells it; the caller maps it further) or NONE with the guard the write carries."""
    try:
        guard = await partition.maybe_start_transaction_verification(producer_id, NO_SEQUENCE, producer_epoch)
    except KafkaProtocolError as e:
        return e.code, SENTINEL
    if guard is SENTINEL:
        return ErrorCode.NONE, guard
    tp = (partition.topic, partition.index)
    unverified = await manager.verify_transaction(transactional_id, producer_id, producer_epoch, [tp],
                                                  generic_error_supported)
    error = unverified.get(tp, ErrorCode.NONE)
    return error, (SENTINEL if error else guard)
