"""The classic consumer-group coordinator (Kafka's GroupCoordinator) and its `__consumer_offsets`
persistence. See coordinator.py."""

from broker.group.coordinator import GroupCoordinator
from broker.group.metadata import GroupMetadata, GroupState, MemberMetadata, partition_for

__all__ = ["GroupCoordinator", "GroupMetadata", "GroupState", "MemberMetadata", "partition_for"]
