"""Kafka's TopicDeletionManager (core/src/main/scala/kafka/controller/TopicDeletionManager.scala, 3.9).

Deleting a topic is asked for by creating /admin/delete_topics/<t>; the controller then:
1. queues the topic; its partitions go Offline -> NonExistent (UpdateMetadata carries them with
   leader -2, "being deleted", so brokers stop serving them);
2. each live replica goes OfflineReplica (StopReplica delete=false, ISR shrink) then
   ReplicaDeletionStarted: StopReplica(delete=true);
3. a broker's StopReplica answer moves its replicas to ReplicaDeletionSuccessful (or, with an
   error, ReplicaDeletionIneligible: retried later);
4. when every replica of the topic is ReplicaDeletionSuccessful: the replicas become
   NonExistentReplica, and /brokers/topics/<t> (with its partition states), /config/topics/<t>
   and /admin/delete_topics/<t> are removed (fenced by the controller epoch).

A replica on a dead broker makes the topic ineligible for deletion until the broker comes back
(Kafka's behaviour: the broker still has the log and must be told to delete it).
With `delete.topic.enable=false` the requests are removed and nothing is deleted.
Runs on the controller's event task only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from controller.state_machines import PartitionState, ReplicaState
from controller.topic_partition import PartitionAndReplica, TopicPartition
from controller.zk.context import ControllerContext
from controller.zk.partition_state_machine import ZkPartitionStateMachine
from controller.zk.replica_state_machine import ZkReplicaStateMachine

__all__ = ["DeletionClient", "TopicDeletionManager"]

log = logging.getLogger(__name__)


class DeletionClient(Protocol):
    """Kafka's DeletionClient: what the manager asks of the controller."""

    async def delete_topics(self, topics: list[str], epoch_zk_version: int) -> None: ...

    async def delete_topic_deletions(self, topics: list[str], epoch_zk_version: int) -> None: ...

    def mute_partition_modifications(self, topics: Iterable[str]) -> None: ...

    def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None: ...


def _mk(items: Iterable[object]) -> str:
    """Kafka's `mkString(",")` of a set: distinct, here in order."""
    distinct = set(items)
    try:
        ordered = sorted(distinct)  # type: ignore[type-var]
    except TypeError:
        ordered = sorted(distinct, key=str)
    return ",".join(map(str, ordered))


class TopicDeletionManager:
    """See the module docstring."""

    def __init__(self, context: ControllerContext, replica_state_machine: ZkReplicaStateMachine,
                 partition_state_machine: ZkPartitionStateMachine, client: DeletionClient,
                 *, delete_topic_enable: bool = True) -> None:
        self.ctx = context
        self.rsm = replica_state_machine
        self.psm = partition_state_machine
        self.client = client
        self.is_delete_topic_enabled = delete_topic_enable
        self.log_ident = f"[Topic Deletion Manager {context.controller_id}] "

    def _info(self, msg: str) -> None:
        log.info("%s%s", self.log_ident, msg)

    async def init(self, initial_topics_to_be_deleted: set[str], initial_topics_ineligible: set[str]) -> None:
        self._info(f"Initializing manager with initial deletions: {_mk(initial_topics_to_be_deleted)}, "
                   f"initial ineligible deletions: {_mk(initial_topics_ineligible)}")
        if self.is_delete_topic_enabled:
            self.ctx.queue_topic_deletion(initial_topics_to_be_deleted)
            self.ctx.topics_ineligible_for_deletion |= initial_topics_ineligible & initial_topics_to_be_deleted
        else:
            self._info(f"Removing {_mk(initial_topics_to_be_deleted)} since delete topic is disabled")
            await self.client.delete_topic_deletions(sorted(initial_topics_to_be_deleted), self.ctx.epoch_zk_version)

    async def try_topic_deletion(self) -> None:
        if self.is_delete_topic_enabled:
            await self.resume_deletions()

    async def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        if self.is_delete_topic_enabled:
            self.ctx.queue_topic_deletion(topics)
            await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: set[str]) -> None:
        if self.is_delete_topic_enabled:
            to_resume = topics & self.ctx.topics_to_be_deleted
            self.ctx.topics_ineligible_for_deletion -= to_resume
            if to_resume:
                await self.resume_deletions()

    async def fail_replica_deletion(self, replicas: set[PartitionAndReplica]) -> None:
        if not self.is_delete_topic_enabled:
            return
        failed = {r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic)}
        if failed:
            topics = {r.topic for r in failed}
            log.debug("%sDeletion failed for replicas %s. Halting deletion for topics %s", self.log_ident,
                      _mk(failed), _mk(topics))
            await self.rsm.handle_state_changes(failed, ReplicaState.ReplicaDeletionIneligible)
            self.mark_topic_ineligible_for_deletion(topics, reason="failed to delete replicas")
            await self.resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: set[str], reason: str) -> None:
        if self.is_delete_topic_enabled:
            new = self.ctx.topics_to_be_deleted & topics
            self.ctx.topics_ineligible_for_deletion |= new
            if new:
                self._info(f"Halted deletion of topics {_mk(new)} due to {reason}")

    def is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        return self.is_delete_topic_enabled and topic in self.ctx.topics_ineligible_for_deletion

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return self.is_delete_topic_enabled and self.ctx.is_any_replica_in_state(topic, ReplicaState.ReplicaDeletionStarted)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self.is_delete_topic_enabled and self.ctx.is_topic_queued_up_for_deletion(topic)

    async def complete_replica_deletion(self, replicas: set[PartitionAndReplica]) -> None:
        deleted = {r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic)}
        log.debug("%sDeletion successfully completed for replicas %s", self.log_ident, _mk(deleted))
        await self.rsm.handle_state_changes(deleted, ReplicaState.ReplicaDeletionSuccessful)
        await self.resume_deletions()

    def _is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return (self.is_topic_queued_up_for_deletion(topic) and not self.is_topic_deletion_in_progress(topic)
                and not self.is_topic_ineligible_for_deletion(topic))

    async def _retry_deletion_for_ineligible_replicas(self, topics: set[str]) -> None:
        """Kafka's retryDeletionForIneligibleReplicas: the failed replicas of all `topics` back to
        OfflineReplica, in one batch of requests."""
        failed = {r for t in topics for r in self.ctx.replicas_in_state(t, ReplicaState.ReplicaDeletionIneligible)}
        log.debug("%sRetrying deletion of topics %s since replicas %s were not successfully deleted",
                  self.log_ident, _mk(topics), _mk(failed))
        await self.rsm.handle_state_changes(failed, ReplicaState.OfflineReplica)

    async def _complete_delete_topics(self, topics: set[str]) -> None:
        """Kafka's completeDeleteTopic for every topic whose replicas are all deleted, as one step:
        the replicas leave the state machine in one batch and the znodes go in pipelined writes
        (KafkaController.delete_topics), so finishing a thousand deletions is a few ZooKeeper
        round trips and the controller's next event -- a new topic, say -- does not wait for
        them one by one."""
        ctx = self.ctx
        # mute the topics' assignment watches first, so a re-created topic is seen as new
        self.client.mute_partition_modifications(topics)
        await self.rsm.handle_state_changes(
            [r for t in sorted(topics) for r in ctx.replicas_in_state(t, ReplicaState.ReplicaDeletionSuccessful)],
            ReplicaState.NonExistentReplica)
        await self.client.delete_topics(sorted(topics), ctx.epoch_zk_version)
        ctx.remove_topics(topics)
        ctx.topics_to_be_deleted -= topics
        ctx.topics_with_deletion_started -= topics
        ctx.topics_ineligible_for_deletion -= topics
        for topic in sorted(topics):
            self._info(f"Deletion of topic {topic} successfully completed")

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        """Kafka's onTopicDeletion: one UpdateMetadata and one round of replica state changes (so one
        StopReplica per broker and state) for all `topics` together."""
        self._info(f"Topic deletion callback for {_mk(topics)}")
        ctx = self.ctx
        partitions = [tp for t in sorted(topics) for tp in ctx.partitions_for_topic(t)]
        unseen = topics - ctx.topics_with_deletion_started
        if unseen:
            unseen_partitions = [tp for t in sorted(unseen) for tp in ctx.partitions_for_topic(t)]
            await self.psm.handle_state_changes(unseen_partitions, PartitionState.OfflinePartition)
            await self.psm.handle_state_changes(unseen_partitions, PartitionState.NonExistentPartition)
            ctx.topics_with_deletion_started |= unseen
        self.client.send_metadata_update(partitions)
        await self._on_partition_deletion(topics)

    async def _on_partition_deletion(self, topics: set[str]) -> None:
        """Kafka's onPartitionDeletion: dead replicas -> ReplicaDeletionIneligible (their topics
        halted until the broker returns), live ones not yet deleted -> OfflineReplica ->
        ReplicaDeletionStarted, each transition once for all the topics."""
        ctx = self.ctx
        dead: set[PartitionAndReplica] = set()
        retry: set[PartitionAndReplica] = set()
        ineligible: set[str] = set()
        for topic in sorted(topics):
            replicas = ctx.replicas_for_topic(topic)
            alive = {r for r in replicas if ctx.is_replica_online(r.replica, r.topic_partition)}
            dead_here = replicas - alive
            deleted = ctx.replicas_in_state(topic, ReplicaState.ReplicaDeletionSuccessful)
            dead |= dead_here
            retry |= alive - deleted
            if dead_here:
                log.debug("%sDead Replicas (%s) found for topic %s", self.log_ident, _mk(dead_here), topic)
                ineligible.add(topic)
        await self.rsm.handle_state_changes(dead, ReplicaState.ReplicaDeletionIneligible)
        await self.rsm.handle_state_changes(retry, ReplicaState.OfflineReplica)
        await self.rsm.handle_state_changes(retry, ReplicaState.ReplicaDeletionStarted)
        if ineligible:
            self.mark_topic_ineligible_for_deletion(ineligible, reason="offline replicas")

    async def resume_deletions(self) -> None:
        """Kafka's resumeDeletions: complete the topics whose replicas are all deleted, retry the
        ones whose deletion failed, (re)start the eligible ones -- each as one batch. A topic whose
        StopReplica is still unanswered just waits (counted in one DEBUG line, not one INFO line
        per topic per answer)."""
        ctx = self.ctx
        queued = set(ctx.topics_to_be_deleted)
        completed: set[str] = set()
        in_progress = 0
        eligible_for_retry: set[str] = set()
        if queued:
            self._info(f"Handling deletion for topics {_mk(queued)}")
        for topic in queued:
            if ctx.are_all_replicas_in_state(topic, ReplicaState.ReplicaDeletionSuccessful):
                completed.add(topic)
            elif ctx.is_any_replica_in_state(topic, ReplicaState.ReplicaDeletionStarted):
                in_progress += 1
            elif ctx.is_any_replica_in_state(topic, ReplicaState.ReplicaDeletionIneligible):
                eligible_for_retry.add(topic)
        if completed:
            await self._complete_delete_topics(completed)
        if in_progress:
            log.debug("%sDeletion of %d topics in progress (StopReplica unanswered)", self.log_ident, in_progress)
        if eligible_for_retry:
            await self._retry_deletion_for_ineligible_replicas(eligible_for_retry)
        eligible_for_deletion = {t for t in sorted(queued - completed) if self._is_topic_eligible_for_deletion(t)}
        for topic in sorted(eligible_for_deletion):
            self._info(f"Deletion of topic {topic} (re)started")
        if eligible_for_deletion:
            await self._on_topic_deletion(eligible_for_deletion)
