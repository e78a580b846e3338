"""The controller -> broker channel: Kafka's ControllerChannelManager, RequestSendThread and
ControllerBrokerRequestBatch (core/src/main/scala/kafka/controller/ControllerChannelManager.scala,
3.9), on asyncio.

ControllerChannelManager: one request queue per live broker and one task draining it, one
request in flight per broker (Kafka's NetworkClient for the controller allows one), in the order
the controller queued them -- a broker applies LeaderAndIsr / UpdateMetadata / StopReplica in the
order the controller decided them. A request that fails on the network is retried (after 100 ms,
Kafka's backoff, besides the sender's own reconnect backoff) until it is answered or the broker
is removed from the channel (it died: the controller's broker-change handling removes it). A
response goes to the request's callback, which queues an event for the controller.

ControllerBrokerRequestBatch: the state machines add what each broker must be told while they
work on a batch of state changes; `send_requests_to_brokers` then sends one LeaderAndIsr, one
UpdateMetadata and one StopReplica per broker (Kafka's batching), at the versions Kafka 3.9 uses
between brokers in ZooKeeper mode (inter.broker.protocol.version 3.9 >= 3.4-IV0):
LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4. Every request carries the controller's id and
epoch and the target broker's epoch (the czxid of its registration), which the broker checks to
fence a stale controller or a request meant for its previous incarnation.

The network client is injected (`BrokerRequestSender`, which broker/network_client.NetworkClient
implements): controller/ does not import broker/ (DESIGN.md §1), so the protocol is declared here.

Who may call: the controller's event task (the batch, add/remove/send); the send tasks are the
manager's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from controller.election import LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller.state_machines import StateChangeLogger
from controller.topic_partition import TopicPartition
from controller.zk.data import Broker, ReplicaAssignment
from protocol.messages import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.messages.leader_and_isr_request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from protocol.messages.stop_replica_request import StopReplicaPartitionState, StopReplicaTopicState
from protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
)
from protocol.primitives import ZERO_UUID, ApiMessage

__all__ = [
    "LEADER_AND_ISR_VERSION",
    "STOP_REPLICA_VERSION",
    "UPDATE_METADATA_VERSION",
    "BrokerRequestSender",
    "ControllerBrokerRequestBatch",
    "ControllerChannelContext",
    "ControllerChannelManager",
]

log = logging.getLogger(__name__)

# Kafka 3.9 in ZooKeeper mode (ControllerBrokerRequestBatch for IBP >= 3.4-IV0)
LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4

# AbstractControlRequest.Type: the ZooKeeper controller leaves it UNKNOWN
UPDATE_TYPE_UNKNOWN = 0

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

API_NAMES = {4: "LEADER_AND_ISR", 5: "STOP_REPLICA", 6: "UPDATE_METADATA"}

RETRY_BACKOFF_S = 0.1  # RequestSendThread.backoff(): 100 ms between attempts


class BrokerRequestSender(Protocol):
    """What the channel needs of a network client: know where broker N is, send it a request at
    a fixed version and await the response. `send` raises when the request may not have been
    answered; the channel retries. (broker/network_client.NetworkClient is one.)"""

    def update_node(self, node_id: int, host: str, port: int) -> None: ...

    def remove_node(self, node_id: int) -> None: ...

    async def send(
        self, node_id: int, request: ApiMessage, *, version: int | None = None, timeout_ms: float | None = None
    ) -> ApiMessage: ...


ResponseCallback = Callable[[ApiMessage], None]


@dataclass
class QueueItem:
    api_key: int
    request: ApiMessage
    version: int
    callback: ResponseCallback | None
    enqueue_time_ms: int


@dataclass
class _BrokerState:
    broker_id: int
    address: str
    queue: asyncio.Queue[QueueItem] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # nothing queued or in flight

    def __post_init__(self) -> None:
        self.idle.set()


def _node_string(broker: Broker, listener_name: str) -> tuple[str, int, str]:
    endpoint = broker.endpoint(listener_name)
    if endpoint is None:
        raise ValueError(f"Broker {broker.id} has no endpoint for listener {listener_name}")
    host = endpoint.host or ""
    rack = f" rack: {broker.rack}" if broker.rack else " rack: null"
    return host, endpoint.port, f"{host}:{endpoint.port} (id: {broker.id}{rack})"


class ControllerChannelManager:
    """Kafka's ControllerChannelManager: a queue and a send task per broker."""

    def __init__(
        self,
        controller_id: int,
        controller_epoch: Callable[[], int],
        sender: BrokerRequestSender,
        state_change_logger: StateChangeLogger | None = None,
        *,
        listener_name: str = "PLAINTEXT",
        request_timeout_ms: float = 30_000,
    ) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.sender = sender
        self.listener_name = listener_name
        self.request_timeout_ms = request_timeout_ms
        self.state_change_logger = state_change_logger or StateChangeLogger(controller_id)
        self.broker_state_info: dict[int, _BrokerState] = {}
        self.log_ident = f"[Channel manager on controller {controller_id}]: "

    # -- brokers --------------------------------------------------------------------------------

    def startup(self, initial_brokers: Iterable[Broker]) -> None:
        for broker in initial_brokers:
            self.add_broker(broker)

    async def shutdown(self) -> None:
        """Stop every send task (queued requests are dropped) and forget the brokers."""
        tasks = [s.task for s in self.broker_state_info.values() if s.task is not None]
        for broker_id in list(self.broker_state_info):
            self.remove_broker(broker_id)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def add_broker(self, broker: Broker) -> None:
        if broker.id in self.broker_state_info:
            return
        log.debug("%sController %d trying to connect to broker %d", self.log_ident, self.controller_id, broker.id)
        host, port, address = _node_string(broker, self.listener_name)
        self.sender.update_node(broker.id, host, port)
        state = _BrokerState(broker.id, address)
        state.task = asyncio.create_task(self._send_loop(state),
                                         name=f"Controller-{self.controller_id}-to-broker-{broker.id}-send-thread")
        self.broker_state_info[broker.id] = state

    def remove_broker(self, broker_id: int) -> None:
        state = self.broker_state_info.pop(broker_id, None)
        if state is None:
            return
        if state.task is not None:
            state.task.cancel()
        self.sender.remove_node(broker_id)

    def queue_size(self, broker_id: int | None = None) -> int:
        """QueueSize (one broker) / TotalQueueSize (all)."""
        if broker_id is not None:
            s = self.broker_state_info.get(broker_id)
            return 0 if s is None else s.queue.qsize()
        return sum(s.queue.qsize() for s in self.broker_state_info.values())

    # -- requests -------------------------------------------------------------------------------

    def send_request(self, broker_id: int, request: ApiMessage, version: int,
                     callback: ResponseCallback | None = None) -> None:
        state = self.broker_state_info.get(broker_id)
        api_key = type(request).API_KEY
        assert api_key is not None
        if state is None:
            log.warning("%sNot sending request %s with controllerId=%d, controllerEpoch=%d, brokerEpoch=%d "
                        "to broker %d, since it is offline.", self.log_ident, API_NAMES.get(api_key, api_key),
                        request.controller_id, request.controller_epoch, request.broker_epoch, broker_id)
            return
        state.idle.clear()
        state.queue.put_nowait(QueueItem(api_key, request, version, callback, int(time.time() * 1000)))

    async def answered(self, broker_ids: Iterable[int], timeout_s: float) -> bool:
        """Until every request queued so far for these brokers is answered, at most `timeout_s`;
        False when some were not. Why: the controller's own broker shares its event loop, so a
        request queued before a burst of controller work (a failover's state machines: thousands
        of ZooKeeper completions) is only connected and sent between those callbacks; the new
        controller's first UpdateMetadata should reach the brokers first, as Kafka's send threads
        deliver it while its controller thread goes on."""
        waits = [s.idle.wait() for b in broker_ids if (s := self.broker_state_info.get(b)) is not None]
        if not waits:
            return True
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout_s)
            return True
        except TimeoutError:
            return False

    async def _send_loop(self, state: _BrokerState) -> None:
        """RequestSendThread.doWork, forever: take a request, send it until answered, call back."""
        ident = f"[RequestSendThread controllerId={self.controller_id}] "
        while True:
            item = await state.queue.get()
            response: ApiMessage | None = None
            while response is None:
                try:
                    response = await self.sender.send(state.broker_id, item.request, version=item.version,
                                                      timeout_ms=self.request_timeout_ms)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    log.warning("%sController %d epoch %d fails to send request %s to broker %s. "
                                "Reconnecting to broker.: %s: %s", ident, self.controller_id,
                                self.controller_epoch(), _describe(item), state.address, type(e).__name__, e)
                    await asyncio.sleep(RETRY_BACKOFF_S)
            self.state_change_logger.with_controller_epoch(self.controller_epoch()).trace(
                f"Received response {response} for request {API_NAMES.get(item.api_key)} sent to broker "
                f"{state.address}")
            if item.callback is not None:
                try:
                    item.callback(response)
                except Exception:
                    log.exception("%sController %d fails to send a request to broker %s", ident,
                                  self.controller_id, state.address)
            if state.queue.empty():
                state.idle.set()


def _describe(item: QueueItem) -> str:
    r = item.request
    return (f"{API_NAMES.get(item.api_key, item.api_key)}(controllerId={r.controller_id}, "
            f"controllerEpoch={r.controller_epoch}, brokerEpoch={r.broker_epoch}, version={item.version})")


# -- the batch ----------------------------------------------------------------------------------


class ControllerChannelContext(Protocol):
    """What the batch reads of the controller's context (Kafka's ControllerChannelContext)."""

    topic_ids: Mapping[str, uuid.UUID]

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]: ...

    @property
    def live_or_shutting_down_brokers(self) -> list[Broker]: ...

    @property
    def live_broker_id_and_epochs(self) -> dict[int, int]: ...

    def is_topic_deletion_in_progress(self, topic: str) -> bool: ...

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool: ...

    def is_replica_online(self, broker_id: int, partition: TopicPartition,
                          include_shutting_down_brokers: bool = False) -> bool: ...

    def partition_replica_assignment(self, partition: TopicPartition) -> list[int]: ...

    def leader_epoch(self, partition: TopicPartition) -> int: ...

    @property
    def partition_leadership_info(self) -> Mapping[TopicPartition, LeaderIsrAndControllerEpoch]: ...


StopReplicaCallback = Callable[[StopReplicaResponse, int, dict[TopicPartition, int]], None]


class ControllerBrokerRequestBatch:
    """Kafka's (Abstract)ControllerBrokerRequestBatch: collect, then send per broker."""

    def __init__(
        self,
        controller_id: int,
        channel: ControllerChannelManager,
        context: Callable[[], ControllerChannelContext],
        state_change_logger: StateChangeLogger,
        *,
        on_leader_and_isr_response: Callable[[LeaderAndIsrResponse, int], None] | None = None,
        on_update_metadata_response: Callable[[UpdateMetadataResponse, int], None] | None = None,
        on_stop_replica_response: StopReplicaCallback | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.channel = channel
        self.metadata_provider = context
        self.state_change_logger = state_change_logger
        self.on_leader_and_isr_response = on_leader_and_isr_response
        self.on_update_metadata_response = on_update_metadata_response
        self.on_stop_replica_response = on_stop_replica_response
        self.leader_and_isr_request_map: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self.stop_replica_request_map: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}
        self.update_metadata_request_broker_set: set[int] = set()
        self.update_metadata_request_partition_info_map: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        self._metadata: ControllerChannelContext | None = None

    @property
    def metadata(self) -> ControllerChannelContext:
        if self._metadata is None:
            raise RuntimeError("no batch started (new_batch)")
        return self._metadata

    def new_batch(self) -> None:
        if self.leader_and_isr_request_map:
            raise IllegalStateError(
                "Controller to broker state change requests batch is not empty while creating a new one. "
                f"Some LeaderAndIsr state changes {self.leader_and_isr_request_map} might be lost ")
        if self.stop_replica_request_map:
            raise IllegalStateError(
                "Controller to broker state change requests batch is not empty while creating a new one. "
                f"Some StopReplica state changes {self.stop_replica_request_map} might be lost ")
        if self.update_metadata_request_broker_set:
            raise IllegalStateError(
                "Controller to broker state change requests batch is not empty while creating a new one. "
                f"Some UpdateMetadata state changes to brokers {self.update_metadata_request_broker_set} with "
                f"partition info {self.update_metadata_request_partition_info_map} might be lost ")
        self._metadata = self.metadata_provider()

    def clear(self) -> None:
        self.leader_and_isr_request_map.clear()
        self.stop_replica_request_map.clear()
        self.update_metadata_request_broker_set.clear()
        self.update_metadata_request_partition_info_map.clear()
        self._metadata = None

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        topic_partition: TopicPartition,
        leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        lai = leader_isr_and_controller_epoch.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            result = self.leader_and_isr_request_map.setdefault(broker_id, {})
            already_new = topic_partition in result and result[topic_partition].is_new
            result[topic_partition] = LeaderAndIsrPartitionState(
                topic_name=topic_partition.topic,
                partition_index=topic_partition.partition,
                controller_epoch=leader_isr_and_controller_epoch.controller_epoch,
                leader=lai.leader,
                leader_epoch=lai.leader_epoch,
                isr=list(lai.isr),
                partition_epoch=lai.partition_epoch,
                replicas=list(replica_assignment.replicas),
                adding_replicas=list(replica_assignment.adding_replicas),
                removing_replicas=list(replica_assignment.removing_replicas),
                is_new=is_new or already_new,
                leader_recovery_state=int(lai.leader_recovery_state),
            )
        self.add_update_metadata_request_for_brokers(self.metadata.live_or_shutting_down_broker_ids, [topic_partition])

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int], topic_partition: TopicPartition,
                                             delete_partition: bool) -> None:
        # a sentinel (-2) is the epoch of a topic queued for deletion; it overrides any other
        leader_epoch = self.metadata.leader_epoch(topic_partition)
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            result = self.stop_replica_request_map.setdefault(broker_id, {})
            already_delete = topic_partition in result and result[topic_partition].delete_partition
            result[topic_partition] = StopReplicaPartitionState(
                partition_index=topic_partition.partition, leader_epoch=leader_epoch,
                delete_partition=already_delete or delete_partition)

    def add_update_metadata_request_for_brokers(self, broker_ids: Iterable[int],
                                                partitions: Iterable[TopicPartition] = ()) -> None:
        """UpdateMetadata to `broker_ids` carrying the given partitions' states (a topic being
        deleted is sent with leader -2, LeaderDuringDelete)."""
        self.update_metadata_request_broker_set.update(b for b in broker_ids if b >= 0)
        md = self.metadata
        for partition in partitions:
            info = md.partition_leadership_info.get(partition)
            if info is None:
                log.info("Leader not yet assigned for partition %s. Skip sending UpdateMetadataRequest.", partition)
                continue
            replicas = md.partition_replica_assignment(partition)
            offline = [r for r in replicas if not md.is_replica_online(r, partition)]
            lai = info.leader_and_isr
            if md.is_topic_queued_up_for_deletion(partition.topic):
                lai = LeaderAndIsr.during_delete(lai.isr).with_partition_epoch(lai.partition_epoch)
            self.update_metadata_request_partition_info_map[partition] = UpdateMetadataPartitionState(
                topic_name=partition.topic, partition_index=partition.partition,
                controller_epoch=info.controller_epoch, leader=lai.leader, leader_epoch=lai.leader_epoch,
                isr=list(lai.isr), zk_version=lai.partition_epoch, replicas=list(replicas),
                offline_replicas=offline)

    # -- sending --------------------------------------------------------------------------------

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        try:
            log_ = self.state_change_logger.with_controller_epoch(controller_epoch)
            self._send_leader_and_isr_requests(controller_epoch, log_)
            self._send_update_metadata_requests(controller_epoch, log_)
            self._send_stop_replica_requests(controller_epoch, log_)
        except Exception as e:
            if self.leader_and_isr_request_map:
                log.error("Haven't been able to send leader and isr requests, current state of the map is %s. "
                          "Exception message: %s", self.leader_and_isr_request_map, e)
            if self.update_metadata_request_broker_set:
                log.error("Haven't been able to send metadata update requests to brokers %s, current state of "
                          "the partition info is %s. Exception message: %s",
                          self.update_metadata_request_broker_set, self.update_metadata_request_partition_info_map, e)
            if self.stop_replica_request_map:
                log.error("Haven't been able to send stop replica requests, current state of the map is %s. "
                          "Exception message: %s", self.stop_replica_request_map, e)
            raise IllegalStateError(str(e)) from e

    def _send_leader_and_isr_requests(self, controller_epoch: int, state_change_log: StateChangeLogger) -> None:
        md = self.metadata
        live = md.live_or_shutting_down_broker_ids
        for broker, states in self.leader_and_isr_request_map.items():
            if broker not in live:
                continue
            leader_ids: set[int] = set()
            num_become_leaders = 0
            for tp, state in states.items():
                leader_ids.add(state.leader)
                kind = "become-leader" if broker == state.leader else "become-follower"
                num_become_leaders += kind == "become-leader"
                state_change_log.trace(f"Sending {kind} LeaderAndIsr request {_partition_state_str(state)} "
                                       f"to broker {broker} for partition {tp}")
            state_change_log.info(f"Sending LeaderAndIsr request to broker {broker} with {num_become_leaders} "
                                  f"become-leader and {len(states) - num_become_leaders} become-follower partitions")
            leaders = []
            for b in md.live_or_shutting_down_brokers:
                if b.id in leader_ids:
                    endpoint = b.endpoint(self.channel.listener_name)
                    if endpoint is not None:
                        leaders.append(LeaderAndIsrLiveLeader(broker_id=b.id, host_name=endpoint.host or "",
                                                              port=endpoint.port))
            by_topic: dict[str, LeaderAndIsrTopicState] = {}
            for tp, state in states.items():
                ts = by_topic.get(tp.topic)
                if ts is None:
                    ts = by_topic[tp.topic] = LeaderAndIsrTopicState(
                        topic_name=tp.topic, topic_id=md.topic_ids.get(tp.topic, ZERO_UUID))
                ts.partition_states.append(state)
            request = LeaderAndIsrRequest(
                controller_id=self.controller_id, is_k_raft_controller=False, controller_epoch=controller_epoch,
                broker_epoch=md.live_broker_id_and_epochs[broker], type=UPDATE_TYPE_UNKNOWN,
                topic_states=list(by_topic.values()), live_leaders=leaders)
            callback = self.on_leader_and_isr_response
            self.channel.send_request(
                broker, request, LEADER_AND_ISR_VERSION,
                None if callback is None else (lambda r, b=broker, cb=callback: cb(r, b)))  # type: ignore[misc]
        self.leader_and_isr_request_map.clear()

    def _send_update_metadata_requests(self, controller_epoch: int, state_change_log: StateChangeLogger) -> None:
        if not self.update_metadata_request_broker_set:
            self.update_metadata_request_partition_info_map.clear()
            return
        md = self.metadata
        state_change_log.info(
            f"Sending UpdateMetadata request to brokers {_scala_set(self.update_metadata_request_broker_set)} "
            f"for {len(self.update_metadata_request_partition_info_map)} partitions")
        live_brokers = [
            UpdateMetadataBroker(
                id=b.id,
                endpoints=[UpdateMetadataEndpoint(host=e.host or "", port=e.port, listener=e.listener_name,
                                                  security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0))
                           for e in b.endpoints],
                rack=b.rack)
            for b in md.live_or_shutting_down_brokers]
        by_topic: dict[str, list[UpdateMetadataPartitionState]] = {}
        for tp, state in self.update_metadata_request_partition_info_map.items():
            by_topic.setdefault(tp.topic, []).append(state)
        live = md.live_or_shutting_down_broker_ids
        for broker in sorted(self.update_metadata_request_broker_set & live):
            topic_states = [UpdateMetadataTopicState(topic_name=t, topic_id=md.topic_ids.get(t, ZERO_UUID),
                                                     partition_states=ps) for t, ps in by_topic.items()]
            request = UpdateMetadataRequest(
                controller_id=self.controller_id, is_k_raft_controller=False, type=UPDATE_TYPE_UNKNOWN,
                controller_epoch=controller_epoch, broker_epoch=md.live_broker_id_and_epochs[broker],
                topic_states=topic_states, live_brokers=live_brokers)
            callback = self.on_update_metadata_response
            self.channel.send_request(
                broker, request, UPDATE_METADATA_VERSION,
                None if callback is None else (lambda r, b=broker, cb=callback: cb(r, b)))  # type: ignore[misc]
        self.update_metadata_request_broker_set.clear()
        self.update_metadata_request_partition_info_map.clear()

    def _send_stop_replica_requests(self, controller_epoch: int, state_change_log: StateChangeLogger) -> None:
        md = self.metadata
        live = md.live_or_shutting_down_broker_ids
        for broker_id, states in self.stop_replica_request_map.items():
            if broker_id not in live:
                continue
            for tp, state in states.items():
                state_change_log.trace(f"Sending StopReplica request {_stop_state_str(state)} to broker "
                                       f"{broker_id} for partition {tp}")
            by_topic: dict[str, StopReplicaTopicState] = {}
            for tp, state in states.items():
                by_topic.setdefault(tp.topic, StopReplicaTopicState(topic_name=tp.topic)).partition_states.append(state)
            state_change_log.info(f"Sending StopReplica request for {len(states)} replicas to broker {broker_id}")
            request = StopReplicaRequest(
                controller_id=self.controller_id, is_k_raft_controller=False, controller_epoch=controller_epoch,
                broker_epoch=md.live_broker_id_and_epochs[broker_id], delete_partitions=False,
                topic_states=list(by_topic.values()))
            deleting = {tp for tp, s in states.items() if s.delete_partition}
            self.channel.send_request(broker_id, request, STOP_REPLICA_VERSION,
                                      self._stop_replica_callback(broker_id, deleting, md))
        self.stop_replica_request_map.clear()

    def _stop_replica_callback(self, broker_id: int, deleting: set[TopicPartition],
                               md: ControllerChannelContext) -> ResponseCallback:
        def on_response(response: ApiMessage) -> None:
            assert isinstance(response, StopReplicaResponse)
            errors: dict[TopicPartition, int] = {}
            for pe in response.partition_errors:
                tp = TopicPartition(pe.topic_name, pe.partition_index)
                if md.is_topic_deletion_in_progress(pe.topic_name) and tp in deleting:
                    errors[tp] = pe.error_code
            if errors and self.on_stop_replica_response is not None:
                self.on_stop_replica_response(response, broker_id, errors)

        return on_response


class IllegalStateError(Exception):
    """Kafka's IllegalStateException from the batch: the controller resigns on it."""


def _scala_set(ids: Iterable[int]) -> str:
    return f"Set({', '.join(map(str, sorted(ids)))})"


def _partition_state_str(s: LeaderAndIsrPartitionState) -> str:
    return (f"LeaderAndIsrPartitionState(topicName='{s.topic_name}', partitionIndex={s.partition_index}, "
            f"controllerEpoch={s.controller_epoch}, leader={s.leader}, leaderEpoch={s.leader_epoch}, "
            f"isr={list(s.isr)}, partitionEpoch={s.partition_epoch}, replicas={list(s.replicas)}, "
            f"addingReplicas={list(s.adding_replicas)}, removingReplicas={list(s.removing_replicas)}, "
            f"isNew={str(s.is_new).lower()}, leaderRecoveryState={s.leader_recovery_state})")


def _stop_state_str(s: StopReplicaPartitionState) -> str:
    return (f"StopReplicaPartitionState(partitionIndex={s.partition_index}, leaderEpoch={s.leader_epoch}, "
            f"deletePartition={str(s.delete_partition).lower()})")

