"""The errors the ZooKeeper-mode group coordinator answers for a failed write to its
`__consumer_offsets` partition (Kafka 3.9's old GroupMetadataManager, which a ZooKeeper-mode
broker runs; the shared runtime's `coordinator_error` is the new CoordinatorRuntime's mapping,
which the transaction coordinator's appendTransactionToLog shares, and differs in two places).

* A group's metadata (storeGroup: SyncGroup's assignment, a static member's rejoin, an empty
  group): UNKNOWN_TOPIC_OR_PARTITION / NOT_ENOUGH_REPLICAS(_AFTER_APPEND) are
  COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER / KAFKA_STORAGE_ERROR NOT_COORDINATOR,
  REQUEST_TIMED_OUT REBALANCE_IN_PROGRESS (the members rejoin rather than look the coordinator
  up again), MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE / INVALID_FETCH_SIZE UNKNOWN_SERVER_ERROR,
  anything else as it is.
* Offsets (storeOffsets' maybeConvertOffsetCommitError, OffsetCommit and TxnOffsetCommit):
  NETWORK_EXCEPTION is COORDINATOR_LOAD_IN_PROGRESS (only a transaction verification answers
  it; older clients retry that without a coordinator lookup), UNKNOWN_TOPIC_OR_PARTITION /
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND) COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER /
  KAFKA_STORAGE_ERROR NOT_COORDINATOR, MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE /
  INVALID_FETCH_SIZE INVALID_COMMIT_OFFSET_SIZE, anything else (REQUEST_TIMED_OUT,
  INVALID_PRODUCER_EPOCH) as it is.

Clean-up tombstones (expired offsets, a deleted topic's, OffsetDelete, DeleteGroups) are
written as Kafka's cleanupGroupMetadata writes them: acks=0, a failure only logged, so those
requests answer NONE (GroupCoordinator._write_tombstones).

Both functions take the runtime's WriteResult halves: `coordinator_error` (NOT_COORDINATOR when the
partition was lost while it was written, whatever the log said) and the log's own error.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

_COMMON = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
_TOO_LARGE = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE)

_STORE_GROUP = {
    **_COMMON,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    **dict.fromkeys(_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
}
_STORE_OFFSETS = {
    **_COMMON,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    **dict.fromkeys(_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
}


def store_group_error(coordinator_error: int, log_error: int) -> int:
    """Kafka's storeGroup putCacheCallback."""
    if log_error == ErrorCode.NONE:
        return coordinator_error
    return _STORE_GROUP.get(log_error, log_error)


def offset_commit_error(coordinator_error: int, log_error: int) -> int:
    """Kafka's GroupMetadataManager.maybeConvertOffsetCommitError, for OffsetCommit and
    TxnOffsetCommit."""
    if log_error == ErrorCode.NONE:
        return coordinator_error
    return _STORE_OFFSETS.get(log_error, log_error)
