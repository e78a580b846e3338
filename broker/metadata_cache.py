"""MetadataCache: the broker's view of the cluster (Kafka's ``MetadataCache`` /
``ZkMetadataCache``) -- every handler, the ReplicaManager and the coordinators read metadata
here and nowhere else.

Contents: the cluster id, the controller id, the live brokers with their endpoints and racks,
every topic with its id, configs and partitions (replicas, leader, leader epoch, ISR), and the
dynamic broker configs -- a ``controller.image.MetadataImage``. (ZooKeeper mode: topics carry no
configs, as UpdateMetadata has none -- a topic's overrides are read from ZooKeeper; the dynamic
broker configs, this broker's and the cluster default, are set by broker.dynamic_config's
BrokerConfigHandler from /config/brokers.) Single node: the embedded
controller's own image, shared (its changes are visible at once, on the event loop that makes
them). In a cluster the cache is fed by the controller's UpdateMetadata requests; :meth:`update`
replaces the image as one object, so a handler that took ``cache.image`` once reads a
consistent view.

ZooKeeper mode (:meth:`update_metadata`, Kafka's ``ZkMetadataCache.updateMetadata``): the live
brokers and the controller id are replaced by each request's; partition states are merged into
the previous ones (a controller sends only what changed), a partition whose leader is
LEADER_DURING_DELETE (-2) is removed and its topic with its last partition; a topic id of zero
forgets the topic's id.

Who may call: the event loop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from controller.image import BrokerEndpoint, BrokerInfo, MetadataImage, PartitionState, TopicState
from protocol.primitives import ZERO_UUID

__all__ = ["LEADER_DURING_DELETE", "MetadataCache", "update_metadata_partition_states"]

# kafka.api.LeaderAndIsr.LeaderDuringDelete: the leader an UpdateMetadata names for a partition
# of a topic being deleted
LEADER_DURING_DELETE = -2
# SecurityProtocol ids (UpdateMetadata v1-2 name endpoints by protocol, not listener)
_SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}

state_change_log = logging.getLogger("state.change.logger")


def update_metadata_partition_states(request: Any, version: int) -> Iterable[Any]:
    """UpdateMetadataRequest.partitionStates(): the ungrouped view, each state with its topic
    name (v5+ group them by topic)."""
    if version < 5:
        yield from request.ungrouped_partition_states
        return
    for topic in request.topic_states:
        for state in topic.partition_states:
            state.topic_name = topic.topic_name
            yield state


def _brokers(request: Any, version: int) -> dict[int, BrokerInfo]:
    """The live brokers of an UpdateMetadata, normalized as UpdateMetadataRequest.normalize():
    v0 has one PLAINTEXT host/port, v1-2 name endpoints by security protocol."""
    out: dict[int, BrokerInfo] = {}
    for b in request.live_brokers:
        if version == 0:
            endpoints = (BrokerEndpoint("PLAINTEXT", b.v0_host, b.v0_port, "PLAINTEXT"),)
        else:
            endpoints = tuple(
                BrokerEndpoint(
                    e.listener if version >= 3 and e.listener else _SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT"),
                    e.host, e.port, _SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT"))
                for e in b.endpoints)
        rack = b.rack if version >= 2 and b.rack else None
        first = endpoints[0] if endpoints else BrokerEndpoint("PLAINTEXT", "", -1)
        out[b.id] = BrokerInfo(b.id, first.host, first.port, rack, first.listener, endpoints)
    return out


class MetadataCache:
    """See the module docstring."""

    __slots__ = ("image", "listeners")

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        # told of every image an UpdateMetadata made (ZooKeeper mode: the controller's admin
        # side, which waits for its changes to show and tells topic listeners)
        self.listeners: list[Callable[[MetadataImage], object]] = []

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

    @property
    def broker_default_configs(self) -> dict[str, str]:
        return self.image.broker_default_configs

    def topic(self, name: str) -> TopicState | None:
        return self.image.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self.image.topic_by_id(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        t = self.image.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def update_metadata(self, correlation_id: int, request: Any, version: int, broker_id: int) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata request (ZkMetadataCache.updateMetadata) as one new image;
        returns the partitions it deleted. The controller epoch is the caller's to check."""
        old = self.image
        brokers = _brokers(request, version)
        topic_ids = {name: t.topic_id for name, t in old.topics.items()}
        for ts in request.topic_states if version >= 5 else ():
            topic_ids[ts.topic_name] = ts.topic_id  # a zero id forgets the topic's id (v7+ carry it)
        topics = dict(old.topics)
        copied: set[str] = set()
        deleted: dict[tuple[str, int], None] = {}
        states = list(update_metadata_partition_states(request, version))
        for st in states:
            name, index = st.topic_name, st.partition_index
            topic = topics.get(name)
            if name not in copied:  # copy on first write: handlers may hold the old image
                if topic is not None:
                    topic = topics[name] = TopicState(name, topic.topic_id, dict(topic.partitions), topic.configs)
                copied.add(name)
            if st.leader == LEADER_DURING_DELETE:
                if topic is not None:
                    topic.partitions.pop(index, None)
                    if not topic.partitions:
                        del topics[name]
                deleted[(name, index)] = None
                continue
            if topic is None:
                topic = topics[name] = TopicState(name, topic_ids.get(name, ZERO_UUID), {})
            topic.partitions[index] = PartitionState(
                partition=index, replicas=list(st.replicas), leader=st.leader, leader_epoch=st.leader_epoch,
                isr=list(st.isr), partition_epoch=st.zk_version,
                offline_replicas=list(st.offline_replicas) if version >= 4 else [])
            deleted.pop((name, index), None)
        for name, topic in topics.items():
            topic_id = topic_ids.get(name, topic.topic_id)
            if topic_id != topic.topic_id:
                topics[name] = TopicState(name, topic_id, topic.partitions, topic.configs)
        ours = brokers.get(broker_id)
        if ours is not None:
            listeners = {e.listener for e in ours.endpoints}
            if any({e.listener for e in b.endpoints} != listeners for b in brokers.values()):
                logging.getLogger("kafka.server.metadata.ZkMetadataCache").error(
                    "[MetadataCache brokerId=%d] Listeners are not identical across brokers: %s", broker_id,
                    {i: [f"{e.listener}://{e.host}:{e.port}" for e in b.endpoints] for i, b in brokers.items()})
        controller_id = request.controller_id if request.controller_id >= 0 else -1
        self.image = MetadataImage(old.cluster_id, controller_id, brokers, topics, old.broker_configs,
                                   old.broker_default_configs)
        for listener in list(self.listeners):
            listener(self.image)
        if states:
            state_change_log.info(
                "[Broker id=%d] Add %d partitions and deleted %d partitions from metadata cache in response to "
                "UpdateMetadata request sent by controller %d epoch %d with correlation id %d", broker_id,
                len(states) - len(deleted), len(deleted), request.controller_id, request.controller_epoch, correlation_id)
        return list(deleted)
