"""Kafka's ControllerEventManager (core/src/main/scala/kafka/controller/ControllerEventManager.scala)
and the controller's events and states (KafkaController.scala's `ControllerEvent` case classes,
ControllerState.scala), on asyncio.

Why one queue: every change of the controller's state -- a ZooKeeper watch firing, a broker's
response arriving, an admin request, a session expiring -- becomes an event, and one task takes
the events in order and runs each to completion (awaiting its ZooKeeper I/O) before the next.
Nothing else touches the controller's context, so no lock is needed and no two state changes
interleave, exactly as Kafka's single "controller-event-thread".

`clear_and_put` drops every queued event (each is *preempted*: told it will not run, so a
waiting caller gets NOT_CONTROLLER instead of hanging) and queues one event alone -- Kafka does
this for `Expire` when the ZooKeeper session is lost, since whatever was queued assumed the old
session. An event is run or preempted, never both (`QueuedEvent.spent`).

Who may call: the event loop; `put` from watch callbacks, response callbacks and request handlers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

__all__ = [
    "AlterPartitionReceived",
    "ApiPartitionReassignment",
    "AutoPreferredReplicaLeaderElection",
    "BrokerChange",
    "BrokerModifications",
    "ControlledShutdown",
    "ControllerChange",
    "ControllerEvent",
    "ControllerEventManager",
    "ControllerEventProcessor",
    "ControllerState",
    "Expire",
    "LeaderAndIsrResponseReceived",
    "ListPartitionReassignments",
    "LogDirEventNotification",
    "PartitionModifications",
    "QueuedEvent",
    "Reelect",
    "RegisterBrokerAndReelect",
    "ReplicaLeaderElection",
    "ShutdownEventThread",
    "Startup",
    "TopicChange",
    "TopicDeletion",
    "TopicDeletionStopReplicaResponseReceived",
    "UpdateMetadataResponseReceived",
    "ZkPartitionReassignment",
]

log = logging.getLogger(__name__)

CONTROLLER_EVENT_THREAD_NAME = "controller-event-thread"


class ControllerState(enum.Enum):
    """Kafka 3.9's ControllerState: what the controller is busy with (the ControllerState metric's
    value is `value`)."""

    Idle = 0
    ControllerChange = 1
    BrokerChange = 2
    TopicChange = 3
    TopicDeletion = 4
    AlterPartitionReassignment = 5
    AutoLeaderBalance = 6
    ManualLeaderBalance = 7
    ControlledShutdown = 8
    IsrChange = 9
    LeaderAndIsrResponseReceived = 10
    LogDirChange = 11
    ControllerShutdown = 12
    UncleanLeaderElectionEnable = 13
    TopicUncleanLeaderElectionEnable = 14
    ListPartitionReassignment = 15
    UpdateMetadataResponseReceived = 16
    UpdateFeatures = 17

    def __str__(self) -> str:
        return self.name


# -- events -----------------------------------------------------------------------------------


class ControllerEvent:
    """One thing for the controller to do. `state` is what the controller is busy with while it
    runs; `preempt()` runs instead when the event is dropped (Kafka calls it on the thread that
    cleared the queue): events with a waiting caller answer it there."""

    state: ClassVar[ControllerState] = ControllerState.Idle

    def preempt(self) -> None:
        pass

    def __str__(self) -> str:
        # Kafka prints a case object by its name and a case class with its fields
        names = [f.name for f in dataclasses.fields(self)] if dataclasses.is_dataclass(self) else []
        if not names:
            return type(self).__name__
        return f"{type(self).__name__}({','.join(str(getattr(self, n)) for n in names)})"


@dataclass(eq=False)
class Startup(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(eq=False)
class ControllerChange(ControllerEvent):
    """/controller was created or changed: maybe resign."""

    state: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(eq=False)
class Reelect(ControllerEvent):
    """/controller was deleted: maybe resign, then try to become the controller."""

    state: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(eq=False)
class RegisterBrokerAndReelect(ControllerEvent):
    """A new ZooKeeper session replaced an expired one: register the broker again, re-elect."""

    state: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(eq=False)
class Expire(ControllerEvent):
    """The ZooKeeper session expired: whatever this broker was, it is not the controller now."""

    state: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(eq=False)
class ShutdownEventThread(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.ControllerShutdown


@dataclass(eq=False)
class BrokerChange(ControllerEvent):
    """The children of /brokers/ids changed: brokers came, went or bounced."""

    state: ClassVar[ControllerState] = ControllerState.BrokerChange


@dataclass(eq=False)
class BrokerModifications(ControllerEvent):
    """A live broker's registration changed (endpoints, features)."""

    state: ClassVar[ControllerState] = ControllerState.BrokerChange
    broker_id: int


@dataclass(eq=False)
class TopicChange(ControllerEvent):
    """The children of /brokers/topics changed: topics were created (or their znodes removed)."""

    state: ClassVar[ControllerState] = ControllerState.TopicChange


@dataclass(eq=False)
class PartitionModifications(ControllerEvent):
    """A topic's assignment znode changed: partitions were added (CreatePartitions)."""

    state: ClassVar[ControllerState] = ControllerState.TopicChange
    topic: str


@dataclass(eq=False)
class TopicDeletion(ControllerEvent):
    """The children of /admin/delete_topics changed: deletions were asked for."""

    state: ClassVar[ControllerState] = ControllerState.TopicDeletion


@dataclass(eq=False)
class TopicDeletionResume(ControllerEvent):
    """Start the next batch of the topics queued for deletion (TopicDeletionManager starts at
    most `deletion_batch_size` topics per event and queues this for the rest, behind whatever
    events came in meanwhile -- a new topic's TopicChange)."""

    state: ClassVar[ControllerState] = ControllerState.TopicDeletion


@dataclass(eq=False)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    """A broker answered a StopReplica(delete=true) for partitions of topics being deleted."""

    state: ClassVar[ControllerState] = ControllerState.TopicDeletion
    replica_id: int
    request_error: int
    partition_errors: dict[Any, int]


@dataclass(eq=False)
class LogDirEventNotification(ControllerEvent):
    """The children of /log_dir_event_notification changed: a broker lost a log dir."""

    state: ClassVar[ControllerState] = ControllerState.LogDirChange


@dataclass(eq=False)
class LeaderAndIsrResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.LeaderAndIsrResponseReceived
    response: Any
    broker_id: int


@dataclass(eq=False)
class UpdateMetadataResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.UpdateMetadataResponseReceived
    response: Any
    broker_id: int


@dataclass(eq=False)
class ControlledShutdown(ControllerEvent):
    """A broker asks to move its leaderships away before it stops; `callback(result_or_exc)`."""

    state: ClassVar[ControllerState] = ControllerState.ControlledShutdown
    broker_id: int
    broker_epoch: int
    callback: Callable[[Any], None] = field(repr=False)

    def preempt(self) -> None:
        from controller.zk.kafka_zk_client import ControllerMovedError

        self.callback(ControllerMovedError("Controller moved to another broker"))


@dataclass(eq=False)
class AlterPartitionReceived(ControllerEvent):
    """A leader asks to change a partition's ISR (AlterPartition); `callback(response)`."""

    state: ClassVar[ControllerState] = ControllerState.IsrChange
    request: Any
    version: int
    callback: Callable[[Any], None] = field(repr=False)

    def preempt(self) -> None:
        # Kafka lets the leader's request time out; answering NOT_CONTROLLER sends it to find
        # the new controller at once
        from protocol.errors import ErrorCode
        from protocol.messages import AlterPartitionResponse

        self.callback(AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER))


@dataclass(eq=False)
class ReplicaLeaderElection(ControllerEvent):
    """Elect leaders (ElectLeaders, or the ZooKeeper/auto preferred replica election):
    `callback({partition: leader id or (error code, message)})`."""

    state: ClassVar[ControllerState] = ControllerState.ManualLeaderBalance
    partitions: frozenset[Any] | None
    election_type: str  # "PREFERRED" | "UNCLEAN"
    election_trigger: str  # "AdminClientTriggered" | "ZkTriggered" | "AutoTriggered"
    callback: Callable[[Any], None] = field(repr=False, default=lambda _: None)

    def preempt(self) -> None:
        from protocol.errors import ErrorCode

        self.callback({p: (ErrorCode.NOT_CONTROLLER, None) for p in self.partitions or ()})


@dataclass(eq=False)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments: {partition: target replicas, or None to cancel};
    `callback({partition: (error code, message)})`, or `callback((error code, message))` for a
    top-level error (NOT_CONTROLLER)."""

    state: ClassVar[ControllerState] = ControllerState.AlterPartitionReassignment
    reassignments: dict[Any, list[int] | None]
    callback: Callable[[Any], None] = field(repr=False)

    def preempt(self) -> None:
        from protocol.errors import ErrorCode

        self.callback((ErrorCode.NOT_CONTROLLER, None))


@dataclass(eq=False)
class ZkPartitionReassignment(ControllerEvent):
    """/admin/reassign_partitions was created (the deprecated ZooKeeper way to reassign)."""

    state: ClassVar[ControllerState] = ControllerState.AlterPartitionReassignment


@dataclass(eq=False)
class ListPartitionReassignments(ControllerEvent):
    """ListPartitionReassignments: the given partitions (None: all) being reassigned;
    `callback({partition: ReplicaAssignment})` or `callback((error code, message))`."""

    state: ClassVar[ControllerState] = ControllerState.ListPartitionReassignment
    partitions: frozenset[Any] | None
    callback: Callable[[Any], None] = field(repr=False)

    def preempt(self) -> None:
        from protocol.errors import ErrorCode

        self.callback((ErrorCode.NOT_CONTROLLER, None))


@dataclass(eq=False)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """auto.leader.rebalance.enable: check the leader imbalance of every broker (scheduled)."""

    state: ClassVar[ControllerState] = ControllerState.AutoLeaderBalance


# -- the manager ------------------------------------------------------------------------------


class ControllerEventProcessor(Protocol):
    """The controller as the event manager sees it (Kafka's ControllerEventProcessor)."""

    async def process(self, event: ControllerEvent) -> None: ...

    def preempt(self, event: ControllerEvent) -> None: ...


class QueuedEvent:
    """An event in the queue, with when it was queued; processed or preempted at most once."""

    __slots__ = ("_processing_started", "_spent", "enqueue_time_ms", "event")

    def __init__(self, event: ControllerEvent, enqueue_time_ms: int) -> None:
        self.event = event
        self.enqueue_time_ms = enqueue_time_ms
        self._processing_started = asyncio.Event()
        self._spent = False

    async def process(self, processor: ControllerEventProcessor) -> None:
        if self._spent:
            return
        self._spent = True
        self._processing_started.set()
        await processor.process(self.event)

    def preempt(self, processor: ControllerEventProcessor) -> None:
        if self._spent:
            return
        self._spent = True
        processor.preempt(self.event)

    async def await_processing(self) -> None:
        """Until the event starts being processed (Kafka's awaitProcessing)."""
        await self._processing_started.wait()

    def __str__(self) -> str:
        return f"QueuedEvent(event={self.event}, enqueueTimeMs={self.enqueue_time_ms})"


class ControllerEventManager:
    """One queue of ControllerEvents and the task that processes them in order."""

    def __init__(self, controller_id: int, processor: ControllerEventProcessor) -> None:
        self.controller_id = controller_id
        self.processor = processor
        self._queue: asyncio.Queue[QueuedEvent] = asyncio.Queue()
        # events put with put_when_idle, queued once the queue is empty after an event
        self._when_idle: collections.deque[QueuedEvent] = collections.deque()
        self._processing = False
        self._state = ControllerState.Idle
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._shutting_down = False
        self.log_ident = f"[ControllerEventThread controllerId={controller_id}] "

    @property
    def state(self) -> ControllerState:
        return self._state

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=CONTROLLER_EVENT_THREAD_NAME)

    async def close(self, timeout_s: float = 30.0) -> None:
        """Stop after the event being processed (the queued ones are preempted); an event still
        running after `timeout_s` is cancelled."""
        self._shutting_down = True
        self.clear_and_put(ShutdownEventThread())
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if not done:
            log.warning("%sevent still running after %.0f s at shutdown: cancelled", self.log_ident, timeout_s)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def put(self, event: ControllerEvent) -> QueuedEvent:
        queued = QueuedEvent(event, int(time.time() * 1000))
        self._idle.clear()
        self._queue.put_nowait(queued)
        return queued

    def put_when_idle(self, event: ControllerEvent) -> QueuedEvent:
        """Queue `event` once no other event is waiting: put during an event, it runs after that
        event and after every event queued until then or meanwhile (background work of the
        controller's own, such as starting the next batch of topic deletions, never goes ahead
        of a new topic's TopicChange). Put while no event runs, it is queued at once."""
        if not self._processing:
            return self.put(event)
        queued = QueuedEvent(event, int(time.time() * 1000))
        self._idle.clear()
        self._when_idle.append(queued)
        return queued

    def clear_and_put(self, event: ControllerEvent) -> QueuedEvent:
        """Preempt every queued event, then queue `event` alone."""
        while self._when_idle:
            self._when_idle.popleft().preempt(self.processor)
        while True:
            try:
                dropped = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            dropped.preempt(self.processor)
        return self.put(event)

    def is_empty(self) -> bool:
        return self._queue.empty()

    async def wait_idle(self) -> None:
        """Until the queue is empty and no event runs (tests; the facade's committed())."""
        await self._idle.wait()

    async def _run(self) -> None:
        while True:
            queued = await self._queue.get()
            event = queued.event
            if isinstance(event, ShutdownEventThread):
                # the shutdown was initiated; nothing more runs
                self._idle.set()
                return
            self._state = event.state
            self._processing = True
            try:
                await queued.process(self.processor)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%sUncaught error processing event %s", self.log_ident, event)
            finally:
                self._processing = False
                self._state = ControllerState.Idle
                if self._queue.empty() and self._when_idle:
                    self._queue.put_nowait(self._when_idle.popleft())
                if self._queue.empty():
                    self._idle.set()
