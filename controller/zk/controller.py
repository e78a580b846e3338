"""Kafka's KafkaController in ZooKeeper mode (core/src/main/scala/kafka/controller/KafkaController.scala,
3.9), on asyncio: every broker runs one; the one that creates /controller first is the cluster's
controller until its ZooKeeper session ends.

Election and fencing. On start, and whenever /controller is deleted, a broker tries to become the
controller: /controller (ephemeral) is created and /controller_epoch bumped in one ZooKeeper
multi (KafkaZkClient.register_controller_and_increment_controller_epoch). The winner keeps the
epoch and the version of /controller_epoch it wrote; every later write it makes checks that
version in the same multi, so a controller that was replaced while it was paused or cut off (a
"zombie") has its writes refused (ControllerMovedError) -- it then resigns. A session expiry
makes the controller resign at once (Expire) and, once a new session exists, register the
broker again and run for election (RegisterBrokerAndReelect).

Failover (onControllerFailover): watch /brokers/ids, /brokers/topics and /admin/delete_topics;
load the context (live brokers with their epochs, topics, ids, assignments, partition states);
start the channel to every live broker; send UpdateMetadata to all; start the replica state
machine (LeaderAndIsr to every online replica; offline ones shrink out of their ISRs) and the
partition state machine (elect a leader for every partition without a live one); resume topic
deletions.

Events (one queue, processed in order: controller.zk.event_manager): broker changes (new,
dead, bounced brokers: onBrokerStartup / onBrokerFailure), topic changes (new topics: NewPartition
-> OnlinePartition), partition modifications (CreatePartitions), topic deletion requests,
StopReplica / LeaderAndIsr / UpdateMetadata responses, AlterPartition (a leader's ISR change),
ControlledShutdown, ElectLeaders (preferred / unclean), the automatic preferred-leader
rebalance (auto.leader.rebalance.enable), controller changes and session expiry.

Partition reassignment (AlterPartitionReassignments, ListPartitionReassignments): RS = TRS + ORS
with adding/removing replicas in /brokers/topics/<t>, the new replicas started, and completion when
an AlterPartition puts every target replica in the ISR (onPartitionReassignment); resumed on
failover and when a target broker starts. The deprecated /admin/reassign_partitions znode is
honoured too (each partition taken out of it once done or refused; the znode deleted when empty).

Log dir failures: a broker that lost a log dir creates /log_dir_event_notification/log_dir_event_<seq>;
the controller sends LeaderAndIsr for that broker's replicas, and the KAFKA_STORAGE_ERROR answers
take those replicas offline (new leaders elected, ISRs shrunk at once); the notifications are
deleted once read, and all of them at failover.

Not ported (yet): the /admin/preferred_replica_election and /isr_change_notification znodes
(Kafka 3.9 brokers use AlterPartition instead), /feature versioning, delegation-token expiry.

Log lines are Kafka's: "[Controller id=N] ..." here, "[Controller id=N epoch=E] ..." on the
state.change.logger.

Who may call: the event loop. Public methods only queue events (or read); the event task does
the work.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.channel import (
    BrokerRequestSender,
    ControllerBrokerRequestBatch,
    ControllerChannelManager,
    IllegalStateError,
)
from controller.election import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionLeaderElectionStrategy,
    preferred_replica_partition_leader_election,
)
from controller.state_machines import PartitionState, ReplicaState, StateChangeLogger
from controller.topic_partition import PartitionAndReplica, TopicPartition
from controller.zk import data as zd
from controller.zk.client import (
    ConnectionLossError,
    NodeHandler,
    NoNodeError,
    SessionExpiredError,
)
from controller.zk.context import ControllerContext
from controller.zk.data import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ConfigType,
    ControllerZNode,
    DeleteTopicsZNode,
    LogDirEventNotificationZNode,
    ReassignPartitionsZNode,
    ReplicaAssignment,
    TopicIdReplicaAssignment,
    TopicPartitionsZNode,
    TopicsZNode,
    TopicZNode,
)
from controller.zk.event_manager import (
    AlterPartitionReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ControllerEventManager,
    Expire,
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    LogDirEventNotification,
    PartitionModifications,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionResume,
    TopicDeletionStopReplicaResponseReceived,
    UpdateMetadataResponseReceived,
    ZkPartitionReassignment,
)
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from controller.zk.partition_state_machine import (
    CONTROLLED_SHUTDOWN,
    OFFLINE_CLEAN,
    PREFERRED,
    REASSIGN,
    ElectionStrategy,
    StateChangeFailedError,
    ZkPartitionStateMachine,
)
from controller.zk.replica_state_machine import ZkReplicaStateMachine
from controller.zk.topic_deletion_manager import TopicDeletionManager
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterPartitionResponse,
    LeaderAndIsrResponse,
    UpdateMetadataResponse,
)
from protocol.messages.alter_partition_response import PartitionData as AlterPartitionPartitionData
from protocol.messages.alter_partition_response import TopicData as AlterPartitionTopicData
from protocol.primitives import ZERO_UUID

__all__ = ["KafkaController", "KafkaControllerConfig"]

log = logging.getLogger(__name__)

CONTROLLER_STATE_CHANGE_HANDLER = "controller-state-change-handler"  # StateChangeHandlers.ControllerHandler
UNKNOWN_BROKER_EPOCH = -1  # AbstractControlRequest.UNKNOWN_BROKER_EPOCH
# a failover waits this long at most for the brokers to answer its first UpdateMetadata
FIRST_UPDATE_METADATA_WAIT_S = 0.5
# ElectionTrigger
ADMIN_CLIENT_TRIGGERED = "AdminClientTriggered"
AUTO_TRIGGERED = "AutoTriggered"
ZK_TRIGGERED = "ZkTriggered"


@dataclass(frozen=True)
class KafkaControllerConfig:
    """The broker settings the controller reads (server.properties names in comments)."""

    broker_id: int
    inter_broker_listener_name: str = "PLAINTEXT"  # inter.broker.listener.name
    delete_topic_enable: bool = True  # delete.topic.enable
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable (broker default)
    request_timeout_ms: int = 30_000  # request.timeout.ms of the controller channel
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage
    leader_imbalance_check_interval_seconds: float = 300  # leader.imbalance.check.interval.seconds
    # Kafka's fixed delay of the first check after an election (5 s); tests shorten it
    auto_leader_rebalance_initial_delay_s: float = 5.0


def _scala_set(ids: Iterable[Any]) -> str:
    return f"Set({', '.join(map(str, sorted(ids, key=str)))})"


def _scala_map(m: Mapping[Any, Any]) -> str:
    return f"Map({', '.join(f'{k} -> {v}' for k, v in sorted(m.items(), key=lambda kv: str(kv[0])))})"


# -- ZooKeeper watch handlers: each only queues an event (Kafka's *Handler classes) ----------


class _ChildHandler:
    def __init__(self, path: str, put: Callable[[], None]) -> None:
        self.path = path
        self._put = put

    def handle_child_change(self) -> None:
        self._put()


class _SessionHandler:
    """Kafka's controller StateChangeHandler: Expire before a new session (queued alone: what was
    queued assumed the old session), RegisterBrokerAndReelect after it."""

    name = CONTROLLER_STATE_CHANGE_HANDLER

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    def before_initializing_session(self) -> None:
        # Kafka also waits until Expire starts running; ours must not wait here (the ZooKeeper
        # client runs the session events one at a time, and an event in progress may be waiting
        # for the next session), and the queue order already puts Expire first.
        self.controller.event_manager.clear_and_put(Expire())

    def after_initializing_session(self) -> None:
        self.controller.event_manager.put(RegisterBrokerAndReelect())


class KafkaController:
    """See the module docstring."""

    def __init__(
        self,
        config: KafkaControllerConfig,
        zk_client: KafkaZkClient,
        sender: BrokerRequestSender,
        broker_info: zd.BrokerInfo | None = None,
        broker_epoch: int = -1,
        *,
        on_broker_epoch: Callable[[int], None] | None = None,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk_client = zk_client
        self.broker_info = broker_info
        self.broker_epoch = broker_epoch
        self.on_broker_epoch = on_broker_epoch
        self.log_ident = f"[Controller id={config.broker_id}] "
        self.state_change_logger = StateChangeLogger(config.broker_id, in_controller_context=True)
        self.controller_context = ControllerContext(config.broker_id)
        self.event_manager = ControllerEventManager(config.broker_id, self)
        self.controller_channel_manager = ControllerChannelManager(
            config.broker_id, lambda: self.controller_context.epoch, sender, self.state_change_logger,
            listener_name=config.inter_broker_listener_name, request_timeout_ms=config.request_timeout_ms)
        self.broker_request_batch = self._new_batch()
        self.replica_state_machine = ZkReplicaStateMachine(self.controller_context, zk_client, self._new_batch())
        self.partition_state_machine = ZkPartitionStateMachine(
            self.controller_context, zk_client, self._new_batch(), self._unclean_leader_election_enabled)
        self.topic_deletion_manager = TopicDeletionManager(
            self.controller_context, self.replica_state_machine, self.partition_state_machine, self,
            delete_topic_enable=config.delete_topic_enable)
        put = self.event_manager.put
        self.controller_change_handler = NodeHandler(
            ControllerZNode.path, on_create=lambda: put(ControllerChange()), on_delete=lambda: put(Reelect()),
            on_change=lambda: put(ControllerChange()))
        self.broker_change_handler = _ChildHandler(BrokerIdsZNode.path, lambda: put(BrokerChange()))
        self.topic_change_handler = _ChildHandler(TopicsZNode.path, lambda: put(TopicChange()))
        self.topic_deletion_handler = _ChildHandler(DeleteTopicsZNode.path, lambda: put(TopicDeletion()))
        self.log_dir_event_notification_handler = _ChildHandler(LogDirEventNotificationZNode.path,
                                                                lambda: put(LogDirEventNotification()))
        self.partition_reassignment_handler = NodeHandler(
            ReassignPartitionsZNode.path, on_create=lambda: put(ZkPartitionReassignment()))
        self.broker_modifications_handlers: dict[int, NodeHandler] = {}
        self.partition_modifications_handlers: dict[str, NodeHandler] = {}
        self._session_handler = _SessionHandler(self)
        self.active_controller_id = -1
        self._activity = asyncio.Event()  # set at every change of active_controller_id
        self._rebalance_timer: asyncio.TimerHandle | None = None  # Kafka's kafkaScheduler task
        self.offline_partition_count = 0
        self.global_topic_count = 0
        self.global_partition_count = 0

    def _new_batch(self) -> ControllerBrokerRequestBatch:
        em = self.event_manager
        return ControllerBrokerRequestBatch(
            self.broker_id, self.controller_channel_manager, lambda: self.controller_context, self.state_change_logger,
            on_leader_and_isr_response=lambda r, b: em.put(LeaderAndIsrResponseReceived(r, b)),
            on_update_metadata_response=lambda r, b: em.put(UpdateMetadataResponseReceived(r, b)),
            on_stop_replica_response=lambda r, b, errors: em.put(
                TopicDeletionStopReplicaResponseReceived(b, r.error_code, errors)))

    # -- what others read ---------------------------------------------------------------------

    @property
    def zk(self) -> Any:
        return self.zk_client.zk

    @property
    def is_active(self) -> bool:
        """True while this broker is the controller."""
        return self.active_controller_id == self.broker_id

    @property
    def epoch(self) -> int:
        return self.controller_context.epoch

    def _set_active_controller_id(self, controller_id: int) -> None:
        self.active_controller_id = controller_id
        self._activity.set()
        self._activity = asyncio.Event()

    async def wait_until(self, predicate: Callable[[KafkaController], bool], timeout_s: float) -> None:
        """Until `predicate(self)` holds after a change of the active controller (tests, tools)."""
        async def check() -> None:
            while not predicate(self):
                await self._activity.wait()
        await asyncio.wait_for(check(), timeout_s)

    # -- lifecycle ------------------------------------------------------------------------------

    def startup(self) -> None:
        """Register the session handler and queue Startup: watch /controller and run for election.
        Does not assume this broker becomes the controller."""
        self.zk.register_state_change_handler(self._session_handler)
        self.event_manager.put(Startup())
        self.event_manager.start()

    async def shutdown(self) -> None:
        """Stop the event task, then resign if this broker was the controller (its /controller
        znode goes with its session; Kafka does not delete it either)."""
        self.zk.unregister_state_change_handler(CONTROLLER_STATE_CHANGE_HANDLER)
        await self.event_manager.close()
        await self._on_controller_resignation()
        self.zk.unregister_znode_change_handler(ControllerZNode.path)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, callback: Callable[[Any], None]) -> None:
        """ControlledShutdown: `callback` gets the partitions the broker still leads, or the error."""
        self.event_manager.put(ControlledShutdown(broker_id, broker_epoch, callback))

    def alter_partitions(self, request: Any, version: int, callback: Callable[[Any], None]) -> None:
        """AlterPartition: `callback` gets the AlterPartitionResponse."""
        self.event_manager.put(AlterPartitionReceived(request, version, callback))

    def elect_leaders(self, partitions: Iterable[TopicPartition], election_type: str,
                      callback: Callable[[Any], None]) -> None:
        """ElectLeaders ("PREFERRED" or "UNCLEAN"): `callback({partition: leader id or (error code,
        message)})`."""
        self.event_manager.put(ReplicaLeaderElection(frozenset(partitions), election_type, ADMIN_CLIENT_TRIGGERED,
                                                     callback))

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, list[int] | None],
                                      callback: Callable[[Any], None]) -> None:
        """AlterPartitionReassignments ({partition: target replicas, None to cancel}):
        `callback({partition: (error code, message)})`, or `callback((error code, message))`."""
        self.event_manager.put(ApiPartitionReassignment(dict(reassignments), callback))

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None,
                                     callback: Callable[[Any], None]) -> None:
        """ListPartitionReassignments (None: every partition being reassigned):
        `callback({partition: ReplicaAssignment})`, or `callback((error code, message))`."""
        self.event_manager.put(ListPartitionReassignments(None if partitions is None else frozenset(partitions),
                                                          callback))

    # -- ControllerEventProcessor ---------------------------------------------------------------

    def preempt(self, event: ControllerEvent) -> None:
        event.preempt()

    async def process(self, event: ControllerEvent) -> None:
        try:
            match event:
                case Startup():
                    await self._process_startup()
                case ControllerChange():
                    await self._maybe_resign()
                case Reelect():
                    await self._maybe_resign()
                    await self._elect()
                case RegisterBrokerAndReelect():
                    await self._process_register_broker_and_reelect()
                case Expire():
                    self._set_active_controller_id(-1)
                    await self._on_controller_resignation()
                case BrokerChange():
                    await self._process_broker_change()
                case BrokerModifications(broker_id=broker_id):
                    await self._process_broker_modification(broker_id)
                case TopicChange():
                    await self._process_topic_change()
                case PartitionModifications(topic=topic):
                    await self._process_partition_modifications(topic)
                case TopicDeletion():
                    await self._process_topic_deletion()
                case TopicDeletionResume():
                    if self.is_active:
                        await self.topic_deletion_manager.resume_queued_deletions()
                case TopicDeletionStopReplicaResponseReceived():
                    await self._process_topic_deletion_stop_replica_response(event)
                case LogDirEventNotification():
                    await self._process_log_dir_event_notification()
                case LeaderAndIsrResponseReceived(response=response, broker_id=broker_id):
                    await self._process_leader_and_isr_response(response, broker_id)
                case UpdateMetadataResponseReceived(response=response, broker_id=broker_id):
                    self._process_update_metadata_response(response, broker_id)
                case ControlledShutdown():
                    await self._process_controlled_shutdown(event)
                case AlterPartitionReceived():
                    await self._process_alter_partition(event)
                case ReplicaLeaderElection():
                    await self._process_replica_leader_election(event)
                case AutoPreferredReplicaLeaderElection():
                    await self._process_auto_preferred_replica_leader_election()
                case ApiPartitionReassignment():
                    await self._process_api_partition_reassignment(event)
                case ListPartitionReassignments():
                    self._process_list_partition_reassignments(event)
                case ZkPartitionReassignment():
                    await self._process_zk_partition_reassignment()
                case _:
                    log.error("%sUnexpected event %s", self.log_ident, event)
        except ControllerMovedError as e:
            log.info("%sController moved to another broker when processing %s.: %s", self.log_ident, event, e)
            await self._maybe_resign()
        except (SessionExpiredError, ConnectionLossError) as e:
            # expected (a pause longer than the session, ZooKeeper unreachable): the session's
            # expiry resigns and re-elects through its own events, so one line, no traceback
            log.warning("%sZooKeeper unavailable while processing event %s: %s", self.log_ident, event,
                        e)
        except Exception:
            log.exception("%sError processing event %s", self.log_ident, event)
        finally:
            self._update_metrics()

    def _update_metrics(self) -> None:
        ctx = self.controller_context
        if self.is_active:
            self.offline_partition_count = ctx.offline_partition_count()
            self.global_topic_count = len(ctx.all_topics)
            self.global_partition_count = len(ctx.partitions_with_leaders())
        else:
            self.offline_partition_count = self.global_topic_count = self.global_partition_count = 0

    # -- election -------------------------------------------------------------------------------

    async def _process_startup(self) -> None:
        await self.zk_client.register_znode_change_handler_and_check_existence(self.controller_change_handler)
        await self._elect()

    async def _elect(self) -> None:
        controller_id = await self.zk_client.get_controller_id()
        self._set_active_controller_id(-1 if controller_id is None else controller_id)
        # the deletion watch and startup may race: someone may have been elected already
        if self.active_controller_id != -1:
            log.debug("%sBroker %d has been elected as the controller, so stopping the election process.",
                      self.log_ident, self.active_controller_id)
            return
        try:
            epoch, epoch_zk_version = await self.zk_client.register_controller_and_increment_controller_epoch(
                self.broker_id)
            self.controller_context.set_epoch(epoch, epoch_zk_version)
            self._set_active_controller_id(self.broker_id)
            log.info("%s%d successfully elected as the controller. Epoch incremented to %d and epoch zk version "
                     "is now %d", self.log_ident, self.broker_id, epoch, epoch_zk_version)
            await self._on_controller_failover()
        except ControllerMovedError as e:
            await self._maybe_resign()
            if self.active_controller_id != -1:
                log.debug("%sBroker %d was elected as controller instead of broker %d: %s", self.log_ident,
                          self.active_controller_id, self.broker_id, e)
            else:
                log.warning("%sA controller has been elected but just resigned, this will result in another round "
                            "of election: %s", self.log_ident, e)
        except Exception:
            log.exception("%sError while electing or becoming controller on broker %d. Trigger controller movement "
                          "immediately", self.log_ident, self.broker_id)
            await self._trigger_controller_move()

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        await self.zk_client.register_znode_change_handler_and_check_existence(self.controller_change_handler)
        controller_id = await self.zk_client.get_controller_id()
        self._set_active_controller_id(-1 if controller_id is None else controller_id)
        if was_active and not self.is_active:
            await self._on_controller_resignation()

    async def _trigger_controller_move(self) -> None:
        controller_id = await self.zk_client.get_controller_id()
        self._set_active_controller_id(-1 if controller_id is None else controller_id)
        if not self.is_active:
            log.warning("%sController has already moved when trying to trigger controller movement", self.log_ident)
            return
        try:
            expected = self.controller_context.epoch_zk_version
            self._set_active_controller_id(-1)
            await self._on_controller_resignation()
            await self.zk_client.delete_controller(expected)
        except ControllerMovedError:
            log.warning("%sController has already moved when trying to trigger controller movement", self.log_ident)

    async def _handle_illegal_state(self, e: Exception) -> None:
        log.error("%sForcing the controller to resign", self.log_ident)
        self.broker_request_batch.clear()
        await self._trigger_controller_move()
        raise e

    async def _process_register_broker_and_reelect(self) -> None:
        if self.broker_info is not None:
            self.broker_epoch = await self.zk_client.register_broker(self.broker_info)
            if self.on_broker_epoch is not None:
                self.on_broker_epoch(self.broker_epoch)
        await self._maybe_resign()
        await self._elect()

    async def _on_controller_failover(self) -> None:
        ctx = self.controller_context
        log.info("%sRegistering handlers", self.log_ident)
        # before reading the source of truth, register the handlers, so no change is missed
        for handler in (self.broker_change_handler, self.topic_change_handler, self.topic_deletion_handler,
                        self.log_dir_event_notification_handler):
            self.zk.register_znode_child_change_handler(handler)
        self.zk.register_znode_change_handler(self.partition_reassignment_handler)
        # what a notification asks (LeaderAndIsr to its broker's replicas) the replica state
        # machine's startup does for every broker: the pending ones go, the watch is set
        log.info("%sDeleting log dir event notifications", self.log_ident)
        await self.zk_client.delete_log_dir_event_notifications(None, self.controller_context.epoch_zk_version)
        await self.zk_client.get_all_log_dir_event_notifications()
        log.info("%sInitializing controller context", self.log_ident)
        await self._initialize_controller_context()
        log.info("%sFetching topic deletions in progress", self.log_ident)
        to_delete, ineligible = await self._fetch_topic_deletions_in_progress()
        log.info("%sInitializing topic deletion manager", self.log_ident)
        await self.topic_deletion_manager.init(to_delete, ineligible)
        # brokers must learn the live brokers before the LeaderAndIsr the state machines send
        log.info("%sSending update metadata request", self.log_ident)
        await self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, ())
        # the brokers learn the new controller before the state machines keep this loop busy
        # (bounded: a paused broker still registered must not hold the failover up)
        if not await self.controller_channel_manager.answered(ctx.live_or_shutting_down_broker_ids,
                                                              FIRST_UPDATE_METADATA_WAIT_S):
            log.info("%sNot every broker answered the first UpdateMetadata within %.1f s: going on", self.log_ident,
                     FIRST_UPDATE_METADATA_WAIT_S)
        await self.replica_state_machine.startup()
        await self.partition_state_machine.startup()
        log.info("%sReady to serve as the new controller with epoch %d", self.log_ident, ctx.epoch)
        # initializePartitionReassignments: new ones through ZooKeeper, then the API ones to restart
        zk_resumed = await self._process_zk_partition_reassignment()
        await self._maybe_resume_reassignments(lambda tp, _a: tp not in zk_resumed)
        await self.topic_deletion_manager.try_topic_deletion()
        log.info("%sStarting the controller scheduler", self.log_ident)
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_leader_rebalance_task(self.config.auto_leader_rebalance_initial_delay_s)

    async def _on_controller_resignation(self) -> None:
        log.debug("%sResigning", self.log_ident)
        if self._rebalance_timer is not None:  # kafkaScheduler.shutdown()
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        self._unregister_broker_modifications_handlers(list(self.broker_modifications_handlers))
        self.partition_state_machine.shutdown()
        self.zk.unregister_znode_child_change_handler(TopicsZNode.path)
        self._unregister_partition_modifications_handlers(list(self.partition_modifications_handlers))
        self.zk.unregister_znode_child_change_handler(DeleteTopicsZNode.path)
        self.zk.unregister_znode_child_change_handler(LogDirEventNotificationZNode.path)
        self.zk.unregister_znode_change_handler(ReassignPartitionsZNode.path)
        self.replica_state_machine.shutdown()
        self.zk.unregister_znode_child_change_handler(BrokerIdsZNode.path)
        await self.controller_channel_manager.shutdown()
        self.controller_context.reset_context()
        for batch in (self.broker_request_batch, self.replica_state_machine.batch, self.partition_state_machine.batch):
            batch.clear()
        log.info("%sResigned", self.log_ident)

    async def _initialize_controller_context(self) -> None:
        ctx = self.controller_context
        brokers = await self._read_brokers()
        ctx.set_live_brokers((b.broker, b.epoch) for b in brokers.values())
        log.info("%sInitialized broker epochs cache: %s", self.log_ident, _scala_map(ctx.live_broker_id_and_epochs))
        topics = await self.zk_client.get_all_topics_in_cluster(watch=True)
        ctx.set_all_topics(topics)
        self._register_partition_modifications_handlers(topics)
        assignments = await self._read_assignments(topics)
        await self._process_topic_ids(assignments)
        for a in assignments.values():
            for partition, ra in a.assignment.items():
                tp = TopicPartition(a.topic, partition)
                ctx.update_partition_full_replica_assignment(tp, ra)
                if ra.adding_replicas or ra.removing_replicas:
                    ctx.partitions_being_reassigned.add(tp)
        ctx.clear_partition_leadership_info()
        ctx.shutting_down_broker_ids.clear()
        await self._register_broker_modifications_handlers(ctx.live_or_shutting_down_broker_ids)
        await self._update_leader_and_isr_cache()
        self.controller_channel_manager.startup(ctx.live_or_shutting_down_brokers)
        log.info("%sCurrently active brokers in the cluster: %s", self.log_ident, _scala_set(ctx.live_broker_ids))
        log.info("%sCurrently shutting brokers in the cluster: %s", self.log_ident,
                 _scala_set(ctx.shutting_down_broker_ids))
        log.info("%sCurrent list of topics in the cluster: %s", self.log_ident, _scala_set(ctx.all_topics))

    async def _read_brokers(self) -> dict[int, Any]:
        """Live brokers with epochs, the /brokers/ids child watch armed first."""
        await self.zk_client.get_children(BrokerIdsZNode.path, watch=True)
        return await self.zk_client.get_all_broker_and_epochs_in_cluster()

    async def _read_assignments(self, topics: Iterable[str]) -> dict[str, TopicIdReplicaAssignment]:
        """Each topic's id and assignment, with a data watch armed on its znode (Kafka's reads arm
        one for every path with a registered handler)."""
        out: dict[str, TopicIdReplicaAssignment] = {}
        names = sorted(topics)
        reads = await asyncio.gather(*(self.zk_client.get_data_and_stat(TopicZNode.path(t), watch=True) for t in names),
                                     return_exceptions=True)
        for topic, r in zip(names, reads, strict=True):
            if isinstance(r, BaseException):
                if isinstance(r, NoNodeError):
                    continue
                raise r
            data, stat = r
            if stat is not None:
                out[topic] = TopicZNode.decode(topic, data)
        return out

    async def _process_topic_ids(self, assignments: dict[str, TopicIdReplicaAssignment]) -> None:
        """Give every topic without an id one (written with the assignment, fenced), as Kafka's
        setTopicIds does for topics created before ids existed."""
        ctx = self.controller_context
        for topic, a in list(assignments.items()):
            topic_id = a.topic_id
            if topic_id is None:
                topic_id = uuid.uuid4()
                await self.zk_client.set_topic_assignment(topic, topic_id, dict(a.assignment), ctx.epoch_zk_version)
                assignments[topic] = TopicIdReplicaAssignment(topic, topic_id, a.assignment)
            ctx.add_topic_id(topic, topic_id)

    async def _update_leader_and_isr_cache(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        from controller.zk.partition_state_machine import from_zk_state

        ctx = self.controller_context
        tps = ctx.all_partitions if partitions is None else list(partitions)
        for tp, state in (await self.zk_client.get_topic_partition_states(tps)).items():
            ctx.put_partition_leadership_info(TopicPartition(*tp), from_zk_state(state))

    async def _fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        ctx = self.controller_context
        to_delete = set(await self.zk_client.get_topic_deletions(watch=True))
        with_offline = {t for t in ctx.all_topics
                        if any(not ctx.is_replica_online(r.replica, r.topic_partition) for r in ctx.replicas_for_topic(t))}
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        ineligible = with_offline | reassigning
        log.info("%sList of topics to be deleted: %s", self.log_ident, ",".join(sorted(to_delete)))
        log.info("%sList of topics ineligible for deletion: %s", self.log_ident, ",".join(sorted(ineligible)))
        return to_delete, ineligible

    # -- handlers registration ------------------------------------------------------------------

    async def _register_broker_modifications_handlers(self, broker_ids: Iterable[int]) -> None:
        ids = sorted(broker_ids)
        log.debug("%sRegister BrokerModifications handler for %s", self.log_ident, ids)
        for broker_id in ids:
            handler = NodeHandler(BrokerIdZNode.path(broker_id),
                                   on_change=lambda b=broker_id: self.event_manager.put(BrokerModifications(b)))
            await self.zk_client.register_znode_change_handler_and_check_existence(handler)
            self.broker_modifications_handlers[broker_id] = handler

    def _unregister_broker_modifications_handlers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            handler = self.broker_modifications_handlers.pop(broker_id, None)
            if handler is not None:
                self.zk.unregister_znode_change_handler(handler.path)

    def _register_partition_modifications_handlers(self, topics: Iterable[str]) -> None:
        for topic in topics:
            handler = NodeHandler(TopicZNode.path(topic),
                                   on_change=lambda t=topic: self.event_manager.put(PartitionModifications(t)))
            self.partition_modifications_handlers[topic] = handler
            self.zk.register_znode_change_handler(handler)

    def _unregister_partition_modifications_handlers(self, topics: Iterable[str]) -> None:
        for topic in topics:
            handler = self.partition_modifications_handlers.pop(topic, None)
            if handler is not None:
                self.zk.unregister_znode_change_handler(handler.path)

    # -- requests to brokers --------------------------------------------------------------------

    async def send_update_metadata_request(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        """UpdateMetadata with the given partitions' states to the given brokers."""
        try:
            self.broker_request_batch.new_batch()
            self.broker_request_batch.add_update_metadata_request_for_brokers(sorted(brokers), partitions)
            self.broker_request_batch.send_requests_to_brokers(self.epoch)
        except IllegalStateError as e:
            await self._handle_illegal_state(e)

    # -- DeletionClient -------------------------------------------------------------------------

    async def delete_topics(self, topics: list[str], epoch_zk_version: int) -> None:
        """Kafka's deleteTopic for each of `topics`: the assignment with the partition states, the
        config and, last, the deletion request (a controller that dies half way leaves the request
        for its successor). Each topic's znodes as the context knows them go in one multi, all
        topics pipelined (a topic znode by znode is ten round trips one after another, a thousand
        topics ten thousand); a topic whose multi fails (no config znode, a znode not known here)
        is deleted as Kafka does, znode by znode, in the same order, still pipelined over topics."""
        ctx = self.controller_context
        failed = await self.zk_client.delete_topics_in_one_multi_each(
            {t: [tp.partition for tp in ctx.partitions_for_topic(t)] for t in topics}, epoch_zk_version)
        if failed:
            await self.zk_client.delete_topic_znodes(failed, epoch_zk_version)
            await self.zk_client.delete_topic_configs(failed, epoch_zk_version)
            await self.zk_client.delete_topic_deletions(failed, epoch_zk_version)

    async def delete_topic_deletions(self, topics: list[str], epoch_zk_version: int) -> None:
        await self.zk_client.delete_topic_deletions(topics, epoch_zk_version)

    def resume_deletions_later(self) -> None:
        self.event_manager.put_when_idle(TopicDeletionResume())

    def mute_partition_modifications(self, topics: Iterable[str]) -> None:
        self._unregister_partition_modifications_handlers(topics)

    def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None:
        ctx = self.controller_context
        try:
            self.broker_request_batch.new_batch()
            self.broker_request_batch.add_update_metadata_request_for_brokers(
                sorted(ctx.live_or_shutting_down_broker_ids), partitions)
            self.broker_request_batch.send_requests_to_brokers(self.epoch)
        except IllegalStateError:
            self.broker_request_batch.clear()
            raise

    # -- broker changes -------------------------------------------------------------------------

    async def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.controller_context
        current = await self._read_brokers()
        cur_ids = set(current)
        known = ctx.live_or_shutting_down_broker_ids
        new_ids = cur_ids - known
        dead_ids = known - cur_ids
        bounced_ids = {b for b in cur_ids & known if current[b].epoch > ctx.live_broker_epochs[b]}
        log.info("%sNewly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
                 self.log_ident, ",".join(map(str, sorted(new_ids))), ",".join(map(str, sorted(dead_ids))),
                 ",".join(map(str, sorted(bounced_ids))), ",".join(map(str, sorted(cur_ids))))
        channel = self.controller_channel_manager
        for b in sorted(new_ids):
            channel.add_broker(current[b].broker)
        for b in sorted(bounced_ids):
            channel.remove_broker(b)
            channel.add_broker(current[b].broker)
        for b in sorted(dead_ids):
            channel.remove_broker(b)
        if new_ids:
            ctx.add_live_brokers((current[b].broker, current[b].epoch) for b in new_ids)
            await self._on_broker_startup(sorted(new_ids))
        if bounced_ids:
            ctx.remove_live_brokers(bounced_ids)
            await self._on_broker_failure(sorted(bounced_ids))
            ctx.add_live_brokers((current[b].broker, current[b].epoch) for b in bounced_ids)
            await self._on_broker_startup(sorted(bounced_ids))
        if dead_ids:
            ctx.remove_live_brokers(dead_ids)
            await self._on_broker_failure(sorted(dead_ids))
        if new_ids or dead_ids or bounced_ids:
            log.info("%sUpdated broker epochs cache: %s", self.log_ident, _scala_map(ctx.live_broker_id_and_epochs))

    async def _process_broker_modification(self, broker_id: int) -> None:
        if not self.is_active:
            return
        ctx = self.controller_context
        data, stat = await self.zk_client.get_data_and_stat(BrokerIdZNode.path(broker_id), watch=True)
        old = ctx.live_or_shutting_down_broker(broker_id)
        if stat is None or old is None:
            return
        new = BrokerIdZNode.decode(broker_id, data).broker
        if new.endpoints != old.endpoints or dict(new.features) != dict(old.features):
            log.info("%sUpdated broker metadata: %s -> %s", self.log_ident, old, new)
            ctx.update_broker_metadata(new)
            log.info("%sBroker info update callback for %d", self.log_ident, broker_id)
            await self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, ())

    async def _on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.controller_context
        log.info("%sNew broker startup callback for %s", self.log_ident, ",".join(map(str, new_brokers)))
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = ctx.live_or_shutting_down_broker_ids - set(new_brokers)
        # the existing brokers learn of the new ones; the new ones get every partition's state
        await self.send_update_metadata_request(existing, ())
        await self.send_update_metadata_request(new_brokers, sorted(ctx.partitions_with_leaders()))
        replicas_on_new = ctx.replicas_on_brokers(new_brokers)
        await self.replica_state_machine.handle_state_changes(replicas_on_new, ReplicaState.OnlineReplica)
        await self.partition_state_machine.trigger_online_partition_state_change()
        new_set = set(new_brokers)
        await self._maybe_resume_reassignments(lambda _tp, a: any(r in new_set for r in a.target_replicas))
        for_deletion = {r for r in replicas_on_new if self.topic_deletion_manager.is_topic_queued_up_for_deletion(r.topic)}
        if for_deletion:
            log.info("%sSome replicas %s for topics scheduled for deletion %s are on the newly restarted brokers %s. "
                     "Signaling restart of topic deletion for these topics", self.log_ident,
                     ",".join(map(str, sorted(for_deletion))), ",".join(sorted(ctx.topics_to_be_deleted)),
                     ",".join(map(str, new_brokers)))
            await self.topic_deletion_manager.resume_deletion_for_topics({r.topic for r in for_deletion})
        await self._register_broker_modifications_handlers(new_brokers)

    async def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self.controller_context
        log.info("%sBroker failure callback for %s", self.log_ident, ",".join(map(str, dead_brokers)))
        for b in dead_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        were_shutting_down = [b for b in dead_brokers if b in ctx.shutting_down_broker_ids]
        ctx.shutting_down_broker_ids -= set(were_shutting_down)
        if were_shutting_down:
            log.info("%sRemoved %s from list of shutting down brokers.", self.log_ident,
                     ",".join(map(str, were_shutting_down)))
        await self._on_replicas_become_offline(ctx.replicas_on_brokers(dead_brokers))
        self._unregister_broker_modifications_handlers(dead_brokers)

    async def _on_replicas_become_offline(self, new_offline_replicas: set[PartitionAndReplica]) -> None:
        ctx = self.controller_context
        tdm = self.topic_deletion_manager
        for_deletion = {r for r in new_offline_replicas if tdm.is_topic_queued_up_for_deletion(r.topic)}
        not_for_deletion = new_offline_replicas - for_deletion
        with_offline_leader = sorted(ctx.partitions_with_offline_leader())
        await self.partition_state_machine.handle_state_changes(with_offline_leader, PartitionState.OfflinePartition)
        results = await self.partition_state_machine.trigger_online_partition_state_change()
        await self.replica_state_machine.handle_state_changes(not_for_deletion, ReplicaState.OfflineReplica)
        if for_deletion:
            await tdm.fail_replica_deletion(for_deletion)
        # nothing changed a leader or an ISR: no request carried the news of the dead brokers yet
        if not not_for_deletion and all(isinstance(r, Exception) for r in results.values()):
            await self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, ())

    # -- topic changes --------------------------------------------------------------------------

    async def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.controller_context
        topics = await self.zk_client.get_all_topics_in_cluster(watch=True)
        new_topics = topics - ctx.all_topics
        deleted_topics = ctx.all_topics - topics
        ctx.set_all_topics(topics)
        self._register_partition_modifications_handlers(new_topics)
        added = await self._read_assignments(new_topics)
        for t in deleted_topics:
            ctx.remove_topic(t)
        await self._process_topic_ids(added)
        for a in added.values():
            for partition, ra in a.assignment.items():
                ctx.update_partition_full_replica_assignment(TopicPartition(a.topic, partition), ra)
        log.info("%sNew topics: [%s], deleted topics: [%s], new partition replica assignment [%s]", self.log_ident,
                 _scala_set(new_topics), _scala_set(deleted_topics), _scala_set(_assignment_str(a) for a in added.values()))
        if added:
            await self._on_new_partition_creation(
                [TopicPartition(a.topic, p) for a in added.values() for p in sorted(a.assignment)])

    async def _on_new_partition_creation(self, new_partitions: list[TopicPartition]) -> None:
        ctx = self.controller_context
        log.info("%sNew partition creation callback for %s", self.log_ident, ",".join(map(str, new_partitions)))
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        await psm.handle_state_changes(new_partitions, PartitionState.NewPartition)
        await rsm.handle_state_changes(ctx.replicas_for_partition(new_partitions), ReplicaState.NewReplica)
        await psm.handle_state_changes(new_partitions, PartitionState.OnlinePartition, OFFLINE_CLEAN)
        await rsm.handle_state_changes(ctx.replicas_for_partition(new_partitions), ReplicaState.OnlineReplica)

    async def _process_partition_modifications(self, topic: str) -> None:
        if not self.is_active:
            return
        ctx = self.controller_context
        added = await self._read_assignments([topic])
        if topic not in added:
            return
        assignment = added[topic].assignment
        to_add = {TopicPartition(topic, p): ra for p, ra in assignment.items()
                  if not ctx.partition_replica_assignment(TopicPartition(topic, p))}
        if self.topic_deletion_manager.is_topic_queued_up_for_deletion(topic):
            if to_add:
                log.warning("%sSkipping adding partitions %s for topic %s since it is currently being deleted",
                            self.log_ident, ",".join(str(tp.partition) for tp in sorted(to_add)), topic)
                await self._restore_partition_replica_assignment(topic, assignment)
            else:
                log.info("%sIgnoring partition change during topic deletion as no new partitions are added",
                         self.log_ident)
        elif to_add:
            log.info("%sNew partitions to be added %s", self.log_ident,
                     _scala_map({tp: f"ReplicaAssignment(replicas={','.join(map(str, ra.replicas))}, "
                                     "addingReplicas=, removingReplicas=)" for tp, ra in to_add.items()}))
            for tp, ra in to_add.items():
                ctx.update_partition_full_replica_assignment(tp, ra)
            await self._on_new_partition_creation(sorted(to_add))

    async def _restore_partition_replica_assignment(self, topic: str, assignment: Mapping[int, ReplicaAssignment]) -> None:
        ctx = self.controller_context
        log.info("%sRestoring the partition replica assignment for topic %s", self.log_ident, topic)
        existing = {int(c) for c in await self.zk_client.get_children(TopicPartitionsZNode.path(topic))}
        restored = {p: ctx.partition_full_replica_assignment(TopicPartition(topic, p)) for p in assignment if p in existing}
        await self.zk_client.set_topic_assignment(topic, ctx.topic_ids.get(topic), restored, ctx.epoch_zk_version)

    # -- topic deletion -------------------------------------------------------------------------

    async def _process_topic_deletion(self) -> None:
        if not self.is_active:
            return
        ctx = self.controller_context
        to_delete = set(await self.zk_client.get_topic_deletions(watch=True))
        log.debug("%sDelete topics listener fired for topics %s to be deleted", self.log_ident,
                  ",".join(sorted(to_delete)))
        non_existent = to_delete - ctx.all_topics
        if non_existent:
            log.warning("%sIgnoring request to delete non-existing topics %s", self.log_ident,
                        ",".join(sorted(non_existent)))
            await self.zk_client.delete_topic_deletions(sorted(non_existent), ctx.epoch_zk_version)
        to_delete -= non_existent
        if self.config.delete_topic_enable:
            if to_delete:
                log.info("%sStarting topic deletion for topics %s", self.log_ident, ",".join(sorted(to_delete)))
                reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
                for topic in sorted(to_delete & reassigning):
                    self.topic_deletion_manager.mark_topic_ineligible_for_deletion(
                        {topic}, reason="topic reassignment in progress")
                await self.topic_deletion_manager.enqueue_topics_for_deletion(to_delete)
        else:
            log.info("%sRemoving %s since delete topic is disabled", self.log_ident, _scala_set(to_delete))
            await self.zk_client.delete_topic_deletions(sorted(to_delete), ctx.epoch_zk_version)

    async def _process_topic_deletion_stop_replica_response(self, event: TopicDeletionStopReplicaResponseReceived) -> None:
        if not self.is_active:
            return
        log.debug("%sDelete topic callback invoked on StopReplica response received from broker %d: request error "
                  "= %s, partition errors = %s", self.log_ident, event.replica_id, event.request_error,
                  event.partition_errors)
        errors: dict[TopicPartition, int] = event.partition_errors
        in_error = set(errors) if event.request_error != ErrorCode.NONE else {p for p, e in errors.items() if e != 0}
        failed = {PartitionAndReplica(p, event.replica_id) for p in in_error}
        await self.topic_deletion_manager.fail_replica_deletion(failed)
        if len(failed) != len(errors):
            deleted = {PartitionAndReplica(p, event.replica_id) for p in set(errors) - in_error}
            await self.topic_deletion_manager.complete_replica_deletion(deleted)

    # -- responses ------------------------------------------------------------------------------

    def _process_update_metadata_response(self, response: UpdateMetadataResponse, broker_id: int) -> None:
        if not self.is_active:
            return
        if response.error_code != ErrorCode.NONE:
            self.state_change_logger.error(f"Received error {_error_name(response.error_code)} in UpdateMetadata "
                                           f"response {response} from broker {broker_id}")

    async def _process_log_dir_event_notification(self) -> None:
        """Kafka's processLogDirEventNotification: the brokers that lost a log dir get a
        LeaderAndIsr for each of their replicas (onBrokerLogDirFailure: an OnlineReplica
        transition); their KAFKA_STORAGE_ERROR answers mark those replicas offline (see
        _process_leader_and_isr_response). The notifications read are deleted after."""
        if not self.is_active:
            return
        ctx = self.controller_context
        sequence_numbers = await self.zk_client.get_all_log_dir_event_notifications()
        try:
            broker_ids = await self.zk_client.get_broker_ids_from_log_dir_events(sequence_numbers)
            if broker_ids:
                log.info("%sHandling log directory failure for brokers %s", self.log_ident,
                         ",".join(map(str, broker_ids)))
                replicas = ctx.replicas_on_brokers(broker_ids)
                await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.OnlineReplica)
        finally:
            await self.zk_client.delete_log_dir_event_notifications(sequence_numbers, ctx.epoch_zk_version)

    async def _process_leader_and_isr_response(self, response: LeaderAndIsrResponse, broker_id: int) -> None:
        if not self.is_active:
            return
        ctx = self.controller_context
        if response.error_code != ErrorCode.NONE:
            self.state_change_logger.error(f"Received error {_error_name(response.error_code)} in LeaderAndIsr "
                                           f"response {response} from broker {broker_id}")
            return
        offline: list[TopicPartition] = []
        online: list[TopicPartition] = []
        for t in response.topics:
            name = ctx.topic_name(t.topic_id)
            if name is None:
                continue
            for pe in t.partition_errors:
                tp = TopicPartition(name, pe.partition_index)
                if pe.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    offline.append(tp)
                elif pe.error_code == ErrorCode.NONE:
                    online.append(tp)
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - set(online)) | set(offline)
        ctx.replicas_on_offline_dirs[broker_id] = current
        new_offline = current - previous
        if new_offline:
            self.state_change_logger.with_controller_epoch(ctx.epoch).info(
                f"Mark replicas {','.join(map(str, sorted(new_offline)))} on broker {broker_id} as offline")
            await self._on_replicas_become_offline({PartitionAndReplica(tp, broker_id) for tp in new_offline})

    # -- controlled shutdown --------------------------------------------------------------------

    async def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        try:
            result: Any = await self._do_controlled_shutdown(event.broker_id, event.broker_epoch)
        except Exception as e:
            result = e
        event.callback(result)

    async def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """Move the broker's leaderships away; the replicated partitions it still leads are
        returned (the broker retries until none are left)."""
        if not self.is_active:
            raise ControllerMovedError("Controller moved to another broker. Aborting controlled shutdown")
        ctx = self.controller_context
        if broker_epoch != UNKNOWN_BROKER_EPOCH:
            cached = ctx.live_broker_epochs.get(broker_id)
            if cached is not None and broker_epoch < cached:
                msg = (f"Received controlled shutdown request from an old broker epoch {broker_epoch} for broker "
                       f"{broker_id}. Current broker epoch is {cached}.")
                log.info("%s%s", self.log_ident, msg)
                raise StaleBrokerEpochError(msg)
        log.info("%sShutting down broker %d", self.log_ident, broker_id)
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise BrokerNotAvailableError(f"Broker id {broker_id} does not exist.")
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = [tp for tp in sorted(ctx.partitions_on_broker(broker_id))
                     if len(ctx.partition_replica_assignment(tp)) > 1 and tp in ctx.partition_leadership_info
                     and not self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic)]
        led = [tp for tp in to_act_on if ctx.partition_leadership_info[tp].leader_and_isr.leader == broker_id]
        followed = [tp for tp in to_act_on if tp not in set(led)]
        await self.partition_state_machine.handle_state_changes(led, PartitionState.OnlinePartition, CONTROLLED_SHUTDOWN)
        try:
            self.broker_request_batch.new_batch()
            for tp in followed:
                self.broker_request_batch.add_stop_replica_request_for_brokers([broker_id], tp, delete_partition=False)
            self.broker_request_batch.send_requests_to_brokers(self.epoch)
        except IllegalStateError as e:
            await self._handle_illegal_state(e)
        await self.replica_state_machine.handle_state_changes(
            [PartitionAndReplica(tp, broker_id) for tp in followed], ReplicaState.OfflineReplica)
        # Kafka's replicatedPartitionsBrokerLeads: a partition with no other replica cannot move
        # and does not hold the shutdown up
        return {tp for tp in ctx.partition_leaders_on_broker(broker_id)
                if len(ctx.partition_replica_assignment(tp)) > 1
                and not self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic)}

    # -- AlterPartition -------------------------------------------------------------------------

    async def _process_alter_partition(self, event: AlterPartitionReceived) -> None:
        try:
            response = await self._try_process_alter_partition(event.request, event.version)
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("%sError when processing AlterPartition: %s", self.log_ident, event.request)
            response = AlterPartitionResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
        event.callback(response)
        # once answered: an ISR expansion may complete a reassignment (all target replicas in sync)
        ctx = self.controller_context
        for td in response.topics:
            name = td.topic_name or ctx.topic_name(td.topic_id)
            for pd in td.partitions:
                tp = TopicPartition(name, pd.partition_index) if name else None
                if tp is not None and pd.error_code == ErrorCode.NONE and tp in ctx.partitions_being_reassigned:
                    await self._maybe_complete_reassignment(tp)

    # -- partition reassignment -----------------------------------------------------------------

    async def _process_api_partition_reassignment(self, event: ApiPartitionReassignment) -> None:
        """Kafka's processApiPartitionReassignment: validate each target, build RS = TRS + ORS
        (a None target cancels: back to the origin replicas), then start each reassignment."""
        if not self.is_active:
            event.callback((ErrorCode.NOT_CONTROLLER, None))
            return
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in event.reassignments.items():
            error = None if target is None else self._validate_replicas(tp, target)
            if error is not None:
                results[tp] = error
                continue
            current = self.controller_context.partition_full_replica_assignment(tp)
            if current.is_being_reassigned:
                to_reassign[tp] = current.reassign_to(current.origin_replicas if target is None else target)
            elif target is not None:
                to_reassign[tp] = current.reassign_to(target)
            else:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
        # the latest reassignment, by API or through ZooKeeper, wins: drop the partition from the znode
        await self._maybe_remove_from_zk_reassignment(lambda tp, _r: tp in to_reassign)
        results.update(await self._maybe_trigger_partition_reassignment(to_reassign))
        event.callback(results)

    async def _process_zk_partition_reassignment(self) -> set[TopicPartition]:
        """Kafka's processZkPartitionReassignment: start what /admin/reassign_partitions asks
        (re-arming the creation watch), drop the failed partitions from it; the started ones."""
        if not self.is_active or not await self.zk_client.register_znode_change_handler_and_check_existence(
                self.partition_reassignment_handler):
            return set()
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for (topic, partition), target in (await self.zk_client.get_partition_reassignment()).items():
            tp = TopicPartition(topic, partition)
            to_reassign[tp] = self.controller_context.partition_full_replica_assignment(tp).reassign_to(target)
        results.update(await self._maybe_trigger_partition_reassignment(to_reassign))
        failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.NONE}
        if failed:
            log.warning("%sFailed reassignment through zk with the following errors: %s", self.log_ident,
                        _scala_map({tp: _error_name(code) for tp, (code, _m) in failed.items()}))
            await self._maybe_remove_from_zk_reassignment(lambda tp, _r: tp in failed)
        return set(results) - set(failed)

    async def _maybe_remove_from_zk_reassignment(self, should_remove: Callable[[TopicPartition, list[int]], bool]
                                                 ) -> None:
        """Rewrite /admin/reassign_partitions without the partitions `should_remove` picks; delete
        it when none is left (and look again, so a new one is seen)."""
        ctx = self.controller_context
        if not await self.zk_client.reassign_partitions_in_progress():
            return
        current = await self.zk_client.get_partition_reassignment()
        removing = {tp: r for tp, r in current.items() if should_remove(TopicPartition(*tp), r)}
        remaining = {tp: r for tp, r in current.items() if tp not in removing}
        log.info("%sRemoving partitions %s from the list of reassigned partitions in zookeeper", self.log_ident,
                 _scala_map({f"{t}-{p}": _scala_list(r) for (t, p), r in removing.items()}))
        if not remaining:
            log.info("%sNo more partitions need to be reassigned. Deleting zk path %s", self.log_ident,
                     ReassignPartitionsZNode.path)
            await self.zk_client.delete_partition_reassignment(ctx.epoch_zk_version)
            self.event_manager.put(ZkPartitionReassignment())
        else:
            await self.zk_client.set_or_create_partition_reassignment(remaining, ctx.epoch_zk_version)

    def _validate_replicas(self, tp: TopicPartition, replicas: list[int]) -> tuple[int, str] | None:
        if not replicas:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
        if len(set(replicas)) != len(replicas):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {_scala_buffer(replicas)}")
        if any(r < 0 for r in replicas):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {_scala_buffer(replicas)}"
        ctx = self.controller_context
        adding = ctx.partition_full_replica_assignment(tp).reassign_to(replicas).adding_replicas
        if not set(adding) <= ctx.live_broker_ids:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: {_scala_buffer(adding)}, "
                    f"live broker list: {_scala_set(ctx.live_broker_ids)}")
        return None

    async def _maybe_trigger_partition_reassignment(
            self, reassignments: Mapping[TopicPartition, ReplicaAssignment]) -> dict[TopicPartition, tuple[int, str | None]]:
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        for tp, reassignment in reassignments.items():
            if self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                log.info("%sSkipping reassignment of %s since the topic is currently being deleted", self.log_ident, tp)
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif not self.controller_context.partition_replica_assignment(tp):
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            else:
                try:
                    await self._on_partition_reassignment(tp, reassignment)
                    out[tp] = (ErrorCode.NONE, None)
                except ControllerMovedError:
                    log.info("%sFailed completing reassignment of partition %s because controller has moved to "
                             "another broker", self.log_ident, tp)
                    raise
                except Exception:
                    log.exception("%sError completing reassignment of partition %s", self.log_ident, tp)
                    out[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        return out

    def _process_list_partition_reassignments(self, event: ListPartitionReassignments) -> None:
        if not self.is_active:
            event.callback((ErrorCode.NOT_CONTROLLER, None))
            return
        ctx = self.controller_context
        partitions = ctx.partitions_being_reassigned if event.partitions is None else event.partitions
        event.callback({tp: a for tp in sorted(partitions)
                        if (a := ctx.partition_full_replica_assignment(tp)).is_being_reassigned})

    async def _maybe_resume_reassignments(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
                                          ) -> None:
        ctx = self.controller_context
        for tp in sorted(ctx.partitions_being_reassigned):
            current = ctx.partition_full_replica_assignment(tp)
            if should_resume(tp, current):
                await self._on_partition_reassignment(tp, current)

    async def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        reassignment = self.controller_context.partition_full_replica_assignment(tp)
        if await self._is_reassignment_complete(tp, reassignment):
            log.info("%sTarget replicas %s have all caught up with the leader for reassigning partition %s",
                     self.log_ident, _scala_list(reassignment.target_replicas), tp)
            await self._on_partition_reassignment(tp, reassignment)

    async def _on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Kafka's onPartitionReassignment. RS = ORS + TRS, AR = TRS - ORS, RR = ORS - TRS.
        Not complete (some of TRS out of the ISR): write RS/AR/RR, bump the leader epoch so every
        replica in RS learns the new assignment (LeaderAndIsr), and start AR (NewReplica); the
        followers catch up and the leader adds them to the ISR (AlterPartition), which brings us
        back here. Complete: AR online, RS = TRS, a leader from TRS if the current one leaves, RR
        offline then deleted (StopReplica delete), the assignment znode written, everyone told."""
        ctx = self.controller_context
        self.topic_deletion_manager.mark_topic_ineligible_for_deletion({tp.topic}, reason="topic reassignment in progress")
        await self._update_current_reassignment(tp, reassignment)
        adding, removing = reassignment.adding_replicas, reassignment.removing_replicas
        if not await self._is_reassignment_complete(tp, reassignment):
            await self._update_leader_epoch_and_send_request(tp, reassignment)
            for replica in adding:
                await self.replica_state_machine.handle_state_changes(
                    [PartitionAndReplica(tp, replica)], ReplicaState.NewReplica)
        else:
            await self.replica_state_machine.handle_state_changes(
                [PartitionAndReplica(tp, r) for r in adding], ReplicaState.OnlineReplica)
            completed = ReplicaAssignment(reassignment.target_replicas)
            ctx.update_partition_full_replica_assignment(tp, completed)
            await self._move_reassigned_partition_leader_if_required(tp, completed)
            await self._stop_removed_replicas_of_reassigned_partition(tp, removing)
            await self._update_replica_assignment_for_partition(tp, completed)
            if tp not in ctx.partitions_being_reassigned:
                raise IllegalStateError("Cannot remove a reassigning partition because it is not present in memory")
            done = list(completed.replicas)
            await self._maybe_remove_from_zk_reassignment(lambda p, r: p == tp and list(r) == done)
            ctx.partitions_being_reassigned.discard(tp)
            await self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [tp])
            await self.topic_deletion_manager.resume_deletion_for_topics({tp.topic})

    async def _update_current_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self.controller_context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            log.debug("%sUpdating assignment of partition %s from %s to %s", self.log_ident, tp, current, reassignment)
            await self._update_replica_assignment_for_partition(tp, reassignment)
            ctx.update_partition_full_replica_assignment(tp, reassignment)
            # a replica being added by an earlier reassignment and not wanted by this one goes now
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                await self._stop_removed_replicas_of_reassigned_partition(tp, unneeded)
        ctx.partitions_being_reassigned.add(tp)

    async def _is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        """All target replicas in the ISR, as ZooKeeper has it (not our cache)."""
        if not assignment.is_being_reassigned:
            return True
        state = (await self.zk_client.get_topic_partition_states([tp])).get(tp)
        return state is not None and set(assignment.target_replicas) <= set(state.leader_and_isr.isr)

    async def _update_leader_epoch_and_send_request(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.controller_context
        updated = await self._update_leader_epoch(tp)
        if updated is None:
            self.state_change_logger.with_controller_epoch(ctx.epoch).error(
                f"Failed to send LeaderAndIsr request with new replica assignment {assignment} to leader for "
                f"partition being reassigned {tp}")
            return
        try:
            self.broker_request_batch.new_batch()
            self.broker_request_batch.add_leader_and_isr_request_for_brokers(
                assignment.replicas, tp, updated, assignment, is_new=False)
            self.broker_request_batch.send_requests_to_brokers(ctx.epoch)
        except IllegalStateError as e:
            await self._handle_illegal_state(e)
        self.state_change_logger.with_controller_epoch(ctx.epoch).info(
            f"Sent LeaderAndIsr request {updated} with new replica assignment {assignment} to leader "
            f"{updated.leader_and_isr.leader} for partition being reassigned {tp}")

    async def _update_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """Bump the leader epoch (same leader and ISR) so the leader takes the new replica list;
        re-read and retry on a concurrent write (an ISR change), a bounded number of times."""
        from controller.zk.partition_state_machine import from_zk_state

        ctx = self.controller_context
        for _ in range(_UPDATE_LEADER_EPOCH_ATTEMPTS):
            state = (await self.zk_client.get_topic_partition_states([tp])).get(tp)
            if state is None:
                raise IllegalStateError(f"Cannot update leader epoch for partition {tp} as leaderAndIsr path is "
                                        "empty. This could mean we somehow tried to reassign a partition that doesn't "
                                        "exist")
            current = from_zk_state(state)
            if current.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(
                    f"Leader and isr path written by another controller. This probably means the current controller "
                    f"with epoch {ctx.epoch} went through a soft failure and another controller was elected with "
                    f"epoch {current.controller_epoch}. Aborting state change by this controller")
            update = await self.zk_client.update_leader_and_isr(
                {tp: current.leader_and_isr.new_epoch()}, ctx.epoch, ctx.epoch_zk_version)
            outcome = update.finished_partitions.get(tp)
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                info = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
                ctx.put_partition_leadership_info(tp, info)
                log.info("%sUpdated leader epoch for partition %s to %d, zkVersion=%d", self.log_ident, tp,
                         outcome.leader_epoch, outcome.partition_epoch)
                return info
        return None

    async def _move_reassigned_partition_leader_if_required(self, tp: TopicPartition,
                                                            new_assignment: ReplicaAssignment) -> None:
        ctx = self.controller_context
        replicas = new_assignment.replicas
        info = ctx.partition_leadership_info.get(tp)
        current_leader = NO_LEADER if info is None else info.leader_and_isr.leader
        if current_leader not in replicas:
            log.info("%sLeader %d for partition %s being reassigned, is not in the new list of replicas %s. "
                     "Re-electing leader", self.log_ident, current_leader, tp, ",".join(map(str, replicas)))
            await self.partition_state_machine.handle_state_changes([tp], PartitionState.OnlinePartition, REASSIGN)
        elif ctx.is_replica_online(current_leader, tp):
            log.info("%sLeader %d for partition %s being reassigned, is already in the new list of replicas %s and "
                     "is alive", self.log_ident, current_leader, tp, ",".join(map(str, replicas)))
            await self._update_leader_epoch_and_send_request(tp, new_assignment)
        else:
            log.info("%sLeader %d for partition %s being reassigned, is already in the new list of replicas %s but "
                     "is dead", self.log_ident, current_leader, tp, ",".join(map(str, replicas)))
            await self.partition_state_machine.handle_state_changes([tp], PartitionState.OnlinePartition, REASSIGN)

    async def _stop_removed_replicas_of_reassigned_partition(self, tp: TopicPartition, removed: Iterable[int]) -> None:
        """Offline (out of the ISR), then StopReplica with delete; Kafka does not wait for the
        deletion's answer either."""
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        rsm = self.replica_state_machine
        for target in (ReplicaState.OfflineReplica, ReplicaState.ReplicaDeletionStarted,
                       ReplicaState.ReplicaDeletionSuccessful, ReplicaState.NonExistentReplica):
            await rsm.handle_state_changes(replicas, target)

    async def _update_replica_assignment_for_partition(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.controller_context
        topic_assignment = ctx.partition_full_replica_assignment_for_topic(tp.topic)
        topic_assignment[tp.partition] = assignment
        try:
            await self.zk_client.set_topic_assignment(tp.topic, ctx.topic_ids.get(tp.topic), topic_assignment,
                                                      ctx.epoch_zk_version)
        except NoNodeError as e:
            raise IllegalStateError(f"Failed to update assignment for {tp} since the topic has no current "
                                    "assignment") from e
        log.info("%sSuccessfully updated assignment of partition %s to %s", self.log_ident, tp, assignment)

    async def _try_process_alter_partition(self, request: Any, version: int) -> AlterPartitionResponse:
        """Kafka's tryProcessAlterPartition: validate each partition's leader epoch and partition
        epoch against the controller's view, compare-and-set the state znodes, answer with the new
        state (or the error) per partition, and tell every broker."""
        if not self.is_active:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        ctx = self.controller_context
        broker_id, broker_epoch = request.broker_id, request.broker_epoch
        known_epoch = ctx.live_broker_epochs.get(broker_id)
        if known_epoch is None:
            log.info("%sIgnoring AlterPartition due to unknown broker %d", self.log_ident, broker_id)
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        if known_epoch != broker_epoch:
            log.info("%sIgnoring AlterPartition due to stale broker epoch %d and local broker epoch %s for broker %d",
                     self.log_ident, broker_epoch, known_epoch, broker_id)
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        use_topic_ids = version > 1
        response = AlterPartitionResponse(error_code=ErrorCode.NONE)
        to_alter: dict[TopicPartition, LeaderAndIsr] = {}
        for topic_req in request.topics:
            name = ctx.topic_name(topic_req.topic_id) if use_topic_ids else topic_req.topic_name
            if name is None:
                response.topics.append(AlterPartitionTopicData(topic_id=topic_req.topic_id, partitions=[
                    AlterPartitionPartitionData(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                    for p in topic_req.partitions]))
                continue
            for p in topic_req.partitions:
                isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr)
                to_alter[TopicPartition(name, p.partition_index)] = LeaderAndIsr(
                    broker_id, p.leader_epoch, tuple(isr), LeaderRecoveryState(p.leader_recovery_state),
                    p.partition_epoch)
        results: dict[TopicPartition, LeaderAndIsr | int] = {}
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, new in to_alter.items():
            current = ctx.leader_and_isr(tp)
            if current is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif new.partition_epoch > current.partition_epoch or new.leader_epoch > current.leader_epoch:
                # the leader knows of newer state than we do: we are likely not the controller
                results[tp] = ErrorCode.NOT_CONTROLLER
            elif new.leader_epoch < current.leader_epoch:
                results[tp] = ErrorCode.FENCED_LEADER_EPOCH
            elif new.equals_allow_stale_partition_epoch(current):
                results[tp] = current  # already applied: idempotent
            elif new.partition_epoch < current.partition_epoch:
                results[tp] = ErrorCode.INVALID_UPDATE_VERSION
            elif new.leader_recovery_state is LeaderRecoveryState.RECOVERING and len(new.isr) > 1:
                results[tp] = ErrorCode.INVALID_REQUEST
                log.info("%sRejecting AlterPartition from node %d for %s because leader is recovering and ISR is "
                         "greater than 1: %s", self.log_ident, broker_id, tp, new)
            elif (current.leader_recovery_state is LeaderRecoveryState.RECOVERED
                  and new.leader_recovery_state is LeaderRecoveryState.RECOVERING):
                results[tp] = ErrorCode.INVALID_REQUEST
                log.info("%sRejecting AlterPartition from node %d for %s because the leader recovery state cannot "
                         "change from RECOVERED to RECOVERING: %s", self.log_ident, broker_id, tp, new)
            else:
                ineligible = set(new.isr) - ctx.live_broker_ids
                if ineligible:
                    log.info("%sRejecting AlterPartition request from node %d for %s because it specified ineligible "
                             "replicas %s in the new ISR %s.", self.log_ident, broker_id, tp, _scala_set(ineligible),
                             list(new.isr))
                    results[tp] = ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
                else:
                    adjusted[tp] = new
        log.debug("%sUpdating ISRs for partitions: %s.", self.log_ident, _scala_set(adjusted))
        if adjusted:
            update = await self.zk_client.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
            successful = []
            for p, outcome in update.finished_partitions.items():
                tp = TopicPartition(*p)
                if isinstance(outcome, Exception):
                    log.error("%sFailed to update ISR for partition %s: %s", self.log_ident, tp, outcome)
                    results[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
                else:
                    results[tp] = outcome  # type: ignore[assignment]
                    successful.append(tp)
            for p in update.partitions_to_retry:
                tp = TopicPartition(*p)
                log.info("%sFailed to update ISR to %s for partition %s, bad ZK version.", self.log_ident,
                         adjusted[tp], tp)
                results[tp] = ErrorCode.INVALID_UPDATE_VERSION
            await self._update_leader_and_isr_cache(successful)
        await self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, list(to_alter))
        by_topic: dict[str, AlterPartitionTopicData] = {}
        for tp, outcome in results.items():
            td = by_topic.get(tp.topic)
            if td is None:
                td = by_topic[tp.topic] = (
                    AlterPartitionTopicData(topic_id=ctx.topic_ids.get(tp.topic, ZERO_UUID)) if use_topic_ids
                    else AlterPartitionTopicData(topic_name=tp.topic))
                response.topics.append(td)
            if isinstance(outcome, LeaderAndIsr):
                td.partitions.append(AlterPartitionPartitionData(
                    partition_index=tp.partition, error_code=ErrorCode.NONE, leader_id=outcome.leader,
                    leader_epoch=outcome.leader_epoch, isr=list(outcome.isr),
                    leader_recovery_state=int(outcome.leader_recovery_state), partition_epoch=outcome.partition_epoch))
            else:
                td.partitions.append(AlterPartitionPartitionData(partition_index=tp.partition, error_code=outcome))
        return response

    # -- leader elections -----------------------------------------------------------------------

    def _schedule_auto_leader_rebalance_task(self, delay_s: float) -> None:
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
        self._rebalance_timer = asyncio.get_running_loop().call_later(
            delay_s, self.event_manager.put, AutoPreferredReplicaLeaderElection())

    async def _process_auto_preferred_replica_leader_election(self) -> None:
        if not self.is_active:
            return
        try:
            log.info("%sProcessing automatic preferred replica leader election", self.log_ident)
            await self._check_and_trigger_auto_leader_rebalance()
        finally:
            if self.is_active:
                self._schedule_auto_leader_rebalance_task(self.config.leader_imbalance_check_interval_seconds)

    async def _check_and_trigger_auto_leader_rebalance(self) -> None:
        """Per preferred leader (the head of each assignment): if more than
        leader.imbalance.per.broker.percentage of its partitions are led by another broker, a
        preferred replica election for those whose preferred replica can lead."""
        ctx, tdm = self.controller_context, self.topic_deletion_manager
        log.debug("%sChecking need to trigger auto leader balancing", self.log_ident)
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions:
            replicas = ctx.partition_replica_assignment(tp)
            if replicas and not tdm.is_topic_queued_up_for_deletion(tp.topic):
                by_preferred.setdefault(replicas[0], []).append(tp)
        for leader_broker, partitions in sorted(by_preferred.items()):
            not_preferred = [tp for tp in partitions if (lai := ctx.leader_and_isr(tp)) is not None
                             and lai.leader != leader_broker]
            ratio = len(not_preferred) / len(partitions)
            log.debug("%sLeader imbalance ratio for broker %d is %s", self.log_ident, leader_broker, ratio)
            if ratio > self.config.leader_imbalance_per_broker_percentage / 100:
                candidates = {tp for tp in not_preferred if not tdm.is_topic_queued_up_for_deletion(tp.topic)
                              and tp.topic in ctx.all_topics and self._can_preferred_replica_be_leader(tp)}
                await self._on_replica_election(candidates, "PREFERRED", AUTO_TRIGGERED)

    def _can_preferred_replica_be_leader(self, tp: TopicPartition) -> bool:
        ctx = self.controller_context
        assignment = ctx.partition_replica_assignment(tp)
        lai = ctx.leader_and_isr(tp)
        live = [r for r in assignment if ctx.is_replica_online(r, tp)]
        return lai is not None and preferred_replica_partition_leader_election(assignment, lai.isr, live) is not None

    async def _on_replica_election(self, partitions: set[TopicPartition], election_type: str,
                                   trigger: str) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        log.info("%sStarting replica leader election (%s) for partitions %s triggered by %s", self.log_ident,
                 election_type, ",".join(map(str, sorted(partitions))), trigger)
        strategy = PREFERRED if election_type == "PREFERRED" else ElectionStrategy(
            PartitionLeaderElectionStrategy.OFFLINE, allow_unclean=trigger == ADMIN_CLIENT_TRIGGERED)
        results = await self.partition_state_machine.handle_state_changes(
            sorted(partitions), PartitionState.OnlinePartition, strategy)
        if trigger != ADMIN_CLIENT_TRIGGERED:
            for tp, r in results.items():
                if isinstance(r, ControllerMovedError):
                    raise r
                if isinstance(r, Exception):
                    log.error("%sError completing replica leader election (%s) for partition %s: %s",
                              self.log_ident, election_type, tp, r)
            if trigger == AUTO_TRIGGERED:
                ctx = self.controller_context
                for tp in sorted(partitions):
                    lai, replicas = ctx.leader_and_isr(tp), ctx.partition_replica_assignment(tp)
                    if lai is None or not replicas:
                        continue
                    if lai.leader == replicas[0]:
                        log.info("%sPartition %s completed preferred replica leader election. New leader is %d",
                                 self.log_ident, tp, replicas[0])
                    else:
                        log.warning("%sPartition %s failed to complete preferred replica leader election to %d. "
                                    "Leader is still %d", self.log_ident, tp, replicas[0], lai.leader)
        return results

    async def _process_replica_leader_election(self, event: ReplicaLeaderElection) -> None:
        """ElectLeaders: unknown partitions, topics being deleted and partitions whose leader is
        already the one asked for are answered without an election."""
        partitions = set(event.partitions or ())
        if not self.is_active:
            event.callback({tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions})
            return
        ctx, tdm = self.controller_context, self.topic_deletion_manager
        known_all = set(ctx.all_partitions)
        unknown = {tp for tp in partitions if tp not in known_all}
        for tp in sorted(unknown):
            log.info("%sSkipping replica leader election (%s) for partition %s by %s since it doesn't exist.",
                     self.log_ident, event.election_type, tp, event.election_trigger)
        known = partitions - unknown
        being_deleted = {tp for tp in known if tdm.is_topic_queued_up_for_deletion(tp.topic)}
        if being_deleted:
            log.warning("%sSkipping replica leader election (%s) for partitions %s by %s since the respective "
                        "topics are being deleted", self.log_ident, event.election_type, _scala_set(being_deleted),
                        event.election_trigger)
        electable: set[TopicPartition] = set()
        already_valid: set[TopicPartition] = set()
        for tp in known - being_deleted:
            lai = ctx.leader_and_isr(tp)
            leader = NO_LEADER if lai is None else lai.leader
            if event.election_type == "PREFERRED":
                needed = leader != ctx.partition_replica_assignment(tp)[0]
            else:
                needed = leader == NO_LEADER or leader not in ctx.live_broker_ids
            (electable if needed else already_valid).add(tp)
        outcome: dict[TopicPartition, Any] = {}
        for tp, r in (await self._on_replica_election(electable, event.election_type, event.election_trigger)).items():
            if isinstance(r, StateChangeFailedError):
                code = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if event.election_type == "PREFERRED"
                        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
                outcome[tp] = (code, str(r))
            elif isinstance(r, Exception):
                outcome[tp] = (getattr(r, "code", ErrorCode.UNKNOWN_SERVER_ERROR), None)
            else:
                outcome[tp] = r.leader
        outcome.update({tp: (ErrorCode.ELECTION_NOT_NEEDED, None) for tp in already_valid})
        outcome.update({tp: (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted") for tp in being_deleted})
        outcome.update({tp: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.") for tp in unknown})
        event.callback(outcome)

    # -- configuration reads --------------------------------------------------------------------

    async def _unclean_leader_election_enabled(self, topics: Iterable[str]) -> dict[str, bool | Exception]:
        """Each topic's unclean.leader.election.enable: its /config/topics override, else the
        broker default (Kafka's zkClient.getLogConfigs)."""
        out: dict[str, bool | Exception] = {}
        for topic in topics:
            try:
                configs = await self.zk_client.get_entity_configs(ConfigType.TOPIC, topic)
            except ControllerMovedError:
                raise
            except Exception as e:
                out[topic] = e
                continue
            value = configs.get("unclean.leader.election.enable")
            out[topic] = self.config.unclean_leader_election_enable if value is None else value.strip().lower() == "true"
        return out


class StaleBrokerEpochError(Exception):
    code = ErrorCode.STALE_BROKER_EPOCH


class BrokerNotAvailableError(Exception):
    code = ErrorCode.BROKER_NOT_AVAILABLE


_UPDATE_LEADER_EPOCH_ATTEMPTS = 10  # Kafka retries until it wins; we stop rather than spin


def _scala_buffer(ids: Iterable[int]) -> str:
    """A Scala mutable.Buffer as Kafka prints it (the request's replicas, converted from Java)."""
    return f"ArrayBuffer({', '.join(map(str, ids))})"


def _scala_list(ids: Iterable[int]) -> str:
    return f"List({', '.join(map(str, ids))})"


def _assignment_str(a: TopicIdReplicaAssignment) -> str:
    parts = ", ".join(f"{a.topic}-{p} -> ReplicaAssignment(replicas={','.join(map(str, ra.replicas))}, "
                      "addingReplicas=, removingReplicas=)" for p, ra in sorted(a.assignment.items()))
    return f"TopicIdReplicaAssignment({a.topic},Some({a.topic_id}),Map({parts}))"


def _error_name(code: int) -> str:
    from protocol.errors import error_name

    return error_name(code)
