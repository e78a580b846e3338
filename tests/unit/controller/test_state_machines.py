"""Partition and replica state machines: every transition of Kafka's tables, and the
state-change log lines.

Every (from, to) pair is checked against the valid previous states of PartitionStateMachine.scala
/ ReplicaStateMachine.scala, written out here a second time from Kafka's tables so a wrong entry
in either copy fails; the invalid transitions of Kafka's PartitionStateMachineTest and
ReplicaStateMachineTest (e.g. testInvalidNonexistentPartitionToOnlinePartitionTransition,
testInvalidReplicaDeletionSuccessfulToOnlineReplicaTransition) are among them.
"""

from __future__ import annotations

import itertools
import logging

import pytest

from controller.election import LeaderAndIsr
from controller.state_machines import (
    STATE_CHANGE_LOGGER,
    IllegalStateChange,
    PartitionState,
    PartitionStateMachine,
    ReplicaState,
    ReplicaStateMachine,
    StateChangeLogger,
)
from controller.topic_partition import PartitionAndReplica, TopicPartition

P = PartitionState
R = ReplicaState
TP = TopicPartition("t", 0)
REPLICA = PartitionAndReplica(TP, 5)

PARTITION_ALLOWED = {
    (P.NonExistentPartition, P.NewPartition),
    (P.NewPartition, P.OnlinePartition),
    (P.OnlinePartition, P.OnlinePartition),
    (P.OfflinePartition, P.OnlinePartition),
    (P.NewPartition, P.OfflinePartition),
    (P.OnlinePartition, P.OfflinePartition),
    (P.OfflinePartition, P.OfflinePartition),
    (P.OfflinePartition, P.NonExistentPartition),
}
REPLICA_ALLOWED = {
    (R.NonExistentReplica, R.NewReplica),
    *((s, R.OnlineReplica) for s in (R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionIneligible)),
    *((s, R.OfflineReplica) for s in (R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionIneligible)),
    (R.OfflineReplica, R.ReplicaDeletionStarted),
    (R.ReplicaDeletionStarted, R.ReplicaDeletionSuccessful),
    (R.ReplicaDeletionStarted, R.ReplicaDeletionIneligible),
    (R.OfflineReplica, R.ReplicaDeletionIneligible),
    (R.ReplicaDeletionSuccessful, R.NonExistentReplica),
}


def partition_machine_in(state: PartitionState) -> PartitionStateMachine:
    m = PartitionStateMachine(controller_id=1, controller_epoch=3)
    if state is not P.NonExistentPartition:
        m.states[TP] = state
    return m


def replica_machine_in(state: ReplicaState) -> ReplicaStateMachine:
    m = ReplicaStateMachine(controller_id=1, controller_epoch=3)
    if state is not R.NonExistentReplica:
        m.states[REPLICA] = state
    return m


def test_state_bytes_match_kafka() -> None:
    assert [(s.name, s.state) for s in PartitionState] == [
        ("NewPartition", 0), ("OnlinePartition", 1), ("OfflinePartition", 2), ("NonExistentPartition", 3),
    ]
    assert [s.state for s in ReplicaState] == list(range(1, 8))


@pytest.mark.parametrize(("current", "target"), list(itertools.product(PartitionState, PartitionState)))
def test_every_partition_transition(current: PartitionState, target: PartitionState) -> None:
    m = partition_machine_in(current)
    if (current, target) in PARTITION_ALLOWED:
        assert m.transition(TP, target, leader_and_isr=LeaderAndIsr(1, isr=(1,))) is current
        assert m.state(TP) is target
    else:
        with pytest.raises(IllegalStateChange):
            m.transition(TP, target)
        assert m.state(TP) is current


@pytest.mark.parametrize(("current", "target"), list(itertools.product(ReplicaState, ReplicaState)))
def test_every_replica_transition(current: ReplicaState, target: ReplicaState) -> None:
    m = replica_machine_in(current)
    if (current, target) in REPLICA_ALLOWED:
        assert m.transition(REPLICA, target) is current
        assert m.state(REPLICA) is target
        assert (REPLICA in m.states) is (target is not R.NonExistentReplica)  # removeReplicaState
    else:
        with pytest.raises(IllegalStateChange):
            m.transition(REPLICA, target)
        assert m.state(REPLICA) is current


def test_invalid_partition_transition_message_and_log(caplog: pytest.LogCaptureFixture) -> None:
    """testInvalidNonexistentPartitionToOnlinePartitionTransition, with Kafka's wording."""
    m = partition_machine_in(P.NonExistentPartition)
    with caplog.at_level(logging.DEBUG, logger=STATE_CHANGE_LOGGER), pytest.raises(IllegalStateChange) as e:
        m.transition(TP, P.OnlinePartition)
    assert str(e.value) == (
        "Partition t-0 should be in one of NewPartition,OnlinePartition,OfflinePartition states before "
        "moving to OnlinePartition state. Instead it is in NonExistentPartition state"
    )
    [record] = caplog.records
    assert (record.name, record.levelno) == ("state.change.logger", logging.ERROR)
    assert record.getMessage() == (
        "[Controller id=1 epoch=3] Controller 1 epoch 3 failed to change state for partition t-0 from "
        "NonExistentPartition to OnlinePartition: IllegalStateChange: " + str(e.value)
    )


def test_invalid_replica_transition_message_and_log(caplog: pytest.LogCaptureFixture) -> None:
    """testInvalidReplicaDeletionSuccessfulToOnlineReplicaTransition, with Kafka's wording."""
    m = replica_machine_in(R.ReplicaDeletionSuccessful)
    with caplog.at_level(logging.DEBUG, logger=STATE_CHANGE_LOGGER), pytest.raises(IllegalStateChange) as e:
        m.transition(REPLICA, R.OnlineReplica)
    assert str(e.value) == (
        "Replica [Topic=t,Partition=0,Replica=5] should be in the NewReplica,OnlineReplica,OfflineReplica,"
        "ReplicaDeletionIneligible states before moving to OnlineReplica state. Instead it is in "
        "ReplicaDeletionSuccessful state"
    )
    [record] = caplog.records
    assert record.getMessage().startswith(
        "[Controller id=1 epoch=3] Controller 1 epoch 3 initiated state change of replica 5 for partition t-0 "
        "from ReplicaDeletionSuccessful to OnlineReplica failed: IllegalStateChange: Replica "
    )


def test_successful_transitions_log_kafkas_lines(caplog: pytest.LogCaptureFixture) -> None:
    m = PartitionStateMachine(controller_id=1, controller_epoch=3)
    with caplog.at_level(logging.DEBUG, logger=STATE_CHANGE_LOGGER):
        m.transition(TP, P.NewPartition, assigned_replicas=[5, 6])
        m.transition(TP, P.OnlinePartition, leader_and_isr=LeaderAndIsr(5, isr=(5, 6)))
        m.transition(TP, P.OfflinePartition)
        r = ReplicaStateMachine(controller_id=1, controller_epoch=3)
        r.transition(REPLICA, R.NewReplica)
    lines = [(rec.levelno, rec.getMessage()) for rec in caplog.records]
    prefix = "[Controller id=1 epoch=3] "
    assert lines == [
        (logging.INFO, prefix + "Changed partition t-0 state from NonExistentPartition to NewPartition with "
                                "assigned replicas 5,6"),
        (logging.INFO, prefix + "Changed partition t-0 from NewPartition to OnlinePartition with state "
                                "LeaderAndIsr(leader=5, leaderEpoch=0, isrWithBrokerEpoch=[BrokerState(brokerId=5, "
                                "brokerEpoch=-1), BrokerState(brokerId=6, brokerEpoch=-1)], "
                                "leaderRecoveryState=RECOVERED, partitionEpoch=0)"),
        (logging.DEBUG, prefix + "Changed partition t-0 state from OnlinePartition to OfflinePartition"),
        (logging.DEBUG, prefix + "Changed state of replica 5 for partition t-0 from NonExistentReplica to NewReplica"),
    ]


def test_check_valid_state_changes_splits_a_batch_as_kafka(caplog: pytest.LogCaptureFixture) -> None:
    """Unknown partitions start NonExistentPartition; invalid ones are logged, not raised."""
    m = PartitionStateMachine(controller_id=0)
    a, b, c = (TopicPartition("t", i) for i in range(3))
    m.states[b] = P.OnlinePartition
    with caplog.at_level(logging.ERROR, logger=STATE_CHANGE_LOGGER):
        valid, invalid = m.check_valid_state_changes([a, b, c], P.NewPartition)
    assert (valid, invalid) == ([a, c], [b])
    assert m.states == {a: P.NonExistentPartition, b: P.OnlinePartition, c: P.NonExistentPartition}
    assert len(caplog.records) == 1 and "partition t-1 from OnlinePartition to NewPartition" in caplog.records[0].getMessage()
    assert m.in_state(P.NonExistentPartition) == {a, c}


def test_initialize_partition_state() -> None:
    """initializePartitionState: no state znode -> New; leader alive -> Online; else Offline."""
    a, b, c = (TopicPartition("t", i) for i in range(3))
    m = PartitionStateMachine(controller_id=0)
    m.initialize([a, b, c], {b: LeaderAndIsr(1, isr=(1,)), c: LeaderAndIsr(2, isr=(2,))}, lambda r, _p: r == 1)
    assert m.states == {a: P.NewPartition, b: P.OnlinePartition, c: P.OfflinePartition}


def test_initialize_replica_state() -> None:
    """initializeReplicaState: live -> Online, dead -> ReplicaDeletionIneligible."""
    m = ReplicaStateMachine(controller_id=0)
    m.initialize({TP: [1, 2]}, lambda r, _p: r == 1)
    assert m.states == {
        PartitionAndReplica(TP, 1): R.OnlineReplica,
        PartitionAndReplica(TP, 2): R.ReplicaDeletionIneligible,
    }
    assert m.replicas_in_state("t", R.OnlineReplica) == {PartitionAndReplica(TP, 1)}
    assert m.replicas_in_state("other", R.OnlineReplica) == set()


def test_state_change_logger_prefixes() -> None:
    assert StateChangeLogger(4).log_ident == "[Controller id=4] "
    assert StateChangeLogger(4).with_controller_epoch(9).message_with_prefix("x") == "[Controller id=4 epoch=9] x"
    assert StateChangeLogger(4, in_controller_context=False).log_ident == "[Broker id=4] "
    with pytest.raises(ValueError):
        StateChangeLogger(4, in_controller_context=False, controller_epoch=1)


def test_topic_deletion_walk() -> None:
    """The replica path of a topic deletion: Online -> Offline -> DeletionStarted ->
    DeletionSuccessful -> NonExistent, with a failed StopReplica parking it in Ineligible and a
    retry going back through Offline."""
    m = replica_machine_in(R.OnlineReplica)
    for target in (R.OfflineReplica, R.ReplicaDeletionStarted, R.ReplicaDeletionIneligible, R.OfflineReplica,
                   R.ReplicaDeletionStarted, R.ReplicaDeletionSuccessful, R.NonExistentReplica):
        m.transition(REPLICA, target)
    assert REPLICA not in m.states
