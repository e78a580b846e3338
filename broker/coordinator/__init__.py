"""The coordinator runtime both coordinators run on (Kafka 3.9's coordinator-common module:
CoordinatorRuntime, CoordinatorShard, CoordinatorLoader): ownership of an internal topic's
partitions, load by replay, unload on resignation, acks=all writes. See runtime.py."""

from broker.coordinator.partitioner import partition_for
from broker.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorShard,
    CoordinatorState,
    InternalTopic,
    TransactionalCoordinatorShard,
    WriteResult,
)

__all__ = ["CoordinatorRuntime", "CoordinatorShard", "CoordinatorState", "InternalTopic",
           "TransactionalCoordinatorShard", "WriteResult", "partition_for"]
