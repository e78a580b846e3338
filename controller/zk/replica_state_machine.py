"""Kafka's ZkReplicaStateMachine (core/src/main/scala/kafka/controller/ReplicaStateMachine.scala,
3.9): the side effects of replica state changes.

* -> NewReplica: a follower of the current leader (LeaderAndIsr isNew); never the leader itself.
* -> OnlineReplica: from NewReplica only bookkeeping (the assignment gains the replica); from
  any other state the replica is told the partition's current state (LeaderAndIsr).
* -> OfflineReplica: StopReplica(delete=false) to the replica, and the controller shrinks the
  ISR without it -- the state znode is compare-and-set (a dead leader leaves the partition
  leaderless, -1, until an election; the last ISR member stays) -- then LeaderAndIsr with the new
  ISR to the remaining replicas (not for a topic being deleted) and UpdateMetadata to all.
* -> ReplicaDeletionStarted: StopReplica(delete=true); -> ReplicaDeletionSuccessful /
  ReplicaDeletionIneligible: bookkeeping; -> NonExistentReplica: the replica leaves the
  assignment in memory.

Batches are grouped by replica (broker), as Kafka's. Runs on the controller's event task only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from controller.channel import ControllerBrokerRequestBatch
from controller.election import LeaderAndIsr, LeaderIsrAndControllerEpoch, remove_replica_from_isr
from controller.state_machines import ReplicaState, ReplicaStateMachine
from controller.topic_partition import PartitionAndReplica, TopicPartition
from controller.zk.context import ControllerContext
from controller.zk.data import ReplicaAssignment
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from controller.zk.partition_state_machine import StateChangeFailedError, from_zk_state

__all__ = ["ZkReplicaStateMachine"]

log = logging.getLogger(__name__)

MAX_ISR_ROUNDS = 100


class ZkReplicaStateMachine:
    """See the module docstring."""

    def __init__(self, context: ControllerContext, zk_client: KafkaZkClient, batch: ControllerBrokerRequestBatch) -> None:
        self.ctx = context
        self.zk = zk_client
        self.batch = batch
        self.log_ident = f"[ReplicaStateMachine controllerId={context.controller_id}] "

    @property
    def machine(self) -> ReplicaStateMachine:
        return self.ctx.replica_states

    async def startup(self) -> None:
        log.info("%sInitializing replica state", self.log_ident)
        ctx = self.ctx
        self.machine.initialize({tp: ctx.partition_replica_assignment(tp) for tp in ctx.all_partitions},
                                ctx.is_replica_online)
        log.info("%sTriggering online replica state changes", self.log_ident)
        online, offline = ctx.online_and_offline_replicas()
        await self.handle_state_changes(online, ReplicaState.OnlineReplica)
        log.info("%sTriggering offline replica state changes", self.log_ident)
        await self.handle_state_changes(offline, ReplicaState.OfflineReplica)

    def shutdown(self) -> None:
        log.info("%sStopped replica state machine", self.log_ident)

    async def handle_state_changes(self, replicas: Iterable[PartitionAndReplica], target: ReplicaState) -> None:
        by_replica: dict[int, list[PartitionAndReplica]] = {}
        for r in sorted(replicas):
            by_replica.setdefault(r.replica, []).append(r)
        if not by_replica:
            return
        try:
            self.batch.new_batch()
            if target is ReplicaState.OfflineReplica:
                by_replica = await self._offline_replicas_of_topics_being_deleted(by_replica)
            for replica_id, reps in by_replica.items():
                await self._do_handle_state_changes(replica_id, reps, target)
            self.batch.send_requests_to_brokers(self.ctx.epoch)
        except ControllerMovedError:
            self.batch.clear()
            log.error("%sController moved to another broker when moving some replicas to %s state",
                      self.log_ident, target, exc_info=True)
            raise
        except Exception:
            self.batch.clear()
            log.error("%sError while moving some replicas to %s state", self.log_ident, target, exc_info=True)

    async def _do_handle_state_changes(self, replica_id: int, replicas: list[PartitionAndReplica],
                                       target: ReplicaState) -> None:
        ctx, machine, batch = self.ctx, self.machine, self.batch
        valid, _invalid = machine.check_valid_state_changes(replicas, target)
        if target is ReplicaState.NewReplica:
            for r in valid:
                p = r.topic_partition
                current = machine.state(r)
                info = ctx.partition_leadership_info.get(p)
                if info is not None:
                    if info.leader_and_isr.leader == replica_id:
                        machine.log_failed_state_change(r, current, ReplicaState.NewReplica, StateChangeFailedError(
                            f"Replica {replica_id} for partition {p} cannot be moved to NewReplica state as it is "
                            "being requested to become leader"))
                        continue
                    batch.add_leader_and_isr_request_for_brokers([replica_id], p, info,
                                                                 ctx.partition_full_replica_assignment(p), is_new=True)
                machine.put_state(r, target)
        elif target is ReplicaState.OnlineReplica:
            for r in valid:
                p = r.topic_partition
                if machine.state(r) is ReplicaState.NewReplica:
                    assignment = ctx.partition_full_replica_assignment(p)
                    if replica_id not in assignment.replicas:
                        log.error("%sAdding replica (%d) that is not part of the assignment %s", self.log_ident,
                                  replica_id, assignment)
                        ctx.update_partition_full_replica_assignment(p, ReplicaAssignment(
                            (*assignment.replicas, replica_id), assignment.adding_replicas, assignment.removing_replicas))
                else:
                    info = ctx.partition_leadership_info.get(p)
                    if info is not None:
                        batch.add_leader_and_isr_request_for_brokers(
                            [replica_id], p, info, ctx.partition_full_replica_assignment(p), is_new=False)
                machine.put_state(r, target)
        elif target is ReplicaState.OfflineReplica:
            for r in valid:
                batch.add_stop_replica_request_for_brokers([replica_id], r.topic_partition, delete_partition=False)
            with_leadership = [r for r in valid if r.topic_partition in ctx.partition_leadership_info]
            without_leadership = [r for r in valid if r.topic_partition not in ctx.partition_leadership_info]
            updated = await self._remove_replicas_from_isr({r.topic_partition: [replica_id] for r in with_leadership})
            for p, state in updated.items():
                ctx.replica_states.state_change_log.info(
                    f"Partition {p} state changed to {state} after removing replica {replica_id} from the ISR as "
                    "part of transition to OfflineReplica")
                if not ctx.is_topic_queued_up_for_deletion(p.topic):
                    recipients = [b for b in ctx.partition_replica_assignment(p) if b != replica_id]
                    batch.add_leader_and_isr_request_for_brokers(
                        recipients, p, state, ctx.partition_full_replica_assignment(p), is_new=False)
                machine.put_state(PartitionAndReplica(p, replica_id), target)
            for r in without_leadership:
                batch.add_update_metadata_request_for_brokers(ctx.live_or_shutting_down_broker_ids, [r.topic_partition])
                machine.put_state(r, target)
        elif target is ReplicaState.ReplicaDeletionStarted:
            for r in valid:
                machine.put_state(r, target)
                batch.add_stop_replica_request_for_brokers([replica_id], r.topic_partition, delete_partition=True)
        elif target in (ReplicaState.ReplicaDeletionIneligible, ReplicaState.ReplicaDeletionSuccessful):
            for r in valid:
                machine.put_state(r, target)
        elif target is ReplicaState.NonExistentReplica:
            for r in valid:
                p = r.topic_partition
                current = ctx.partition_full_replica_assignment(p)
                ctx.update_partition_full_replica_assignment(p, ReplicaAssignment(
                    tuple(b for b in current.replicas if b != replica_id),
                    tuple(b for b in current.adding_replicas if b != replica_id),
                    tuple(b for b in current.removing_replicas if b != replica_id)))
                machine.put_state(r, target)

    async def _offline_replicas_of_topics_being_deleted(
            self, by_replica: dict[int, list[PartitionAndReplica]]) -> dict[int, list[PartitionAndReplica]]:
        """The OfflineReplica transition of the replicas of topics queued for deletion, all brokers
        at once; returns the other replicas, for the per-broker path.

        What Kafka does broker by broker -- StopReplica(delete=false), the replica out of the ISR
        by compare-and-set of the state znode, no LeaderAndIsr since the topic is going -- with
        each partition's state written once with all its leaving replicas removed in broker
        order (the state Kafka's successive writes end at), from the state the controller last
        wrote or read (a partition written meanwhile by someone else fails the compare-and-set
        and is read again). Why: deleting a thousand RF 3 topics was three rounds of a thousand
        reads and a thousand writes, seconds of the one event the controller was processing."""
        ctx, machine, batch = self.ctx, self.machine, self.batch
        rest: dict[int, list[PartitionAndReplica]] = {}
        removals: dict[TopicPartition, list[int]] = {}
        for replica_id, replicas in by_replica.items():
            deleting = [r for r in replicas if ctx.is_topic_queued_up_for_deletion(r.topic)]
            if others := [r for r in replicas if not ctx.is_topic_queued_up_for_deletion(r.topic)]:
                rest[replica_id] = others
            valid, _invalid = machine.check_valid_state_changes(deleting, ReplicaState.OfflineReplica)
            for r in valid:
                batch.add_stop_replica_request_for_brokers([replica_id], r.topic_partition, delete_partition=False)
                if r.topic_partition in ctx.partition_leadership_info:
                    removals.setdefault(r.topic_partition, []).append(replica_id)
                else:
                    batch.add_update_metadata_request_for_brokers(ctx.live_or_shutting_down_broker_ids,
                                                                  [r.topic_partition])
                    machine.put_state(r, ReplicaState.OfflineReplica)
        updated = await self._remove_replicas_from_isr(removals, cached_first=True)
        for p, state in updated.items():
            for replica_id in removals[p]:
                ctx.replica_states.state_change_log.info(
                    f"Partition {p} state changed to {state} after removing replica {replica_id} from the ISR as "
                    "part of transition to OfflineReplica")
                machine.put_state(PartitionAndReplica(p, replica_id), ReplicaState.OfflineReplica)
        return rest

    async def _remove_replicas_from_isr(self, removals: Mapping[TopicPartition, Sequence[int]], *,
                                        cached_first: bool = False) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Kafka's removeReplicasFromIsr: compare-and-set each partition's state without the given
        replicas, re-reading those a concurrent writer changed; failures are logged, not returned.
        `cached_first`: the first attempt starts from the controller's own copy of the state (its
        version is the compare-and-set's), not from a read."""
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = list(removals)
        for round_ in range(MAX_ISR_ROUNDS):
            if not remaining:
                break
            finished, remaining = await self._do_remove_replicas_from_isr(
                {p: removals[p] for p in remaining}, cached=cached_first and round_ == 0)
            for p, outcome in finished.items():
                if isinstance(outcome, Exception):
                    for replica_id in removals[p]:
                        r = PartitionAndReplica(p, replica_id)
                        self.machine.log_failed_state_change(r, self.machine.state(r), ReplicaState.OfflineReplica,
                                                             outcome)
                else:
                    results[p] = outcome
        return results

    async def _do_remove_replicas_from_isr(
        self, removals: Mapping[TopicPartition, Sequence[int]], *, cached: bool
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch | Exception], list[TopicPartition]]:
        ctx = self.ctx
        partitions = list(removals)
        if cached:
            read = {p: ctx.partition_leadership_info[p] for p in partitions if p in ctx.partition_leadership_info}
            missing = [p for p in partitions if p not in read]
            if missing:
                read.update({p: from_zk_state(z) for p, z in (await self.zk.get_topic_partition_states(missing)).items()})
        else:
            read = {p: from_zk_state(z) for p, z in (await self.zk.get_topic_partition_states(partitions)).items()}
        finished: dict[TopicPartition, LeaderIsrAndControllerEpoch | Exception] = {}
        unchanged: dict[TopicPartition, LeaderAndIsr] = {}
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for p in partitions:
            leaving = ",".join(map(str, removals[p]))
            state = read.get(p)
            if state is None:
                if not ctx.is_topic_queued_up_for_deletion(p.topic):
                    finished[p] = StateChangeFailedError(
                        f"Failed to change state of replica {leaving} for partition {p} since the leader and isr "
                        "path in zookeeper is empty")
                continue
            if state.controller_epoch > ctx.epoch:
                finished[p] = StateChangeFailedError(
                    f"Leader and isr path written by another controller. This probably means the current controller "
                    f"with epoch {ctx.epoch} went through a soft failure and another controller was elected with "
                    f"epoch {state.controller_epoch}. Aborting state change by this controller")
                continue
            lai = state.leader_and_isr
            for replica_id in removals[p]:
                if replica_id in lai.isr:
                    lai = remove_replica_from_isr(lai, replica_id)
            if lai is state.leader_and_isr:
                unchanged[p] = lai
            else:
                adjusted[p] = lai
        retry: list[TopicPartition] = []
        written: dict[TopicPartition, LeaderAndIsr | Exception] = dict(unchanged)
        if adjusted:
            update = await self.zk.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
            retry = [TopicPartition(*p) for p in update.partitions_to_retry]
            for p, outcome in update.finished_partitions.items():
                written[TopicPartition(*p)] = outcome  # type: ignore[assignment]
        for p, outcome in written.items():
            if isinstance(outcome, Exception):
                finished[p] = outcome
            else:
                state = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
                ctx.put_partition_leadership_info(p, state)
                finished[p] = state
        return finished, retry
