"""The classic consumer-group coordinator (Kafka's GroupCoordinator) and its `__consumer_offsets`
persistence. See coordinator.py."""

from broker.coordinator.partitioner import partition_for
from broker.group.coordinator import GroupCoordinator
from broker.group.metadata import GroupMetadata, GroupState, MemberMetadata

__all__ = ["GroupCoordinator", "GroupMetadata", "GroupState", "MemberMetadata", "partition_for"]
