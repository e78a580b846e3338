"""MetadataCache: the broker's view of the cluster (Kafka's ``MetadataCache`` /
``ZkMetadataCache``) -- every handler, the ReplicaManager and the coordinators read metadata
here and nowhere else.

Contents: the cluster id, the controller id, the live brokers with their endpoints and racks,
every topic with its id, configs and partitions (replicas, leader, leader epoch, ISR), and the
dynamic broker configs -- a ``controller.image.MetadataImage``. Single node: the embedded
controller's own image, shared (its changes are visible at once, on the event loop that makes
them). In a cluster the cache is fed by the controller's UpdateMetadata requests; :meth:`update`
replaces the image as one object, so a handler that took ``cache.image`` once reads a
consistent view.

Who may call: the event loop.
"""

from __future__ import annotations

import uuid

from controller.image import BrokerInfo, MetadataImage, PartitionState, TopicState

__all__ = ["MetadataCache"]


class MetadataCache:
    """See the module docstring."""

    __slots__ = ("image",)

    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def update(self, image: MetadataImage) -> None:
        self.image = image

    @property
    def cluster_id(self) -> str:
        return self.image.cluster_id

    @property
    def controller_id(self) -> int:
        return self.image.controller_id

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self.image.brokers

    @property
    def topics(self) -> dict[str, TopicState]:
        return self.image.topics

    @property
    def broker_configs(self) -> dict[str, str]:
        return self.image.broker_configs

    def topic(self, name: str) -> TopicState | None:
        return self.image.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self.image.topic_by_id(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        t = self.image.topics.get(topic)
        return None if t is None else t.partitions.get(partition)
