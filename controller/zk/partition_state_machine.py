"""Kafka's ZkPartitionStateMachine (core/src/main/scala/kafka/controller/PartitionStateMachine.scala,
3.9): the side effects of partition state changes -- electing leaders, writing the state znodes
by compare-and-set, and queueing the LeaderAndIsr / UpdateMetadata the brokers must hear.

The transition table and the state-change log lines are controller.state_machines'; the election
algorithms are controller.election's. This module does what Kafka's does with them:

* NewPartition -> OnlinePartition: the first live assigned replica leads, the live assigned
  replicas are the ISR, epochs 0; the state znode is *created* (fenced by the controller epoch):
  LeaderAndIsr(isNew) to the ISR, UpdateMetadata to every live broker.
* Online/OfflinePartition -> OnlinePartition: read the state znodes, refuse any written by a
  newer controller, elect with the strategy, compare-and-set the znodes on the partition epoch
  read (a leader's concurrent AlterPartition makes it retry), then LeaderAndIsr to the live
  replicas and UpdateMetadata to every live broker. Unclean election only when allowed by the
  caller or by the topic's `unclean.leader.election.enable` (its /config/topics override, else
  the broker default).
* -> OfflinePartition / NonExistentPartition: bookkeeping only.

A ControllerMovedError (the epoch check of a write failed: another controller was elected)
propagates: the controller resigns. Other failures are logged per partition and returned.
Runs on the controller's event task only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from controller.channel import ControllerBrokerRequestBatch
from controller.election import (
    ElectionResult,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionLeaderElectionStrategy,
    initial_leader_and_isr,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
    no_live_replica_message,
)
from controller.state_machines import PartitionState
from controller.topic_partition import TopicPartition
from controller.zk.context import ControllerContext
from controller.zk.data import LeaderIsrAndControllerEpoch as ZkLeaderIsrAndControllerEpoch
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient

__all__ = [
    "ElectionStrategy",
    "StateChangeFailedError",
    "ZkPartitionStateMachine",
    "from_zk_state",
]

log = logging.getLogger(__name__)

MAX_ELECTION_ROUNDS = 100  # compare-and-set retries (Kafka retries until no conflict remains)


class StateChangeFailedError(Exception):
    """Kafka's StateChangeFailedException."""


@dataclass(frozen=True)
class ElectionStrategy:
    """A PartitionLeaderElectionStrategy; `allow_unclean` only matters for OFFLINE. `str()` is
    how Kafka prints it ("OfflinePartitionLeaderElectionStrategy(false)")."""

    kind: PartitionLeaderElectionStrategy
    allow_unclean: bool = False

    def __str__(self) -> str:
        if self.kind is PartitionLeaderElectionStrategy.OFFLINE:
            return f"{self.kind}({str(self.allow_unclean).lower()})"
        return str(self.kind)


OFFLINE_CLEAN = ElectionStrategy(PartitionLeaderElectionStrategy.OFFLINE, False)
PREFERRED = ElectionStrategy(PartitionLeaderElectionStrategy.PREFERRED_REPLICA)
CONTROLLED_SHUTDOWN = ElectionStrategy(PartitionLeaderElectionStrategy.CONTROLLED_SHUTDOWN)
REASSIGN = ElectionStrategy(PartitionLeaderElectionStrategy.REASSIGN)


def from_zk_state(state: ZkLeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch:
    """A state znode as read (controller.zk.data) as the controller's value type."""
    z = state.leader_and_isr
    from controller.election import LeaderRecoveryState

    lai = LeaderAndIsr(z.leader, z.leader_epoch, tuple(z.isr), LeaderRecoveryState(int(z.leader_recovery_state)),
                       z.partition_epoch)
    return LeaderIsrAndControllerEpoch(lai, state.controller_epoch)


ElectionResults = dict[TopicPartition, LeaderAndIsr | Exception]


class ZkPartitionStateMachine:
    """See the module docstring."""

    def __init__(
        self,
        context: ControllerContext,
        zk_client: KafkaZkClient,
        batch: ControllerBrokerRequestBatch,
        unclean_leader_election_enabled: Callable[[Iterable[str]], Awaitable[dict[str, bool | Exception]]],
        *,
        is_leader_recovery_supported: bool = True,
    ) -> None:
        self.ctx = context
        self.zk = zk_client
        self.batch = batch
        self.unclean_leader_election_enabled = unclean_leader_election_enabled
        self.is_leader_recovery_supported = is_leader_recovery_supported
        self.log_ident = f"[PartitionStateMachine controllerId={context.controller_id}] "
        self.unclean_leader_elections = 0  # UncleanLeaderElectionsPerSec, as a count

    @property
    def machine(self):  # the bookkeeping (controller.state_machines.PartitionStateMachine)
        return self.ctx.partition_states

    def _info(self, msg: str) -> None:
        log.info("%s%s", self.log_ident, msg)

    async def startup(self) -> None:
        self._info("Initializing partition state")
        self.machine.initialize(
            self.ctx.all_partitions,
            {tp: info.leader_and_isr for tp, info in self.ctx.partition_leadership_info.items()},
            self.ctx.is_replica_online,
        )
        self._info("Triggering online partition state changes")
        await self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        self._info("Stopped partition state machine")

    async def trigger_online_partition_state_change(self, topic: str | None = None) -> ElectionResults:
        """Every New or Offline partition (of `topic`, or all) not queued for deletion -> Online."""
        partitions = [tp for tp in self.ctx.partitions_in_states(
            (PartitionState.OfflinePartition, PartitionState.NewPartition), topic)
            if not self.ctx.is_topic_queued_up_for_deletion(tp.topic)]
        return await self.handle_state_changes(partitions, PartitionState.OnlinePartition, OFFLINE_CLEAN)

    async def handle_state_changes(self, partitions: Sequence[TopicPartition], target: PartitionState,
                                   strategy: ElectionStrategy | None = None) -> ElectionResults:
        if not partitions:
            return {}
        try:
            self.batch.new_batch()
            result = await self._do_handle_state_changes(list(partitions), target, strategy)
            self.batch.send_requests_to_brokers(self.ctx.epoch)
            return result
        except ControllerMovedError:
            self.batch.clear()
            log.error("%sController moved to another broker when moving some partitions to %s state",
                      self.log_ident, target, exc_info=True)
            raise
        except Exception as e:
            self.batch.clear()
            log.error("%sError while moving some partitions to %s state", self.log_ident, target, exc_info=True)
            return {p: e for p in partitions}

    async def _do_handle_state_changes(self, partitions: list[TopicPartition], target: PartitionState,
                                       strategy: ElectionStrategy | None) -> ElectionResults:
        machine = self.machine
        valid, _invalid = machine.check_valid_state_changes(partitions, target)
        if target is PartitionState.NewPartition:
            for p in valid:
                machine.put_state(p, target, assigned_replicas=self.ctx.partition_replica_assignment(p))
            return {}
        if target is PartitionState.OnlinePartition:
            uninitialized = [p for p in valid if machine.state(p) is PartitionState.NewPartition]
            to_elect = [p for p in valid if machine.state(p) in (PartitionState.OfflinePartition,
                                                                 PartitionState.OnlinePartition)]
            if uninitialized:
                for p in await self._initialize_leader_and_isr_for_partitions(uninitialized):
                    machine.put_state(p, target, leader_and_isr=self.ctx.leader_and_isr(p))
            if not to_elect:
                return {}
            if strategy is None:
                raise ValueError("Election strategy is a required field when the target state is OnlinePartition")
            results = await self._elect_leader_for_partitions(to_elect, strategy)
            for p, r in results.items():
                if isinstance(r, LeaderAndIsr):
                    machine.put_state(p, target, leader_and_isr=r)
            return results
        for p in valid:
            machine.put_state(p, target)
        return {}

    # -- NewPartition -> OnlinePartition ----------------------------------------------------------

    async def _initialize_leader_and_isr_for_partitions(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        ctx, machine = self.ctx, self.machine
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for p in partitions:
            replicas = ctx.partition_replica_assignment(p)
            lai = initial_leader_and_isr(replicas, [r for r in replicas if ctx.is_replica_online(r, p)])
            if lai is None:
                msg = no_live_replica_message(ctx.controller_id, ctx.epoch, p, replicas, ctx.live_broker_ids)
                machine.log_failed_state_change(p, PartitionState.NewPartition, PartitionState.OnlinePartition,
                                                StateChangeFailedError(msg))
                continue
            states[p] = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
        if not states:
            return []
        try:
            created = await self.zk.create_topic_partition_states(states, ctx.epoch_zk_version)
        except ControllerMovedError:
            log.error("%sController moved to another broker when trying to create the topic partition state znode",
                      self.log_ident, exc_info=True)
            raise
        except Exception as e:
            for p in states:
                machine.log_failed_state_change(p, machine.state(p), PartitionState.NewPartition, e)
            return []
        successful = []
        for p, error in created.items():
            tp = TopicPartition(*p)
            if error is None:
                state = states[tp]
                ctx.put_partition_leadership_info(tp, state)
                self.batch.add_leader_and_isr_request_for_brokers(
                    state.leader_and_isr.isr, tp, state, ctx.partition_full_replica_assignment(tp), is_new=True)
                successful.append(tp)
            else:
                machine.log_failed_state_change(tp, PartitionState.NewPartition, PartitionState.OnlinePartition, error)
        return successful

    # -- elections ------------------------------------------------------------------------------

    async def _elect_leader_for_partitions(self, partitions: list[TopicPartition],
                                           strategy: ElectionStrategy) -> ElectionResults:
        remaining = partitions
        finished: ElectionResults = {}
        for _ in range(MAX_ELECTION_ROUNDS):
            done, remaining = await self._do_elect_leader_for_partitions(remaining, strategy)
            for p, r in done.items():
                if isinstance(r, Exception):
                    self.machine.log_failed_state_change(p, self.machine.state(p), PartitionState.OnlinePartition, r)
            finished.update(done)
            if not remaining:
                return finished
            self._info(f"Retrying leader election with strategy {strategy} for partitions "
                       f"{','.join(map(str, remaining))}")
        for p in remaining:
            finished[p] = StateChangeFailedError(f"Gave up electing a leader for partition {p} after "
                                                 f"{MAX_ELECTION_ROUNDS} conflicting updates")
        return finished

    async def _do_elect_leader_for_partitions(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy
    ) -> tuple[ElectionResults, list[TopicPartition]]:
        ctx = self.ctx
        try:
            read = await self.zk.get_topic_partition_states(partitions)
        except ControllerMovedError:
            raise
        except Exception as e:
            return {p: e for p in partitions}, []
        failed: ElectionResults = {}
        valid: list[tuple[TopicPartition, LeaderAndIsr]] = []
        for p in partitions:
            zk_state = read.get(p)
            if zk_state is None:
                failed[p] = StateChangeFailedError(
                    f"LeaderAndIsr information doesn't exist for partition {p} in {self.machine.state(p)} state")
            elif zk_state.controller_epoch > ctx.epoch:
                failed[p] = StateChangeFailedError(
                    f"Aborted leader election for partition {p} since the LeaderAndIsr path was already written by "
                    f"another controller. This probably means that the current controller {ctx.controller_id} went "
                    f"through a soft failure and another controller was elected with epoch "
                    f"{zk_state.controller_epoch}.")
            else:
                valid.append((p, from_zk_state(zk_state).leader_and_isr))
        if not valid:
            return failed, []
        results = await self._elect(valid, strategy)
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        recipients: dict[TopicPartition, tuple[int, ...]] = {}
        for r in results:
            if isinstance(r, Exception):
                continue
            if r.leader_and_isr is None:
                failed[r.topic_partition] = StateChangeFailedError(
                    f"Failed to elect leader for partition {r.topic_partition} under strategy {strategy}")
            else:
                adjusted[r.topic_partition] = r.leader_and_isr
                recipients[r.topic_partition] = r.live_replicas
                self.unclean_leader_elections += r.unclean
                if r.unclean:  # the operator must be able to tell that records may have been lost
                    log.warning("Unclean leader election. Partition %s has elected %d leader, a replica that was "
                                "not in the ISR: records acknowledged since it left the ISR may be lost",
                                r.topic_partition, r.leader_and_isr.leader)
        for r in results:
            if isinstance(r, tuple):
                failed[r[0]] = r[1]
        if not adjusted:
            return failed, []
        update = await self.zk.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
        done: ElectionResults = dict(failed)
        for p, outcome in update.finished_partitions.items():
            tp = TopicPartition(*p)
            if isinstance(outcome, Exception):
                done[tp] = outcome
                continue
            state = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)  # type: ignore[arg-type]
            ctx.put_partition_leadership_info(tp, state)
            self.batch.add_leader_and_isr_request_for_brokers(
                recipients[tp], tp, state, ctx.partition_full_replica_assignment(tp), is_new=False)
            done[tp] = state.leader_and_isr
        retry = [TopicPartition(*p) for p in update.partitions_to_retry]
        for p in retry:
            log.debug("%sController failed to elect leader for partition %s. Attempted to write state %s, but "
                      "failed with bad ZK version. This will be retried.", self.log_ident, p, adjusted[p])
        return done, retry

    async def _elect(self, valid: list[tuple[TopicPartition, LeaderAndIsr]],
                     strategy: ElectionStrategy) -> list[ElectionResult | tuple[TopicPartition, Exception]]:
        ctx = self.ctx
        out: list[ElectionResult | tuple[TopicPartition, Exception]] = []
        kind = strategy.kind
        if kind is PartitionLeaderElectionStrategy.OFFLINE:
            no_live_isr = [(p, lai) for p, lai in valid
                           if not any(ctx.is_replica_online(r, p) for r in lai.isr)]
            unclean: dict[str, bool | Exception] = {}
            if no_live_isr and not strategy.allow_unclean:
                unclean = await self.unclean_leader_election_enabled({p.topic for p, _ in no_live_isr})
            for p, lai in valid:
                allow = False
                if any(p == q for q, _ in no_live_isr):
                    allow = strategy.allow_unclean or unclean.get(p.topic) is True
                    if isinstance(unclean.get(p.topic), Exception):
                        out.append((p, unclean[p.topic]))  # type: ignore[arg-type]
                        continue
                assignment = ctx.partition_replica_assignment(p)
                live = [r for r in assignment if ctx.is_replica_online(r, p)]
                out.append(leader_for_offline(p, lai, assignment, live, allow, self.is_leader_recovery_supported))
        elif kind is PartitionLeaderElectionStrategy.PREFERRED_REPLICA:
            for p, lai in valid:
                assignment = ctx.partition_replica_assignment(p)
                out.append(leader_for_preferred_replica(
                    p, lai, assignment, [r for r in assignment if ctx.is_replica_online(r, p)]))
        elif kind is PartitionLeaderElectionStrategy.CONTROLLED_SHUTDOWN:
            for p, lai in valid:
                assignment = ctx.partition_replica_assignment(p)
                out.append(leader_for_controlled_shutdown(
                    p, lai, assignment,
                    [r for r in assignment if ctx.is_replica_online(r, p, include_shutting_down_brokers=True)],
                    ctx.shutting_down_broker_ids))
        else:
            for p, lai in valid:
                target = list(ctx.partition_full_replica_assignment(p).replicas)
                out.append(leader_for_reassign(p, lai, target, [r for r in target if ctx.is_replica_online(r, p)]))
        return out
