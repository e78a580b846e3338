"""Transaction metadata as `__transaction_state` records (Kafka 3.9's TransactionLog.scala).

The key is the transactional id (`protocol.coordinator_records.transaction_log_key`); the value
is a TransactionLogValue built from a TxnTransitMetadata, as Kafka's `valueToBytes` builds it:

* the state is written as its id (`TransactionState`'s value);
* the partitions are grouped per topic, one PartitionsSchema per topic. Kafka's order follows a
  Scala hash map; ours is sorted (topics, then partition ids), so a record is reproducible.
  Readers do not care about the order;
* an Empty transaction writes a null partition array (not an empty one), and refuses partitions.

Reading (`readTxnRecordValue`) rebuilds a TransactionMetadata: partitions are read only when
the state is not Empty, and `last_producer_id` / `last_producer_epoch` start unknown (-1), since
the version 0 and 1 values Kafka 3.9 reads do not carry them. A tombstone (null value) reads as
None: the id was expired or removed.

Pure conversion: bytes and records in, objects out, no I/O.
"""

from __future__ import annotations

from broker.txn.metadata import (
    IllegalStateError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from protocol.coordinator import TransactionLogValue
from protocol.coordinator.transaction_log_value import PartitionsSchema
from protocol.coordinator_records import (
    TRANSACTION_LOG_VALUE_VERSION,
    decode_transaction_log_value,
    transaction_log_value,
)


def to_log_value(transit: TxnTransitMetadata) -> TransactionLogValue:
    """The record of a transit, as `valueToBytes` fills it."""
    if transit.txn_state == TransactionState.EMPTY and transit.topic_partitions:
        raise IllegalStateError(
            "Transaction is not expected to have any partitions since its state is "
            f"{transit.txn_state.state_name}: {transit}"
        )
    partitions: list[PartitionsSchema] | None
    if transit.txn_state == TransactionState.EMPTY:
        partitions = None
    else:
        partitions = [
            PartitionsSchema(topic=topic, partition_ids=ids)
            for topic, ids in _group_by_topic(transit.topic_partitions).items()
        ]
    return TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=int(transit.txn_state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
    )


def value_to_bytes(
    transit: TxnTransitMetadata, version: int = TRANSACTION_LOG_VALUE_VERSION
) -> bytes:
    """The version-prefixed value bytes of a transit (version 0 unless transaction.version 1
    were finalized, which a Kafka 3.9 / ZooKeeper-mode cluster never does)."""
    return transaction_log_value(to_log_value(transit), version)


def from_log_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a loaded record describes (no pending state, last producer id/epoch -1)."""
    metadata = TransactionMetadata(
        transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=TransactionState.from_id(value.transaction_status),
        txn_start_timestamp=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
    )
    if metadata.state != TransactionState.EMPTY:
        for schema in value.transaction_partitions or ():
            metadata.add_partitions({(schema.topic, p) for p in schema.partition_ids})
    return metadata


def read_txn_record_value(
    transactional_id: str, buf: bytes | bytearray | memoryview | None
) -> TransactionMetadata | None:
    """The metadata of a `__transaction_state` value; None for a tombstone. A value version
    Kafka 3.9 does not know raises `UnknownVersionError`, a corrupt one `DecodeError`, an unknown
    state id `IllegalStateError` (Kafka's loader fails on all three)."""
    value = decode_transaction_log_value(buf)
    return None if value is None else from_log_value(transactional_id, value)


def _group_by_topic(partitions: frozenset[TopicPartition]) -> dict[str, list[int]]:
    """Partition ids per topic, topics and ids in ascending order."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return by_topic
