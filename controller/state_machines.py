"""The controller's partition and replica state machines: states, legal transitions, and the
state-change log lines, as Kafka 3.9's ZooKeeper controller.

Ported from core/src/main/scala/kafka/controller/PartitionStateMachine.scala and
ReplicaStateMachine.scala (the `PartitionState` / `ReplicaState` objects with their
`validPreviousStates`, `initializePartitionState` / `initializeReplicaState`, and the
`logInvalidTransition` / `logFailedStateChange` / `logSuccessfulTransition` messages) and
StateChangeLogger.scala (the "state.change.logger" logger and its "[Controller id=.. epoch=..] "
prefix). Why a table: every state change the controller makes (topic creation, broker death,
topic deletion, reassignment) is checked against it first, so a bug in an event handler shows up
as one IllegalStateException line in the state-change log instead of a corrupt partition.

Only the bookkeeping lives here; the side effects of a transition (electing a leader, writing the
state znode, queueing LeaderAndIsr / StopReplica / UpdateMetadata) belong to the controller that
drives these machines. The controller calls `check_valid_state_changes` to split a batch as Kafka
does (invalid ones are logged, valid ones proceed), then `put_state` for each transition that
succeeded, which writes Kafka's success line. `transition` is the strict single-step form that
raises IllegalStateChange with Kafka's message.

Partition states (valid previous states):
  NewPartition          <- NonExistentPartition           replicas assigned, no leader yet
  OnlinePartition       <- New, Online, OfflinePartition  a leader is elected
  OfflinePartition      <- New, Online, OfflinePartition  the leader died
  NonExistentPartition  <- OfflinePartition               never created, or deleted

Replica states (valid previous states):
  NewReplica                 <- NonExistentReplica            created by reassignment
  OnlineReplica              <- New, Online, Offline, ReplicaDeletionIneligible
  OfflineReplica             <- New, Online, Offline, ReplicaDeletionIneligible
  ReplicaDeletionStarted     <- OfflineReplica                StopReplica(delete) sent
  ReplicaDeletionSuccessful  <- ReplicaDeletionStarted
  ReplicaDeletionIneligible  <- OfflineReplica, ReplicaDeletionStarted
  NonExistentReplica         <- ReplicaDeletionSuccessful

Kafka's "trace" lines are logged at DEBUG (Python has no TRACE). Owned by the controller's event
loop task; no I/O beyond logging.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from controller.election import LeaderAndIsr
from controller.topic_partition import PartitionAndReplica, TopicPartition

STATE_CHANGE_LOGGER = "state.change.logger"


class PartitionState(enum.Enum):
    """Kafka's `PartitionState` case objects; `state` is Kafka's byte, `str()` its name."""

    NewPartition = 0
    OnlinePartition = 1
    OfflinePartition = 2
    NonExistentPartition = 3

    @property
    def state(self) -> int:
        return self.value

    @property
    def valid_previous_states(self) -> tuple[PartitionState, ...]:
        return _PARTITION_PREVIOUS[self]

    def __str__(self) -> str:
        return self.name


_PARTITION_PREVIOUS: dict[PartitionState, tuple[PartitionState, ...]] = {
    PartitionState.NewPartition: (PartitionState.NonExistentPartition,),
    PartitionState.OnlinePartition: (
        PartitionState.NewPartition,
        PartitionState.OnlinePartition,
        PartitionState.OfflinePartition,
    ),
    PartitionState.OfflinePartition: (
        PartitionState.NewPartition,
        PartitionState.OnlinePartition,
        PartitionState.OfflinePartition,
    ),
    PartitionState.NonExistentPartition: (PartitionState.OfflinePartition,),
}


class ReplicaState(enum.Enum):
    """Kafka's `ReplicaState` case objects; `state` is Kafka's byte, `str()` its name."""

    NewReplica = 1
    OnlineReplica = 2
    OfflineReplica = 3
    ReplicaDeletionStarted = 4
    ReplicaDeletionSuccessful = 5
    ReplicaDeletionIneligible = 6
    NonExistentReplica = 7

    @property
    def state(self) -> int:
        return self.value

    @property
    def valid_previous_states(self) -> tuple[ReplicaState, ...]:
        return _REPLICA_PREVIOUS[self]

    def __str__(self) -> str:
        return self.name


_REPLICA_PREVIOUS: dict[ReplicaState, tuple[ReplicaState, ...]] = {
    ReplicaState.NewReplica: (ReplicaState.NonExistentReplica,),
    ReplicaState.OnlineReplica: (
        ReplicaState.NewReplica,
        ReplicaState.OnlineReplica,
        ReplicaState.OfflineReplica,
        ReplicaState.ReplicaDeletionIneligible,
    ),
    ReplicaState.OfflineReplica: (
        ReplicaState.NewReplica,
        ReplicaState.OnlineReplica,
        ReplicaState.OfflineReplica,
        ReplicaState.ReplicaDeletionIneligible,
    ),
    ReplicaState.ReplicaDeletionStarted: (ReplicaState.OfflineReplica,),
    ReplicaState.ReplicaDeletionSuccessful: (ReplicaState.ReplicaDeletionStarted,),
    ReplicaState.ReplicaDeletionIneligible: (
        ReplicaState.OfflineReplica,
        ReplicaState.ReplicaDeletionStarted,
    ),
    ReplicaState.NonExistentReplica: (ReplicaState.ReplicaDeletionSuccessful,),
}


class IllegalStateChange(Exception):
    """A transition from a state that is not one of the target's valid previous states; the
    message is that of the IllegalStateException Kafka logs for it."""


class StateChangeLogger:
    """Kafka's `StateChangeLogger`: the "state.change.logger" logger, every line prefixed
    "[Controller id=<id> epoch=<epoch>] " (or "[Broker id=<id>] " outside the controller), so
    the state-change log reads as Kafka's state-change.log."""

    def __init__(self, broker_id: int, in_controller_context: bool = True, controller_epoch: int | None = None) -> None:
        if controller_epoch is not None and not in_controller_context:
            raise ValueError("Controller epoch should only be defined if inControllerContext is true")
        self.broker_id = broker_id
        self.in_controller_context = in_controller_context
        self.controller_epoch = controller_epoch
        prefix = "Controller" if in_controller_context else "Broker"
        epoch = "" if controller_epoch is None else f" epoch={controller_epoch}"
        self.log_ident = f"[{prefix} id={broker_id}{epoch}] "
        self.logger = logging.getLogger(STATE_CHANGE_LOGGER)

    def with_controller_epoch(self, controller_epoch: int) -> StateChangeLogger:
        return StateChangeLogger(self.broker_id, self.in_controller_context, controller_epoch)

    def message_with_prefix(self, message: str) -> str:
        return self.log_ident + message

    def trace(self, message: str) -> None:
        self.logger.debug("%s%s", self.log_ident, message)

    def info(self, message: str) -> None:
        self.logger.info("%s%s", self.log_ident, message)

    def error(self, message: str, cause: BaseException | None = None) -> None:
        # Kafka logs the Throwable after the message; we append its message on the same line.
        if cause is None:
            self.logger.error("%s%s", self.log_ident, message)
        else:
            self.logger.error("%s%s: %s: %s", self.log_ident, message, type(cause).__name__, cause)


K = TypeVar("K")
S = TypeVar("S", PartitionState, ReplicaState)


class _StateMachine(Generic[K, S]):
    """The bookkeeping both machines share: a state per key, defaulting to the non-existent
    state, and the split of a batch into valid and invalid transitions (Kafka's
    `ControllerContext.checkValidPartitionStateChange` / `checkValidReplicaStateChange`)."""

    non_existent: S

    def __init__(self, controller_id: int, controller_epoch: int = 0) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.states: dict[K, S] = {}
        self._logger = StateChangeLogger(controller_id)

    @property
    def state_change_log(self) -> StateChangeLogger:
        return self._logger.with_controller_epoch(self.controller_epoch)

    def state(self, key: K) -> S:
        return self.states.get(key, self.non_existent)

    def in_state(self, state: S) -> set[K]:
        return {k for k, s in self.states.items() if s is state}

    def is_valid_transition(self, key: K, target: S) -> bool:
        return self.state(key) in target.valid_previous_states

    def check_valid_state_changes(self, keys: Iterable[K], target: S) -> tuple[list[K], list[K]]:
        """(valid, invalid) as Kafka splits a batch; unknown keys are first put in the
        non-existent state, and every invalid one is logged as Kafka logs it."""
        valid: list[K] = []
        invalid: list[K] = []
        for key in keys:
            self.states.setdefault(key, self.non_existent)
            (valid if self.is_valid_transition(key, target) else invalid).append(key)
        for key in invalid:
            self.log_invalid_transition(key, target)
        return valid, invalid

    def transition(self, key: K, target: S, **details: object) -> S:
        """Move `key` to `target` or raise IllegalStateChange (logged first, as Kafka logs it);
        returns the previous state."""
        if not self.is_valid_transition(key, target):
            exc = self.log_invalid_transition(key, target)
            raise exc
        return self.put_state(key, target, **details)

    def put_state(self, key: K, target: S, **details: object) -> S:
        raise NotImplementedError

    def log_invalid_transition(self, key: K, target: S) -> IllegalStateChange:
        raise NotImplementedError


class PartitionStateMachine(_StateMachine[TopicPartition, PartitionState]):
    """Kafka's partition state bookkeeping (ControllerContext.partitionStates + the messages of
    ZkPartitionStateMachine)."""

    non_existent = PartitionState.NonExistentPartition

    def initialize(
        self,
        partitions: Iterable[TopicPartition],
        leadership: Mapping[TopicPartition, LeaderAndIsr],
        is_replica_online: Callable[[int, TopicPartition], bool],
    ) -> None:
        """Kafka's `initializePartitionState` on becoming controller: a partition with no state
        znode is New; with one, Online if its leader is alive, else Offline."""
        for partition in partitions:
            lai = leadership.get(partition)
            if lai is None:
                self.states[partition] = PartitionState.NewPartition
            elif is_replica_online(lai.leader, partition):
                self.states[partition] = PartitionState.OnlinePartition
            else:
                self.states[partition] = PartitionState.OfflinePartition

    def put_state(
        self,
        key: TopicPartition,
        target: PartitionState,
        *,
        assigned_replicas: Sequence[int] = (),
        leader_and_isr: LeaderAndIsr | None = None,
        **_: object,
    ) -> PartitionState:
        """Record a transition that succeeded, with Kafka's line for it; returns the old state.

        NewPartition lines carry the assigned replicas, OnlinePartition lines the new state
        (Kafka logs both at INFO); Offline and NonExistent lines are trace."""
        previous = self.state(key)
        log = self.state_change_log
        if target is PartitionState.NewPartition:
            log.info(
                f"Changed partition {key} state from {previous} to {target} with assigned replicas "
                f"{','.join(map(str, assigned_replicas))}"
            )
        elif target is PartitionState.OnlinePartition:
            log.info(f"Changed partition {key} from {previous} to {target} with state {leader_and_isr}")
        else:
            log.trace(f"Changed partition {key} state from {previous} to {target}")
        self.states[key] = target
        return previous

    def log_invalid_transition(self, key: TopicPartition, target: PartitionState) -> IllegalStateChange:
        current = self.state(key)
        exc = IllegalStateChange(
            f"Partition {key} should be in one of "
            f"{','.join(map(str, target.valid_previous_states))} states before moving to {target} "
            f"state. Instead it is in {current} state"
        )
        self.log_failed_state_change(key, current, target, exc)
        return exc

    def log_failed_state_change(
        self, key: TopicPartition, current: PartitionState, target: PartitionState, cause: BaseException
    ) -> None:
        self.state_change_log.error(
            f"Controller {self.controller_id} epoch {self.controller_epoch} failed to change state "
            f"for partition {key} from {current} to {target}",
            cause,
        )


class ReplicaStateMachine(_StateMachine[PartitionAndReplica, ReplicaState]):
    """Kafka's replica state bookkeeping (ControllerContext.replicaStates + the messages of
    ZkReplicaStateMachine). NonExistentReplica removes the entry, as Kafka's removeReplicaState."""

    non_existent = ReplicaState.NonExistentReplica

    def initialize(
        self,
        assignments: Mapping[TopicPartition, Sequence[int]],
        is_replica_online: Callable[[int, TopicPartition], bool],
    ) -> None:
        """Kafka's `initializeReplicaState`: each assigned replica Online if its broker is alive,
        else ReplicaDeletionIneligible (so a topic deletion in progress waits for it)."""
        for partition, replicas in assignments.items():
            for replica in replicas:
                key = PartitionAndReplica(partition, replica)
                self.states[key] = (
                    ReplicaState.OnlineReplica
                    if is_replica_online(replica, partition)
                    else ReplicaState.ReplicaDeletionIneligible
                )

    def put_state(self, key: PartitionAndReplica, target: ReplicaState, **_: object) -> ReplicaState:
        """Record a transition that succeeded, with Kafka's trace line; returns the old state."""
        previous = self.state(key)
        self.state_change_log.trace(
            f"Changed state of replica {key.replica} for partition {key.topic_partition} "
            f"from {previous} to {target}"
        )
        if target is ReplicaState.NonExistentReplica:
            self.states.pop(key, None)
        else:
            self.states[key] = target
        return previous

    def log_invalid_transition(self, key: PartitionAndReplica, target: ReplicaState) -> IllegalStateChange:
        current = self.state(key)
        exc = IllegalStateChange(
            f"Replica {key} should be in the {','.join(map(str, target.valid_previous_states))} "
            f"states before moving to {target} state. Instead it is in {current} state"
        )
        self.log_failed_state_change(key, current, target, exc)
        return exc

    def log_failed_state_change(
        self, key: PartitionAndReplica, current: ReplicaState, target: ReplicaState, cause: BaseException
    ) -> None:
        self.state_change_log.error(
            f"Controller {self.controller_id} epoch {self.controller_epoch} initiated state change of "
            f"replica {key.replica} for partition {key.topic_partition} from {current} to {target} failed",
            cause,
        )

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionAndReplica]:
        return {k for k, s in self.states.items() if k.topic == topic and s is state}
