"""Partition leader election and the LeaderAndIsr it writes, as Kafka 3.9's ZooKeeper controller.

Ported from core/src/main/scala/kafka/controller/Election.scala (the four `leaderFor*` functions,
which turn an elected leader into the new leader and ISR), `PartitionLeaderElectionAlgorithms` in
core/src/main/scala/kafka/controller/PartitionStateMachine.scala (who may lead), the initial
leader of a new partition in `ZkPartitionStateMachine.initializeLeaderAndIsrForPartitions`, the
ISR shrink of an offline replica in `ZkReplicaStateMachine.doRemoveReplicasFromIsr`, and the value
type `org.apache.kafka.metadata.LeaderAndIsr` (metadata/src/main/java/org/apache/kafka/metadata/
LeaderAndIsr.java; the Scala `kafka.api.LeaderAndIsr` before it).

Why the controller elects this way: the assignment order is the preference order (its head is the
preferred leader), so every election walks the assignment, not the ISR; only an ISR member has
every acknowledged record, so a leader from outside the ISR ("unclean") is allowed only when
`unclean.leader.election.enable` says data loss beats unavailability, and is marked RECOVERING
(KIP-704) so the new leader knows its log may lack records the old ISR acknowledged.

Every new leader bumps the leader epoch (followers and clients fence on it); the partition epoch
is the state znode's version in ZooKeeper mode, set by the compare-and-set that writes the
result (`with_partition_epoch`), never by the election itself.

Liveness is the caller's: `live_replicas` are the replicas on brokers the controller sees alive
and not shutting down (Kafka's `ControllerContext.isReplicaOnline`, which also excludes replicas
on offline log dirs). Pure functions, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from controller.topic_partition import TopicPartition

INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0
NO_LEADER = -1
NO_EPOCH = -1
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2


class LeaderRecoveryState(enum.IntEnum):
    """Kafka's `LeaderRecoveryState` (KIP-704), as stored in the state znode's
    "leader_recovery_state" and sent in LeaderAndIsr / AlterPartition."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch, ISR, recovery state and partition epoch.

    Immutable, as Kafka's: every change is a new value, so the controller's cache only changes
    when the znode write that carries it succeeded. `partition_epoch` is the state znode's
    version (ZooKeeper mode) -- the compare-and-set expects it, and an AlterPartition carrying an
    older one is stale.
    """

    leader: int
    leader_epoch: int = INITIAL_LEADER_EPOCH
    isr: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))

    @classmethod
    def during_delete(cls, isr: Sequence[int]) -> LeaderAndIsr:
        """The state Kafka writes while a topic is being deleted: leader -2 (`LeaderDuringDelete`)."""
        return cls(LEADER_DURING_DELETE, isr=tuple(isr))

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        """The same state at a new znode version (after a successful compare-and-set)."""
        return replace(self, partition_epoch=partition_epoch)

    def new_leader(self, leader: int) -> LeaderAndIsr:
        """Kafka's `newLeader`: another (or the same) leader, same ISR, leader epoch + 1."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1)

    def new_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """Kafka's `newLeaderAndIsr`: leader epoch + 1, the recovery state kept."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_recovering_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """Kafka's `newRecoveringLeaderAndIsr`: as `new_leader_and_isr`, marked RECOVERING."""
        return replace(
            self,
            leader=leader,
            leader_epoch=self.leader_epoch + 1,
            isr=tuple(isr),
            leader_recovery_state=LeaderRecoveryState.RECOVERING,
        )

    def new_epoch(self) -> LeaderAndIsr:
        """Kafka's `newEpoch`: same leader and ISR, leader epoch + 1 (makes replicas re-read it)."""
        return self.new_leader(self.leader)

    @property
    def leader_opt(self) -> int | None:
        return None if self.leader == NO_LEADER else self.leader

    def equals_allow_stale_partition_epoch(self, other: LeaderAndIsr | None) -> bool:
        """Kafka's `equalsAllowStalePartitionEpoch`: equal but for a partition epoch that is not
        newer than `other`'s -- how a leader recognises its own AlterPartition already applied."""
        if other is None:
            return False
        return (
            self.leader == other.leader
            and self.leader_epoch == other.leader_epoch
            and self.isr == other.isr
            and self.leader_recovery_state == other.leader_recovery_state
            and self.partition_epoch <= other.partition_epoch
        )

    def __str__(self) -> str:
        # Kafka's toString, ISR members printed as AlterPartition BrokerStates with no broker
        # epoch (ZooKeeper mode never stores one), so state-change log lines read the same.
        isr = ", ".join(f"BrokerState(brokerId={b}, brokerEpoch=-1)" for b in self.isr)
        return (
            f"LeaderAndIsr(leader={self.leader}, leaderEpoch={self.leader_epoch}, "
            f"isrWithBrokerEpoch=[{isr}], leaderRecoveryState={self.leader_recovery_state.name}, "
            f"partitionEpoch={self.partition_epoch})"
        )


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """The content of a partition's state znode: the LeaderAndIsr and the epoch of the
    controller that wrote it (a newer controller's write aborts an older one's election)."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int

    def __str__(self) -> str:
        lai = self.leader_and_isr
        return (
            f"(Leader:{lai.leader},ISR:{','.join(map(str, lai.isr))},"
            f"LeaderEpoch:{lai.leader_epoch},ControllerEpoch:{self.controller_epoch})"
        )


# -- PartitionLeaderElectionAlgorithms: who may lead ------------------------------------------


def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
) -> int | None:
    """The first live replica of the assignment that is in the ISR; failing that, with unclean
    election enabled, the first live replica of the assignment (Kafka then marks its
    UncleanLeaderElectionsPerSec meter -- `is_unclean` tells the caller to)."""
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_leader_election_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica
    return None


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The first live replica of the target assignment that is in the ISR."""
    return next((r for r in reassignment if r in live_replicas and r in isr), None)


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The assignment's head, only if it is live and in the ISR -- never another replica."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    """The first live replica of the assignment in the ISR that is not on a shutting-down broker."""
    return next(
        (
            r
            for r in assignment
            if r in live_replicas and r in isr and r not in shutting_down_brokers
        ),
        None,
    )


# -- Election: the LeaderAndIsr each strategy writes ------------------------------------------


class PartitionLeaderElectionStrategy(enum.Enum):
    """Kafka's four election strategies; `str()` is the name Kafka logs them by."""

    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"
    PREFERRED_REPLICA = "PreferredReplicaPartitionLeaderElectionStrategy"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """Kafka's `ElectionResult`: the new state to compare-and-set (None: no leader could be
    elected) and `live_replicas`, the brokers to send LeaderAndIsr to once it is written.

    `unclean` is ours: True when the leader came from outside the ISR, for the caller to count
    (Kafka's UncleanLeaderElectionsPerSec) and log.
    """

    topic_partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    live_replicas: tuple[int, ...]
    unclean: bool = False


def leader_for_offline(
    partition: TopicPartition,
    leader_and_isr: LeaderAndIsr | None,
    assignment: Sequence[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
    is_leader_recovery_supported: bool = True,
) -> ElectionResult:
    """Kafka's `Election.leaderForOffline` for one partition (new or offline leader).

    Clean: the new ISR is the old ISR without its dead members (the leader is one of the live
    ones). Unclean: the ISR becomes [leader] alone, and with leader recovery supported (IBP >=
    3.2, always so for Odradek) the state is RECOVERING. No current state: nothing to elect from.
    """
    live = tuple(r for r in assignment if r in live_replicas)
    if leader_and_isr is None:
        return ElectionResult(partition, None, live)
    isr = leader_and_isr.isr
    leader = offline_partition_leader_election(assignment, isr, live, unclean_leader_election_enabled)
    if leader is None:
        return ElectionResult(partition, None, live)
    if leader in isr:
        new_isr = [r for r in isr if r in live_replicas]
        return ElectionResult(partition, leader_and_isr.new_leader_and_isr(leader, new_isr), live)
    if is_leader_recovery_supported:
        new = leader_and_isr.new_recovering_leader_and_isr(leader, [leader])
    else:
        new = leader_and_isr.new_leader_and_isr(leader, [leader])
    return ElectionResult(partition, new, live, unclean=True)


def leader_for_reassign(
    partition: TopicPartition,
    leader_and_isr: LeaderAndIsr,
    reassignment: Sequence[int],
    live_replicas: Collection[int],
) -> ElectionResult:
    """Kafka's `Election.leaderForReassign`: a leader from the target replicas, ISR unchanged;
    LeaderAndIsr goes to every target replica (live or not), as Kafka's."""
    leader = reassign_partition_leader_election(
        reassignment, leader_and_isr.isr, [r for r in reassignment if r in live_replicas]
    )
    new = None if leader is None else leader_and_isr.new_leader(leader)
    return ElectionResult(partition, new, tuple(reassignment))


def leader_for_preferred_replica(
    partition: TopicPartition,
    leader_and_isr: LeaderAndIsr,
    assignment: Sequence[int],
    live_replicas: Collection[int],
) -> ElectionResult:
    """Kafka's `Election.leaderForPreferredReplica`: the assignment's head or nothing; ISR
    unchanged; LeaderAndIsr to every assigned replica."""
    leader = preferred_replica_partition_leader_election(
        assignment, leader_and_isr.isr, [r for r in assignment if r in live_replicas]
    )
    new = None if leader is None else leader_and_isr.new_leader(leader)
    return ElectionResult(partition, new, tuple(assignment))


def leader_for_controlled_shutdown(
    partition: TopicPartition,
    leader_and_isr: LeaderAndIsr,
    assignment: Sequence[int],
    live_or_shutting_down_replicas: Collection[int],
    shutting_down_broker_ids: Collection[int],
) -> ElectionResult:
    """Kafka's `Election.leaderForControlledShutdown`: a leader off the shutting-down brokers; the
    new ISR drops every shutting-down broker; LeaderAndIsr to the live-or-shutting-down replicas
    (the shutting-down broker must hear it is a follower now)."""
    live = tuple(r for r in assignment if r in live_or_shutting_down_replicas)
    isr = leader_and_isr.isr
    leader = controlled_shutdown_partition_leader_election(assignment, isr, live, shutting_down_broker_ids)
    new_isr = [r for r in isr if r not in shutting_down_broker_ids]
    new = None if leader is None else leader_and_isr.new_leader_and_isr(leader, new_isr)
    return ElectionResult(partition, new, live)


# -- the other LeaderAndIsr the controller computes -------------------------------------------


def initial_leader_and_isr(assignment: Sequence[int], live_replicas: Collection[int]) -> LeaderAndIsr | None:
    """NewPartition -> OnlinePartition (`initializeLeaderAndIsrForPartitions`): the first live
    assigned replica leads, every live assigned replica is in the ISR, epochs 0. None when no
    assigned replica is alive (the partition stays NewPartition)."""
    live = [r for r in assignment if r in live_replicas]
    if not live:
        return None
    return LeaderAndIsr(live[0], INITIAL_LEADER_EPOCH, tuple(live))


def no_live_replica_message(
    controller_id: int,
    controller_epoch: int,
    partition: TopicPartition,
    assignment: Sequence[int],
    live_broker_ids: Collection[int],
) -> str:
    """Kafka's StateChangeFailedException message when a new partition has no live replica."""
    return (
        f"Controller {controller_id} epoch {controller_epoch} encountered error during state change of "
        f"partition {partition} from New to Online, assigned replicas are "
        f"[{','.join(map(str, assignment))}], live brokers are [{_scala_set(live_broker_ids)}]. "
        "No assigned replica is alive."
    )


def _scala_set(ids: Collection[int]) -> str:
    return f"Set({', '.join(map(str, sorted(ids)))})"


def remove_replica_from_isr(leader_and_isr: LeaderAndIsr, replica_id: int) -> LeaderAndIsr:
    """The OfflineReplica transition's ISR shrink (`doRemoveReplicasFromIsr`), leader epoch + 1.

    A dead leader leaves the partition leaderless (-1) until an election; the replica leaves the
    ISR unless it is the ISR's last member: Kafka keeps the last one, so that when it comes back
    a clean election can still pick it rather than no one being eligible.
    """
    new_leader = NO_LEADER if replica_id == leader_and_isr.leader else leader_and_isr.leader
    isr = leader_and_isr.isr
    adjusted = isr if len(isr) == 1 else tuple(r for r in isr if r != replica_id)
    return leader_and_isr.new_leader_and_isr(new_leader, adjusted)


def failed_election_message(partition: TopicPartition, strategy: PartitionLeaderElectionStrategy, allow_unclean: bool = False) -> str:
    """Kafka's StateChangeFailedException message when a strategy elected no one."""
    shown = f"OfflinePartitionLeaderElectionStrategy({str(allow_unclean).lower()})" if (
        strategy is PartitionLeaderElectionStrategy.OFFLINE
    ) else str(strategy)
    return f"Failed to elect leader for partition {partition} under strategy {shown}"
