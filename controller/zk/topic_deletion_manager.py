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

Topics are started in batches of at most `deletion_batch_size` (DELETION_BATCH_SIZE) per
controller event: every topic queued leaves the brokers' metadata in the first event (one
UpdateMetadata, as Kafka's), but the replica state changes and StopReplica requests go out a batch
at a time, the next batch from a TopicDeletionResume event that the event manager runs only when no
other event waits (put_when_idle); a StopReplica answer completes topics but starts none. Why:
Kafka's DeleteTopics handler writes the /admin/delete_topics/<t> znodes one at a time, so its
controller picks the topics up over several events and a topic created meanwhile is handled in
between; ours are written in one multi (AdminZkClient.delete_topics), and starting 1,000 topics in
one event (their OfflineReplica ZooKeeper writes and StopReplica requests) held a new topic's
TopicChange for over a second, then its LeaderAndIsr behind the StopReplica of all 1,000 (issue
#21). A batch still gets one StopReplica(delete=false) and one StopReplica(delete=true) per broker.

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

# topics whose deletion one controller event starts (the rest: TopicDeletionResume)
DELETION_BATCH_SIZE = 100


class DeletionClient(Protocol):
    """Kafka's DeletionClient: what the manager asks of the controller."""

    async def delete_topics(self, topics: list[str], epoch_zk_version: int) -> None: ...

    async def delete_topic_deletions(self, topics: list[str], epoch_zk_version: int) -> None: ...

    def mute_partition_modifications(self, topics: Iterable[str]) -> None: ...

    def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None: ...

    def resume_deletions_later(self) -> None:
        """Queue a TopicDeletionResume event once the controller has no other event waiting."""


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
                 *, delete_topic_enable: bool = True, deletion_batch_size: int = DELETION_BATCH_SIZE) -> None:
        self.ctx = context
        self.deletion_batch_size = deletion_batch_size
        self._resume_queued = False  # a TopicDeletionResume is queued
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
        self._resume_queued = False  # one queued by a previous term was dropped with its queue
        if self.is_delete_topic_enabled:
            self.ctx.queue_topic_deletion(initial_topics_to_be_deleted)
            self.ctx.topics_ineligible_for_deletion |= initial_topics_ineligible & initial_topics_to_be_deleted
        else:
            self._info(f"Removing {_mk(initial_topics_to_be_deleted)} since delete topic is disabled")
            await self.client.delete_topic_deletions(sorted(initial_topics_to_be_deleted), self.ctx.epoch_zk_version)

    async def try_topic_deletion(self) -> None:
        if self.is_delete_topic_enabled:
            await self.resume_deletions()

    async def resume_queued_deletions(self) -> None:
        """The TopicDeletionResume event: start the next batch."""
        self._resume_queued = False
        await self.try_topic_deletion()

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
            await self.resume_deletions(start=False)

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
        await self.resume_deletions(start=False)

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

    async def _on_topic_deletion(self, topics: set[str], batch: set[str]) -> None:
        """Kafka's onTopicDeletion: one UpdateMetadata and one round of replica state changes (so one
        StopReplica per broker and state) for all `topics` together -- except that the replica
        state changes are made for `batch` only (the first DELETION_BATCH_SIZE of them; the rest
        follow in later events). The partitions of every topic not seen before still leave
        every broker's metadata now, at once as in Kafka; a topic restarted gets its
        UpdateMetadata again with its batch."""
        self._info(f"Topic deletion callback for {_mk(batch)}")
        ctx = self.ctx
        unseen = topics - ctx.topics_with_deletion_started
        if unseen:
            unseen_partitions = [tp for t in sorted(unseen) for tp in ctx.partitions_for_topic(t)]
            await self.psm.handle_state_changes(unseen_partitions, PartitionState.OfflinePartition)
            await self.psm.handle_state_changes(unseen_partitions, PartitionState.NonExistentPartition)
            ctx.topics_with_deletion_started |= unseen
        self.client.send_metadata_update([tp for t in sorted(unseen | batch) for tp in ctx.partitions_for_topic(t)])
        await self._on_partition_deletion(batch)

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

    async def resume_deletions(self, *, start: bool = True) -> None:
        """Kafka's resumeDeletions: complete the topics whose replicas are all deleted, retry the
        ones whose deletion failed, (re)start the eligible ones -- each as one batch. A topic whose
        StopReplica is still unanswered just waits (counted in one DEBUG line, not one INFO line
        per topic per answer). `start=False` (a StopReplica answer): the eligible topics are left
        to a TopicDeletionResume event, run once no other event waits, so the answers of a long
        deletion only complete topics and a new topic's TopicChange is never queued behind
        the start of the next batch."""
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
        eligible = [t for t in sorted(queued - completed) if self._is_topic_eligible_for_deletion(t)]
        batch = eligible[:self.deletion_batch_size] if start else []
        for topic in batch:
            self._info(f"Deletion of topic {topic} (re)started")
        if batch:
            await self._on_topic_deletion(set(eligible), set(batch))
        if len(eligible) > len(batch) and not self._resume_queued:
            log.debug("%s%d topics wait for the next batch", self.log_ident, len(eligible) - len(batch))
            self._resume_queued = True
            self.client.resume_deletions_later()
