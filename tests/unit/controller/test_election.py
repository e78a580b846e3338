"""Leader election and LeaderAndIsr, against Kafka's tests.

The algorithm cases are Kafka's PartitionLeaderElectionAlgorithmsTest
(core/src/test/scala/unit/kafka/controller/) one for one; the LeaderAndIsr each strategy writes
follows Election.scala and the expectations of PartitionStateMachineTest (unclean election:
ISR = [leader], RECOVERING when leader recovery is supported; controlled shutdown drops the
shutting-down broker from the ISR; preferred/reassign keep the ISR; every new leader bumps the
leader epoch and keeps the partition epoch).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.election import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionLeaderElectionStrategy,
    controlled_shutdown_partition_leader_election,
    failed_election_message,
    initial_leader_and_isr,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
    no_live_replica_message,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
    remove_replica_from_isr,
)
from controller.topic_partition import TopicPartition

TP = TopicPartition("orders", 3)

# -- PartitionLeaderElectionAlgorithmsTest ---------------------------------------------------


def test_offline_partition_leader_election() -> None:
    assert offline_partition_leader_election([2, 4], [2, 4], {4}, False) == 4


def test_offline_last_isr_offline_unclean_disabled() -> None:
    assert offline_partition_leader_election([2, 4], [2], {4}, False) is None


def test_offline_last_isr_offline_unclean_enabled() -> None:
    assert offline_partition_leader_election([2, 4], [2], {4}, True) == 4


def test_offline_prefers_assignment_order_over_isr_order() -> None:
    assert offline_partition_leader_election([5, 1, 3], [3, 1], {1, 3, 5}, False) == 1
    assert offline_partition_leader_election([5, 1, 3], [3], {1, 5}, True) == 5  # unclean: first live
    assert offline_partition_leader_election([5, 1, 3], [3], set(), True) is None


def test_reassign_partition_leader_election() -> None:
    assert reassign_partition_leader_election([2, 4], [2, 4], {4}) == 4


def test_reassign_with_no_live_isr() -> None:
    assert reassign_partition_leader_election([2, 4], [2], set()) is None


def test_reassign_with_empty_isr() -> None:
    assert reassign_partition_leader_election([2, 4], [], {2}) is None


def test_preferred_replica_partition_leader_election() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [2, 4], {2, 4}) == 2


def test_preferred_replica_in_isr_not_live() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [2], set()) is None


def test_preferred_replica_not_in_isr_live() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [4], {2, 4}) is None


def test_preferred_replica_not_in_isr_not_live() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [], set()) is None
    assert preferred_replica_partition_leader_election([], [], set()) is None


def test_controlled_shutdown_partition_leader_election() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2}) == 4


def test_controlled_shutdown_last_isr_shutting_down() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2], {2, 4}, {2}) is None


def test_controlled_shutdown_all_isr_simultaneously_shutdown() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2, 4}) is None


# -- LeaderAndIsr ------------------------------------------------------------------------------


def test_leader_and_isr_epochs() -> None:
    """newLeader / newLeaderAndIsr / newEpoch bump the leader epoch only; the partition epoch is
    the znode version, changed by with_partition_epoch after a compare-and-set."""
    base = LeaderAndIsr(1, 5, [1, 2, 3], partition_epoch=9)
    assert base.isr == (1, 2, 3)
    assert base.new_leader(2) == LeaderAndIsr(2, 6, (1, 2, 3), LeaderRecoveryState.RECOVERED, 9)
    assert base.new_leader_and_isr(3, [3]) == LeaderAndIsr(3, 6, (3,), LeaderRecoveryState.RECOVERED, 9)
    assert base.new_epoch() == LeaderAndIsr(1, 6, (1, 2, 3), LeaderRecoveryState.RECOVERED, 9)
    assert base.new_recovering_leader_and_isr(2, [2]).leader_recovery_state is LeaderRecoveryState.RECOVERING
    recovering = base.new_recovering_leader_and_isr(2, [2])
    assert recovering.new_leader_and_isr(3, [2, 3]).leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert base.with_partition_epoch(10) == LeaderAndIsr(1, 5, (1, 2, 3), partition_epoch=10)
    assert LeaderAndIsr(1, isr=[1]) == LeaderAndIsr(1, 0, (1,), LeaderRecoveryState.RECOVERED, 0)
    assert LeaderAndIsr(NO_LEADER).leader_opt is None and base.leader_opt == 1
    assert LeaderAndIsr.during_delete([1, 2]) == LeaderAndIsr(LEADER_DURING_DELETE, 0, (1, 2))


def test_equals_allow_stale_partition_epoch() -> None:
    a = LeaderAndIsr(1, 5, (1, 2), partition_epoch=3)
    assert a.equals_allow_stale_partition_epoch(a.with_partition_epoch(4))
    assert a.equals_allow_stale_partition_epoch(a)
    assert not a.equals_allow_stale_partition_epoch(a.with_partition_epoch(2))
    assert not a.equals_allow_stale_partition_epoch(a.new_epoch())
    assert not a.equals_allow_stale_partition_epoch(None)


def test_string_forms_match_kafka() -> None:
    lai = LeaderAndIsr(1, 2, (1, 3), partition_epoch=4)
    assert str(lai) == (
        "LeaderAndIsr(leader=1, leaderEpoch=2, isrWithBrokerEpoch=[BrokerState(brokerId=1, brokerEpoch=-1), "
        "BrokerState(brokerId=3, brokerEpoch=-1)], leaderRecoveryState=RECOVERED, partitionEpoch=4)"
    )
    assert str(LeaderIsrAndControllerEpoch(lai, 7)) == "(Leader:1,ISR:1,3,LeaderEpoch:2,ControllerEpoch:7)"
    assert str(TP) == "orders-3"


# -- Election: the state each strategy writes ----------------------------------------------


def test_offline_clean_election_drops_dead_isr_members() -> None:
    current = LeaderAndIsr(1, 4, (1, 2, 3), partition_epoch=7)
    result = leader_for_offline(TP, current, [1, 2, 3], {2, 3}, False)
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2, 3), LeaderRecoveryState.RECOVERED, 7)
    assert result.live_replicas == (2, 3) and not result.unclean


def test_offline_unclean_election_sets_isr_to_leader_and_recovering() -> None:
    current = LeaderAndIsr(1, 4, (1,), partition_epoch=7)
    result = leader_for_offline(TP, current, [1, 2, 3], {3, 2}, True)
    assert result.unclean
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2,), LeaderRecoveryState.RECOVERING, 7)
    old_ibp = leader_for_offline(TP, current, [1, 2, 3], {2, 3}, True, is_leader_recovery_supported=False)
    assert old_ibp.leader_and_isr == LeaderAndIsr(2, 5, (2,), LeaderRecoveryState.RECOVERED, 7)


def test_offline_election_fails_without_eligible_replica_or_state() -> None:
    current = LeaderAndIsr(1, 4, (1,))
    failed = leader_for_offline(TP, current, [1, 2], {2}, False)
    assert failed.leader_and_isr is None and failed.live_replicas == (2,)
    assert leader_for_offline(TP, None, [1, 2], {1, 2}, True).leader_and_isr is None
    assert failed_election_message(TP, PartitionLeaderElectionStrategy.OFFLINE) == (
        "Failed to elect leader for partition orders-3 under strategy OfflinePartitionLeaderElectionStrategy(false)"
    )
    assert failed_election_message(TP, PartitionLeaderElectionStrategy.PREFERRED_REPLICA) == (
        "Failed to elect leader for partition orders-3 under strategy PreferredReplicaPartitionLeaderElectionStrategy"
    )


def test_offline_election_of_a_recovering_partition_stays_recovering() -> None:
    """A clean election keeps the recovery state (Kafka: "keep the previous leader recovery
    state") -- only the leader finishing recovery (AlterPartition) clears it."""
    current = LeaderAndIsr(2, 5, (2, 3), LeaderRecoveryState.RECOVERING)
    result = leader_for_offline(TP, current, [1, 2, 3], {3}, False)
    assert result.leader_and_isr == LeaderAndIsr(3, 6, (3,), LeaderRecoveryState.RECOVERING)


def test_preferred_replica_election_keeps_isr() -> None:
    current = LeaderAndIsr(2, 3, (2, 1), partition_epoch=5)
    result = leader_for_preferred_replica(TP, current, [1, 2], {1, 2})
    assert result.leader_and_isr == LeaderAndIsr(1, 4, (2, 1), partition_epoch=5)
    assert result.live_replicas == (1, 2)
    assert leader_for_preferred_replica(TP, current, [1, 2], {2}).leader_and_isr is None


def test_reassign_election_keeps_isr_and_sends_to_every_target() -> None:
    current = LeaderAndIsr(1, 3, (1, 4, 5))
    result = leader_for_reassign(TP, current, [4, 5, 6], {5, 6})
    assert result.leader_and_isr == LeaderAndIsr(5, 4, (1, 4, 5))
    assert result.live_replicas == (4, 5, 6)  # Kafka sends to the whole target set


def test_controlled_shutdown_election_removes_shutting_down_brokers_from_isr() -> None:
    current = LeaderAndIsr(1, 3, (1, 2, 3))
    result = leader_for_controlled_shutdown(TP, current, [1, 2, 3], {1, 2, 3}, {1})
    assert result.leader_and_isr == LeaderAndIsr(2, 4, (2, 3))
    assert result.live_replicas == (1, 2, 3)  # the shutting-down broker hears it is a follower
    assert leader_for_controlled_shutdown(TP, LeaderAndIsr(1, 3, (1,)), [1, 2], {1, 2}, {1}).leader_and_isr is None


def test_initial_leader_and_isr() -> None:
    """NewPartition -> OnlinePartition: first live replica leads, live replicas are the ISR."""
    assert initial_leader_and_isr([3, 1, 2], {1, 2}) == LeaderAndIsr(1, 0, (1, 2))
    assert initial_leader_and_isr([3, 1], set()) is None
    assert no_live_replica_message(0, 4, TP, [3, 1], {7, 5}) == (
        "Controller 0 epoch 4 encountered error during state change of partition orders-3 from New to Online, "
        "assigned replicas are [3,1], live brokers are [Set(5, 7)]. No assigned replica is alive."
    )


def test_remove_replica_from_isr() -> None:
    """doRemoveReplicasFromIsr: a dead leader leaves -1; the ISR's last member stays."""
    assert remove_replica_from_isr(LeaderAndIsr(1, 2, (1, 2)), 2) == LeaderAndIsr(1, 3, (1,))
    assert remove_replica_from_isr(LeaderAndIsr(1, 2, (1, 2)), 1) == LeaderAndIsr(NO_LEADER, 3, (2,))
    assert remove_replica_from_isr(LeaderAndIsr(1, 2, (1,)), 1) == LeaderAndIsr(NO_LEADER, 3, (1,))


# -- properties ----------------------------------------------------------------------------


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int], LeaderAndIsr, set[int]]:
    assignment = draw(st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(assignment), unique=True))
    live = set(draw(st.lists(st.integers(0, 9), unique=True)))
    leader = draw(st.sampled_from([*assignment, NO_LEADER]))
    return assignment, LeaderAndIsr(leader, draw(st.integers(0, 100)), tuple(isr), partition_epoch=3), live


@settings(max_examples=300, deadline=None)
@given(partitions(), st.booleans())
def test_offline_election_properties(case: tuple[list[int], LeaderAndIsr, set[int]], unclean_enabled: bool) -> None:
    """A clean election picks a live ISR member and keeps the ISR's live members; an unclean one
    happens only when enabled and no live ISR member exists; either bumps the epoch by one."""
    assignment, current, live = case
    result = leader_for_offline(TP, current, assignment, live, unclean_enabled)
    new = result.leader_and_isr
    live_isr = [r for r in current.isr if r in live]
    if new is None:
        assert not live_isr and (not unclean_enabled or not live & set(assignment))
        return
    assert new.leader in live and new.leader in assignment
    assert (new.leader_epoch, new.partition_epoch) == (current.leader_epoch + 1, 3)
    if live_isr:
        assert not result.unclean and new.leader in live_isr and new.isr == tuple(live_isr)
        assert new.leader == next(r for r in assignment if r in live_isr)
    else:
        assert unclean_enabled and result.unclean
        assert new.isr == (new.leader,) and new.leader_recovery_state is LeaderRecoveryState.RECOVERING


@settings(max_examples=300, deadline=None)
@given(partitions(), st.sets(st.integers(0, 9)))
def test_controlled_shutdown_properties(case: tuple[list[int], LeaderAndIsr, set[int]], shutting: set[int]) -> None:
    assignment, current, live = case
    result = leader_for_controlled_shutdown(TP, current, assignment, live | shutting, shutting)
    if result.leader_and_isr is not None:
        assert result.leader_and_isr.leader not in shutting
        assert result.leader_and_isr.leader in current.isr
        assert not set(result.leader_and_isr.isr) & shutting


def test_strategy_names() -> None:
    assert [str(s) for s in PartitionLeaderElectionStrategy] == [
        "OfflinePartitionLeaderElectionStrategy",
        "ReassignPartitionLeaderElectionStrategy",
        "PreferredReplicaPartitionLeaderElectionStrategy",
        "ControlledShutdownPartitionLeaderElectionStrategy",
    ]


@pytest.mark.parametrize("leader", [1, 2])
def test_new_leader_is_immutable_update(leader: int) -> None:
    base = LeaderAndIsr(1, 0, (1, 2))
    base.new_leader(leader)
    assert base == LeaderAndIsr(1, 0, (1, 2))
