"""Kafka's ControllerContext (core/src/main/scala/kafka/controller/ControllerContext.scala): what the
elected controller knows about the cluster, loaded from ZooKeeper when it is elected and kept
current by its events.

Contents: the live brokers with their registrations and epochs (the czxid of /brokers/ids/<id>),
the brokers shutting down, the controller's epoch and the version of /controller_epoch it set
(every fenced write checks it), the topics with their ids and replica assignments, each
partition's leader/ISR as last read or written (LeaderIsrAndControllerEpoch), the partition and
replica state machines' states, and the topics queued for deletion.

Why a separate object: the state machines, the request batch and the topic deletion manager all
read it, and resignation drops it whole (`reset_context`). Owned by the controller's event task;
nothing here does I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from controller.election import LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller.state_machines import (
    PartitionState,
    PartitionStateMachine,
    ReplicaState,
    ReplicaStateMachine,
)
from controller.topic_partition import PartitionAndReplica, TopicPartition
from controller.zk.data import Broker, ReplicaAssignment

__all__ = ["ControllerContext"]

EPOCH_DURING_DELETE = -2  # LeaderAndIsr.EpochDuringDelete
NO_EPOCH = -1


class ControllerContext:
    """See the module docstring."""

    def __init__(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self.epoch = 0  # KafkaController.InitialControllerEpoch
        self.epoch_zk_version = 0  # KafkaController.InitialControllerEpochZkVersion
        self.partition_states = PartitionStateMachine(controller_id)
        self.replica_states = ReplicaStateMachine(controller_id)
        self._reset()

    def _reset(self) -> None:
        self.live_brokers: dict[int, Broker] = {}
        self.live_broker_epochs: dict[int, int] = {}
        self.shutting_down_broker_ids: set[int] = set()
        self.all_topics: set[str] = set()
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.partition_assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self.partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.partitions_being_reassigned: set[TopicPartition] = set()
        self.replicas_on_offline_dirs: dict[int, set[TopicPartition]] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()
        self.partition_states.states.clear()
        self.replica_states.states.clear()

    def set_epoch(self, epoch: int, epoch_zk_version: int) -> None:
        self.epoch = epoch
        self.epoch_zk_version = epoch_zk_version
        self.partition_states.controller_epoch = epoch
        self.replica_states.controller_epoch = epoch

    def reset_context(self) -> None:
        """Forget everything (resignation); the epoch is kept, as Kafka keeps it."""
        self._reset()

    # -- brokers --------------------------------------------------------------------------------

    def set_live_brokers(self, broker_and_epochs: Iterable[tuple[Broker, int]]) -> None:
        self.live_brokers.clear()
        self.live_broker_epochs.clear()
        self.add_live_brokers(broker_and_epochs)

    def add_live_brokers(self, broker_and_epochs: Iterable[tuple[Broker, int]]) -> None:
        for broker, epoch in broker_and_epochs:
            self.live_brokers[broker.id] = broker
            self.live_broker_epochs[broker.id] = epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.live_broker_epochs.pop(broker_id, None)

    def update_broker_metadata(self, new: Broker) -> None:
        self.live_brokers[new.id] = new

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Live brokers that are not shutting down (the ones that may lead)."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_brokers(self) -> list[Broker]:
        return [self.live_brokers[b] for b in sorted(self.live_brokers)]

    @property
    def live_broker_id_and_epochs(self) -> dict[int, int]:
        return dict(self.live_broker_epochs)

    def live_or_shutting_down_broker(self, broker_id: int) -> Broker | None:
        return self.live_brokers.get(broker_id)

    def is_replica_online(self, broker_id: int, partition: TopicPartition,
                          include_shutting_down_brokers: bool = False) -> bool:
        online = (broker_id in self.live_brokers if include_shutting_down_brokers
                  else broker_id in self.live_brokers and broker_id not in self.shutting_down_broker_ids)
        return online and partition not in self.replicas_on_offline_dirs.get(broker_id, ())

    # -- topics and assignments -----------------------------------------------------------------

    def set_all_topics(self, topics: Iterable[str]) -> None:
        self.all_topics = set(topics)

    def add_topic_id(self, topic: str, topic_id: uuid.UUID) -> None:
        self.topic_ids[topic] = topic_id
        self.topic_names[topic_id] = topic

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_names.get(topic_id)

    def partition_replica_assignment(self, partition: TopicPartition) -> list[int]:
        ra = self.partition_assignments.get(partition.topic, {}).get(partition.partition)
        return [] if ra is None else list(ra.replicas)

    def partition_full_replica_assignment(self, partition: TopicPartition) -> ReplicaAssignment:
        return self.partition_assignments.get(partition.topic, {}).get(partition.partition, ReplicaAssignment(()))

    def partition_full_replica_assignment_for_topic(self, topic: str) -> dict[int, ReplicaAssignment]:
        return dict(self.partition_assignments.get(topic, {}))

    def update_partition_full_replica_assignment(self, partition: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.partition_assignments.setdefault(partition.topic, {})[partition.partition] = assignment

    def update_partition_replica_assignment(self, partition: TopicPartition, replicas: Iterable[int]) -> None:
        self.update_partition_full_replica_assignment(partition, ReplicaAssignment(tuple(replicas)))

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.partition_assignments.get(topic, {}))]

    @property
    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in sorted(self.partition_assignments)
                for p in sorted(self.partition_assignments[t])]

    def replicas_for_topic(self, topic: str) -> set[PartitionAndReplica]:
        return {PartitionAndReplica(tp, r) for tp in self.partitions_for_topic(topic)
                for r in self.partition_replica_assignment(tp)}

    def replicas_for_partition(self, partitions: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [PartitionAndReplica(tp, r) for tp in partitions for r in self.partition_replica_assignment(tp)]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[PartitionAndReplica]:
        ids = set(broker_ids)
        return {PartitionAndReplica(tp, r) for tp in self.all_partitions
                for r in self.partition_replica_assignment(tp) if r in ids}

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return {tp for tp in self.all_partitions if broker_id in self.partition_replica_assignment(tp)}

    def online_and_offline_replicas(self) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        for tp in self.all_partitions:
            for r in self.partition_replica_assignment(tp):
                (online if self.is_replica_online(r, tp) else offline).append(PartitionAndReplica(tp, r))
        return online, offline

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic: assignment, leadership, states, id."""
        self.remove_topics({topic})

    def remove_topics(self, topics: set[str]) -> None:
        """Forget deleted topics; one pass over the replica states for all of them (a replica the
        assignment no longer names, say after a reassignment, may still have a state)."""
        for topic in topics:
            for tp in self.partitions_for_topic(topic):
                self.partition_leadership_info.pop(tp, None)
                self.partition_states.states.pop(tp, None)
            self.partition_assignments.pop(topic, None)
            self.all_topics.discard(topic)
            topic_id = self.topic_ids.pop(topic, None)
            if topic_id is not None:
                self.topic_names.pop(topic_id, None)
        for key in [k for k in self.replica_states.states if k.topic in topics]:
            del self.replica_states.states[key]

    # -- leadership -----------------------------------------------------------------------------

    def put_partition_leadership_info(self, partition: TopicPartition,
                                      leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch) -> None:
        self.partition_leadership_info[partition] = leader_isr_and_controller_epoch

    def leader_and_isr(self, partition: TopicPartition) -> LeaderAndIsr | None:
        info = self.partition_leadership_info.get(partition)
        return None if info is None else info.leader_and_isr

    def clear_partition_leadership_info(self) -> None:
        self.partition_leadership_info.clear()

    def partitions_with_leaders(self) -> set[TopicPartition]:
        return {tp for tp in self.partition_leadership_info if not self.is_topic_queued_up_for_deletion(tp.topic)}

    def partitions_with_offline_leader(self) -> set[TopicPartition]:
        return {tp for tp, info in self.partition_leadership_info.items()
                if not self.is_replica_online(info.leader_and_isr.leader, tp)
                and not self.is_topic_queued_up_for_deletion(tp.topic)}

    def partition_leaders_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return {tp for tp, info in self.partition_leadership_info.items()
                if info.leader_and_isr.leader == broker_id and not self.is_topic_queued_up_for_deletion(tp.topic)}

    def leader_epoch(self, partition: TopicPartition) -> int:
        """The epoch StopReplica carries: -2 for a topic queued for deletion (overrides any)."""
        if self.is_topic_queued_up_for_deletion(partition.topic):
            return EPOCH_DURING_DELETE
        lai = self.leader_and_isr(partition)
        return NO_EPOCH if lai is None else lai.leader_epoch

    def offline_partition_count(self) -> int:
        return sum(1 for tp, s in self.partition_states.states.items()
                   if s is PartitionState.OfflinePartition and not self.is_topic_queued_up_for_deletion(tp.topic))

    # -- states ---------------------------------------------------------------------------------

    def partitions_in_states(self, states: Iterable[PartitionState], topic: str | None = None) -> list[TopicPartition]:
        wanted = set(states)
        return sorted(tp for tp, s in self.partition_states.states.items()
                      if s in wanted and (topic is None or tp.topic == topic))

    # Per topic, these read only the topic's own replicas (Kafka's replicasForTopic(topic).filter):
    # the deletion manager asks them for every queued topic on every StopReplica answer, so a scan
    # of every replica of the cluster made deleting N topics cost N^2.

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionAndReplica]:
        states = self.replica_states.states
        return {r for r in self.replicas_for_topic(topic) if states.get(r, ReplicaState.NonExistentReplica) is state}

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        states = self.replica_states.states
        return any(states.get(r, ReplicaState.NonExistentReplica) is state for r in self.replicas_for_topic(topic))

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        states = self.replica_states.states
        return all(states.get(r, ReplicaState.NonExistentReplica) is state for r in self.replicas_for_topic(topic))

    # -- topic deletion -------------------------------------------------------------------------

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_to_be_deleted.update(topics)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        """Kafka's ControllerContext.isTopicDeletionInProgress: the deletion of the topic has begun
        (its partitions went NonExistent). The channel asks it for every partition of a StopReplica
        answer, so it is a set lookup."""
        return topic in self.topics_with_deletion_started
