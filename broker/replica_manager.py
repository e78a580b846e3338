"""ReplicaManager: the broker's view of the partitions it hosts (each a `broker.partition.Partition`).

Why here and not in storage: a `Log` knows bytes and offsets; a `Partition` knows whether this
broker leads it, its leader epoch, ISR and high watermark, and when a write is acknowledged
enough (acks, min.insync.replicas). The ReplicaManager creates and deletes partitions when the
metadata image changes (on one node: when the embedded controller creates or deletes a topic; in a
cluster: on LeaderAndIsr), and routes produce/fetch to them. Waiting (acks=all, fetch min bytes)
goes through purgatories keyed by partition, completed by `check_and_complete` after appends.

ZooKeeper mode: what this broker hosts, and whether it leads or follows, is the controller's
word, not the metadata cache's: LeaderAndIsr (`become_leader_or_follower`, Kafka's
becomeLeaderOrFollower/makeLeaders/makeFollowers) creates the logs and sets each partition's
leader, leader epoch, ISR and partition epoch; StopReplica (`stop_replicas`) stops and deletes
them; UpdateMetadata (`maybe_update_metadata_cache`) replaces the MetadataCache's image. All three
are fenced by the controller epoch (STALE_CONTROLLER_EPOCH for an older controller) and run one
at a time (Kafka's replicaStateChangeLock). Followers only record their state here: fetching from
the leader and truncating by leader epoch are the replica fetcher's. A partition this broker
does not host but the metadata cache knows is answered NOT_LEADER_OR_FOLLOWER (the client
refreshes its metadata); one nobody knows, UNKNOWN_TOPIC_OR_PARTITION.

All state here is owned by the event loop: mutated only by plain functions on the loop thread
(STYLE #9). Blocking file work (fsync, log open/delete) runs in the default executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from broker.alter_partition_manager import AlterPartitionManager
from broker.delayed_fetch import DelayedFetch
from broker.delayed_produce import DelayedProduce
from broker.fetch_session import FetchSessionCache
from broker.log_limiter import RecentValues
from broker.metadata_cache import MetadataCache
from broker.metrics.topic_stats import BrokerTopicStats
from broker.network_client import NetworkClient, NetworkClientConfig
from broker.partition import Partition, PendingIsrChange, alter_partition_retriable
from broker.purgatory import DelayedOperationPurgatory
from broker.replica_fetcher import (
    FetcherConfig,
    PartitionFetchState,
    ReplicaFetcherManager,
)
from broker.replica_selector import ClientMetadata, preferred_read_replica, replica_selector
from broker.replication_quota import UNLIMITED, ReplicationQuotaManager
from broker.transaction_verification import verify_transactional_produce
from controller.image import INTERNAL_TOPICS, PartitionState, TopicState
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.primitives import ZERO_UUID
from storage.checkpoints import CheckpointFormatError, PartitionMetadataFile
from storage.config import LogConfig
from storage.errors import KafkaStorageError, StorageError
from storage.producer_state import AppendOrigin
from storage.verification_guard import SENTINEL, VerificationGuard

if TYPE_CHECKING:
    from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
    from broker.server import BrokerServer
    from storage.log import Log

log = structlog.get_logger("odradek.replica")

TopicPartition = tuple[str, int]


# kafka.api.LeaderAndIsr: the epoch sentinels a StopReplica may carry
EPOCH_DURING_DELETE = -2  # the topic is being deleted: stop whatever the current epoch
NO_EPOCH = -1  # StopReplica v0-2 carry no leader epoch
INITIAL_CONTROLLER_EPOCH = 0  # KafkaController.InitialControllerEpoch


class StateChangeLogger:
    """Kafka's broker-side StateChangeLogger: the "state.change.logger" logger with the
    "[Broker id=N] " prefix, so the state-change log reads as a Kafka broker's."""

    def __init__(self, broker_id: int) -> None:
        self.prefix = f"[Broker id={broker_id}] "
        self.log = logging.getLogger("state.change.logger")

    def message_with_prefix(self, message: str) -> str:
        return self.prefix + message

    def info(self, message: str) -> None:
        self.log.info(self.prefix + message)

    def warn(self, message: str) -> None:
        self.log.warning(self.prefix + message)

    def error(self, message: str) -> None:
        self.log.error(self.prefix + message)


_NO_LOG_START_OFFSET = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
})


@dataclass(slots=True)
class ProduceResult:
    error: int = 0
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    # KIP-467: (batch index, message) of each record the log's validation refused
    record_errors: list[tuple[int, str | None]] | None = None


# -- ZooKeeper mode: the controller's requests ----------------------------------------------------


def leader_and_isr_partition_states(request: Any, version: int) -> Iterable[Any]:
    """LeaderAndIsrRequest.partitionStates(): the ungrouped view, each with its topic name."""
    if version < 2:
        yield from request.ungrouped_partition_states
        return
    for topic in request.topic_states:
        for state in topic.partition_states:
            state.topic_name = topic.topic_name
            yield state


def stop_replica_partition_states(request: Any, version: int) -> dict[TopicPartition, tuple[bool, int]]:
    """StopReplicaRequest.partitionStates(): (delete, leader epoch) per partition; before v3 the
    request-wide delete flag and no epoch (NO_EPOCH)."""
    if version < 1:
        return {(p.topic_name, p.partition_index): (request.delete_partitions, NO_EPOCH)
                for p in request.ungrouped_partitions}
    if version < 3:
        return {(t.name, i): (request.delete_partitions, NO_EPOCH) for t in request.topics for i in t.partition_indexes}
    return {(t.topic_name, p.partition_index): (p.delete_partition, p.leader_epoch)
            for t in request.topic_states for p in t.partition_states}


def _ids(ids: Iterable[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


def _kafka_uuid(topic_id: uuid.UUID | None) -> str:
    from storage.checkpoints import kafka_uuid_str

    return "None" if topic_id is None else kafka_uuid_str(topic_id)


class _ZkReplicaState:
    """Mixin of ReplicaManager: Kafka's ReplicaManager handling of the controller's requests."""

    partitions: dict[TopicPartition, Partition]
    offline: dict[TopicPartition, str]
    empty_partitions: set[TopicPartition]
    broker_id: int
    controller_epoch: int
    state_change_logger: StateChangeLogger
    topic_config_source: Callable[[str], Awaitable[dict[str, str]]] | None
    _state_change_lock: asyncio.Lock
    fetch_purgatory: DelayedOperationPurgatory[DelayedFetch]
    produce_purgatory: DelayedOperationPurgatory[DelayedProduce]
    leadership_listeners: list[Callable[[list[TopicPartition], list[TopicPartition]], None]]

    if TYPE_CHECKING:
        @property
        def image(self) -> MetadataCache: ...

        @property
        def log_manager(self) -> Any: ...

        def log_config_for(self, topic: TopicState) -> LogConfig: ...

    async def maybe_update_metadata_cache(self, correlation_id: int, request: Any, version: int) -> list[TopicPartition]:
        """UpdateMetadata: refused with STALE_CONTROLLER_EPOCH from an older controller, else the
        new image; returns the partitions it deleted."""
        async with self._state_change_lock:
            if request.controller_epoch < self.controller_epoch:
                message = (f"Received update metadata request with correlation id {correlation_id} from an old "
                           f"controller {request.controller_id} with epoch {request.controller_epoch}. Latest known "
                           f"controller epoch is {self.controller_epoch}")
                self.state_change_logger.warn(message)
                raise KafkaProtocolError(ErrorCode.STALE_CONTROLLER_EPOCH,
                                         self.state_change_logger.message_with_prefix(message))
            deleted = self.image.update_metadata(correlation_id, request, version, self.broker_id)
            self.controller_epoch = request.controller_epoch
            return deleted

    async def become_leader_or_follower(self, correlation_id: int, request: Any, version: int) -> dict[TopicPartition, int] | int:
        """LeaderAndIsr: per partition NONE or the reason it was not applied, or one error
        (STALE_CONTROLLER_EPOCH) for the whole request from an older controller.

        Kafka's rules: a partition on a failed log dir is KAFKA_STORAGE_ERROR; a topic id other
        than the one of the partition's log INCONSISTENT_TOPIC_ID; a leader epoch above the
        current one is applied if this broker is among the replicas (else
        UNKNOWN_TOPIC_OR_PARTITION), an older or equal one is STALE_CONTROLLER_EPOCH. Applied
        states make this broker leader (the partition's leader is us) or follower."""
        async with self._state_change_lock:
            started = time.monotonic()
            scl = self.state_change_logger
            controller_id, controller_epoch = request.controller_id, request.controller_epoch
            states = list(leader_and_isr_partition_states(request, version))
            scl.info(f"Handling LeaderAndIsr request correlationId {correlation_id} from controller "
                     f"{controller_id} for {len(states)} partitions")
            if controller_epoch < self.controller_epoch:
                scl.warn(f"Ignoring LeaderAndIsr request from controller {controller_id} with correlation id "
                         f"{correlation_id} since its controller epoch {controller_epoch} is old. Latest known "
                         f"controller epoch is {self.controller_epoch}")
                return ErrorCode.STALE_CONTROLLER_EPOCH
            self.controller_epoch = controller_epoch
            topic_ids = {t.topic_name: t.topic_id for t in request.topic_states
                         if t.topic_id != ZERO_UUID} if version >= 5 else {}
            unhosted = [(s.topic_name, s.partition_index) for s in states
                        if (s.topic_name, s.partition_index) not in self.partitions]
            on_disk = await asyncio.get_running_loop().run_in_executor(None, self._log_topic_ids, unhosted)
            responses: dict[TopicPartition, int] = {}
            leaders, followers = [], []
            for st in states:
                tp = (st.topic_name, st.partition_index)
                if tp in self.offline:
                    scl.warn(f"Ignoring LeaderAndIsr request from controller {controller_id} with correlation id "
                             f"{correlation_id} epoch {controller_epoch} for partition {_tp(tp)} as the local "
                             "replica for the partition is in an offline log directory")
                    responses[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                existing = self.partitions.get(tp)
                current_epoch = existing.leader_epoch if existing is not None else -1
                request_id = topic_ids.get(st.topic_name)
                log_id = existing.topic_id if existing is not None else on_disk.get(tp)
                if request_id is not None and log_id is not None and log_id != request_id:
                    scl.error(f"Topic ID in memory: {_kafka_uuid(log_id)} does not match the topic ID for "
                              f"partition {_tp(tp)} received: {_kafka_uuid(request_id)}.")
                    responses[tp] = ErrorCode.INCONSISTENT_TOPIC_ID
                elif st.leader_epoch > current_epoch:
                    if self.broker_id in st.replicas:
                        (leaders if st.leader == self.broker_id else followers).append(st)
                    else:
                        scl.warn(f"Ignoring LeaderAndIsr request from controller {controller_id} with correlation "
                                 f"id {correlation_id} epoch {controller_epoch} for partition {_tp(tp)} as itself is "
                                 f"not in assigned replica list {','.join(map(str, st.replicas))}")
                        responses[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif st.leader_epoch < current_epoch:
                    scl.warn(f"Ignoring LeaderAndIsr request from controller {controller_id} with correlation id "
                             f"{correlation_id} epoch {controller_epoch} for partition {_tp(tp)} since its "
                             f"associated leader epoch {st.leader_epoch} is smaller than the current leader epoch "
                             f"{current_epoch}")
                    responses[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                else:
                    scl.info(f"Ignoring LeaderAndIsr request from controller {controller_id} with correlation id "
                             f"{correlation_id} epoch {controller_epoch} for partition {_tp(tp)} since its "
                             f"associated leader epoch {st.leader_epoch} matches the current leader epoch")
                    responses[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            if leaders:
                await self._make_leaders(leaders, topic_ids, on_disk, responses)
            if followers:
                await self._make_followers(request, correlation_id, followers, topic_ids, on_disk, responses)
            self.empty_partitions.update(
                tp for st in states if (tp := (st.topic_name, st.partition_index)) not in self.partitions
                and tp not in self.offline)
            applied = [(st.topic_name, st.partition_index) for st in leaders + followers
                       if responses.get((st.topic_name, st.partition_index)) == ErrorCode.NONE]
            self._leadership_changed([tp for tp in applied if (p := self.partitions.get(tp)) and p.is_leader],
                                     [tp for tp in applied if (p := self.partitions.get(tp)) and not p.is_leader])
            scl.info(f"Finished LeaderAndIsr request in {int((time.monotonic() - started) * 1000)}ms correlationId "
                     f"{correlation_id} from controller {controller_id} for {len(states)} partitions")
            return responses

    def _log_topic_ids(self, tps: list[TopicPartition]) -> dict[TopicPartition, uuid.UUID]:
        """The topic id in `partition.metadata` of each loaded but unhosted log (a log left by an
        earlier incarnation of the topic must not be taken over by a new one); blocking."""
        out = {}
        for tp in tps:
            log_ = self.log_manager.get_log(*tp)
            if log_ is None:
                continue
            try:
                out[tp] = PartitionMetadataFile(PartitionMetadataFile.new_file(log_.dir)).read().topic_id
            except (FileNotFoundError, CheckpointFormatError):
                continue
        return out

    def _topic_id_for(self, name: str, topic_ids: dict[str, uuid.UUID], on_disk: dict[TopicPartition, uuid.UUID],
                      tp: TopicPartition) -> uuid.UUID:
        """The topic id a new log is written with: the request's (v5+), else its log's, else the
        metadata cache's, else a new one (LeaderAndIsr before v5 carries none)."""
        if name in topic_ids:
            return topic_ids[name]
        if tp in on_disk:
            return on_disk[tp]
        cached = self.image.topic(name)
        return cached.topic_id if cached is not None and cached.topic_id != ZERO_UUID else uuid.uuid4()

    async def _logs_for(self, states: list[Any], topic_ids: dict[str, uuid.UUID],
                        on_disk: dict[TopicPartition, uuid.UUID], responses: dict[TopicPartition, int],
                        ) -> dict[TopicPartition, tuple[Log, uuid.UUID]]:
        """The log of each partition, created (with the topic's config overrides) when this
        broker does not host it yet; a log that cannot be created marks its partition offline
        (KAFKA_STORAGE_ERROR), as Kafka's markPartitionOffline."""
        out: dict[TopicPartition, tuple[Log, uuid.UUID]] = {}
        to_open: list[tuple[TopicPartition, uuid.UUID, LogConfig]] = []
        configs: dict[str, LogConfig | None] = {}
        for st in states:
            tp = (st.topic_name, st.partition_index)
            hosted = self.partitions.get(tp)
            if hosted is not None:
                out[tp] = (hosted.log, hosted.topic_id)
                continue
            if st.topic_name not in configs:
                configs[st.topic_name] = await self._topic_log_config(st.topic_name)
            config = configs[st.topic_name]
            if config is None:  # ZooKeeper unreachable: Kafka skips the state change
                continue
            to_open.append((tp, self._topic_id_for(st.topic_name, topic_ids, on_disk, tp), config))
        if to_open:
            opened = await asyncio.get_running_loop().run_in_executor(None, self._open_partition_logs, to_open)
            for (tp, topic_id, _), log_ in zip(to_open, opened, strict=True):
                if isinstance(log_, Exception):
                    self.state_change_logger.error(
                        f"Skipped the state change for partition {_tp(tp)} since the replica for the partition "
                        f"is offline due to storage error {log_}")
                    self.offline[tp] = str(log_)
                    responses[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                else:
                    out[tp] = (log_, topic_id)
        return out

    async def _topic_log_config(self, topic: str) -> LogConfig | None:
        overrides: dict[str, str] = {}
        if self.topic_config_source is not None:
            try:
                overrides = await self.topic_config_source(topic)
            except Exception as e:
                self.state_change_logger.error(f"Reading the configs of topic {topic} failed, skipping the state "
                                               f"change of its partitions: {e}")
                return None
        return self.log_config_for(TopicState(topic, ZERO_UUID, {}, overrides))

    def _open_partition_logs(self, todo: list[tuple[TopicPartition, uuid.UUID, LogConfig]]) -> list[Log | Exception]:
        opened: list[Log | Exception] = []
        for (topic, partition), topic_id, config in todo:
            try:
                opened.append(self.log_manager.get_or_create_log(topic, partition, config, topic_id))
            except (OSError, StorageError) as e:
                opened.append(e)
        return opened

    def _host(self, tp: TopicPartition, topic_id: uuid.UUID, state: PartitionState, log_: Log,
              apply: bool = True) -> tuple[Partition, int | None, int]:
        """The hosted partition (hosted now at `state` if it was not) with its previous leader and
        epoch; `apply`: set `state` on a partition hosted already (make_leader / make_follower
        set it themselves, under the partition's serialisation)."""
        p = self.partitions.get(tp)
        if p is None:
            self.offline.pop(tp, None)
            self.empty_partitions.discard(tp)
            p = self.partitions[tp] = Partition(TopicState(tp[0], topic_id, {}), state, log_, self.broker_id)
            p.on_high_watermark_moved = self._high_watermark_moved
            return p, None, -1
        previous = (p.state.leader if p.state.leader >= 0 else None, p.leader_epoch)
        if apply:
            p.set_state(state)
        return p, previous[0], previous[1]

    async def _make_leaders(self, states: list[Any], topic_ids: dict[str, uuid.UUID],
                            on_disk: dict[TopicPartition, uuid.UUID], responses: dict[TopicPartition, int]) -> None:
        """Kafka's makeLeaders / Partition.makeLeader."""
        scl = self.state_change_logger
        for st in states:
            responses[(st.topic_name, st.partition_index)] = ErrorCode.NONE
        logs = await self._logs_for(states, topic_ids, on_disk, responses)
        for st in states:
            tp = (st.topic_name, st.partition_index)
            if tp not in logs:
                continue
            log_, topic_id = logs[tp]
            if self._at_newer_partition_epoch(tp, st, topic_id, "leader"):
                continue
            state = PartitionState(st.partition_index, list(st.replicas), self.broker_id, st.leader_epoch,
                                   list(st.isr), st.partition_epoch)
            p, prev_leader, prev_epoch = self._host(tp, topic_id, state, log_, apply=False)
            self.replica_fetcher_manager.remove_partitions([tp])
            # the epoch starts at the log end offset (Kafka's maybeAssignEpochStartOffset), once
            # the previous leadership's truncation or roll is done; the ISR reports again
            try:
                hw_moved = await p.make_leader(state, int(time.time() * 1000))
            except KafkaStorageError as e:  # its dir failed meanwhile (Kafka: markPartitionOffline)
                self._storage_error_in_state_change(tp, "leader", e, responses)
                continue
            if hw_moved is None:
                self._skipped_at_newer_partition_epoch(tp, st, topic_id, "leader", p)
                continue
            scl.info(f"Leader {_tp(tp)} with topic id {_kafka_uuid(topic_id)} starts at leader epoch "
                     f"{st.leader_epoch} from offset {log_.log_end_offset} with partition epoch {st.partition_epoch}, "
                     f"high watermark {log_.high_watermark}, ISR {_ids(st.isr)}, adding replicas "
                     f"{_ids(getattr(st, 'adding_replicas', []))} and removing replicas "
                     f"{_ids(getattr(st, 'removing_replicas', []))}. Previous leader {_opt(prev_leader)} and previous "
                     f"leader epoch was {prev_epoch}.")
            if hw_moved:
                self.fetch_purgatory.check_and_complete(tp)

    async def _make_followers(self, request: Any, correlation_id: int, states: list[Any], topic_ids: dict[str, uuid.UUID],
                              on_disk: dict[TopicPartition, uuid.UUID], responses: dict[TopicPartition, int]) -> None:
        """Kafka's makeFollowers / Partition.makeFollower: the follower records the leader, its
        epoch and the partition epoch (a follower keeps no ISR) and stops serving as leader;
        parked produce and fetch requests for the partition complete (NOT_LEADER_OR_FOLLOWER).
        No truncation here: the replica fetcher truncates by leader epoch."""
        scl = self.state_change_logger
        for st in states:
            responses[(st.topic_name, st.partition_index)] = ErrorCode.NONE
        logs = await self._logs_for(states, topic_ids, on_disk, responses)
        for st in states:
            tp = (st.topic_name, st.partition_index)
            if tp not in logs:
                continue
            log_, topic_id = logs[tp]
            hosted = self.partitions.get(tp)
            if st.leader not in self.image.brokers:
                scl.error(f"Received LeaderAndIsrRequest with correlation id {correlation_id} from controller "
                          f"{request.controller_id} epoch {request.controller_epoch} for partition {_tp(tp)} (last "
                          f"update controller epoch {st.controller_epoch}) but cannot become follower since the new "
                          f"leader {st.leader} is unavailable.")
                if hosted is None:  # the log exists now (its high watermark is checkpointed): host it leaderless
                    self._host(tp, topic_id, PartitionState(st.partition_index, list(st.replicas), -1, -1, [], -1), log_)
                continue
            if self._at_newer_partition_epoch(tp, st, topic_id, "follower"):
                continue
            state = PartitionState(st.partition_index, list(st.replicas), st.leader, st.leader_epoch, [], st.partition_epoch)
            p, prev_leader, prev_epoch = self._host(tp, topic_id, state, log_, apply=False)
            self.replica_fetcher_manager.remove_partitions([tp])
            # fetch from the new leader; the first fetch names our last epoch, so a log that
            # diverged is truncated by the leader's answer (DivergingEpoch)
            try:
                start = await p.make_follower(state)
            except KafkaStorageError as e:  # its dir failed meanwhile (Kafka: markPartitionOffline)
                self._storage_error_in_state_change(tp, "follower", e, responses)
                continue
            if start is None:
                self._skipped_at_newer_partition_epoch(tp, st, topic_id, "follower", p)
                continue
            fetch_offset, last_epoch = start
            self.replica_fetcher_manager.add_partitions({tp: (st.leader, PartitionFetchState(
                fetch_offset, st.leader_epoch, last_epoch))})
            scl.info(f"Follower {_tp(tp)} starts at leader epoch {st.leader_epoch} from offset {log_.log_end_offset} "
                     f"with partition epoch {st.partition_epoch} and high watermark {log_.high_watermark}. Current "
                     f"leader is {st.leader}. Previous leader {_opt(prev_leader)} and previous leader epoch was "
                     f"{prev_epoch}.")
            self.produce_purgatory.check_and_complete(tp)
            self.fetch_purgatory.check_and_complete(tp)

    def _storage_error_in_state_change(self, tp: TopicPartition, role: str, e: KafkaStorageError,
                                       responses: dict[TopicPartition, int]) -> None:
        """A become-leader/follower whose log's dir failed: answered KAFKA_STORAGE_ERROR (the
        controller takes the replica offline); the log-dir failure handler unhosts it."""
        self.state_change_logger.error(f"Skipped the become-{role} state change for {_tp(tp)} since the replica "
                                       f"for the partition is offline due to storage error {e.message}")
        responses[tp] = ErrorCode.KAFKA_STORAGE_ERROR

    def _at_newer_partition_epoch(self, tp: TopicPartition, st: Any, topic_id: uuid.UUID, role: str) -> bool:
        """Kafka's Partition.makeLeader / makeFollower guard: a state older than the partition's
        current partition epoch is skipped (and said so), not applied."""
        hosted = self.partitions.get(tp)
        if hosted is None or not hosted.has_newer_partition_epoch(st.partition_epoch):
            return False
        self._skipped_at_newer_partition_epoch(tp, st, topic_id, role, hosted)
        return True

    def _skipped_at_newer_partition_epoch(self, tp: TopicPartition, st: Any, topic_id: uuid.UUID, role: str,
                                          hosted: Partition) -> None:
        self.state_change_logger.info(
            f"Skipped the become-{role} state change for {_tp(tp)} with topic id {_kafka_uuid(topic_id)} and "
            f"partition state {_describe(st)} since the {role} is already at a newer partition epoch "
            f"{hosted.state.partition_epoch}.")

    def _leadership_changed(self, leaders: list[TopicPartition], followers: list[TopicPartition]) -> None:
        """Tell the coordinators which partitions this broker now leads and which it stopped
        leading (Kafka's onLeadershipChange callback, run under the state change lock so they
        see the changes in order)."""
        if not leaders and not followers:
            return
        for listener in self.leadership_listeners:
            try:
                listener(leaders, followers)
            except Exception:
                self.state_change_logger.error(f"A leadership listener failed on leaders {leaders} and followers "
                                               f"{followers}")

    async def stop_replicas(self, correlation_id: int, request: Any, version: int) -> tuple[dict[TopicPartition, int], int]:
        """StopReplica (Kafka's stopReplicas): per partition NONE or why not, and the request's
        error (STALE_CONTROLLER_EPOCH from an older controller, nothing done). A hosted partition
        stops unless the request's leader epoch is older than its own (FENCED_LEADER_EPOCH);
        EPOCH_DURING_DELETE and NO_EPOCH always stop. With delete, the partition is no longer
        hosted and its log is deleted (an unhosted log on disk too: a topic deleted while the
        broker was down)."""
        async with self._state_change_lock:
            scl = self.state_change_logger
            controller_id, controller_epoch = request.controller_id, request.controller_epoch
            states = stop_replica_partition_states(request, version)
            scl.info(f"Handling StopReplica request correlationId {correlation_id} from controller {controller_id} "
                     f"for {len(states)} partitions")
            if controller_epoch < self.controller_epoch:
                scl.warn(f"Ignoring StopReplica request from controller {controller_id} with correlation id "
                         f"{correlation_id} since its controller epoch {controller_epoch} is old. Latest known "
                         f"controller epoch is {self.controller_epoch}")
                return {}, ErrorCode.STALE_CONTROLLER_EPOCH
            self.controller_epoch = controller_epoch
            responses: dict[TopicPartition, int] = {}
            stopped: list[tuple[TopicPartition, bool]] = []
            for tp, (delete, epoch) in states.items():
                hosted = self.partitions.get(tp)
                if tp in self.offline:
                    scl.warn(f"Ignoring StopReplica request (delete={_bool(delete)}) from controller {controller_id} "
                             f"with correlation id {correlation_id} epoch {controller_epoch} for partition {_tp(tp)} "
                             "as the local replica for the partition is in an offline log directory")
                    responses[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                elif hosted is None or epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or epoch >= hosted.leader_epoch:
                    stopped.append((tp, delete))
                    responses[tp] = ErrorCode.NONE
                else:
                    scl.warn(f"Ignoring StopReplica request (delete={_bool(delete)}) from controller {controller_id} "
                             f"with correlation id {correlation_id} epoch {controller_epoch} for partition {_tp(tp)} "
                             f"since its associated leader epoch {epoch} is smaller than the current leader epoch "
                             f"{hosted.leader_epoch}")
                    responses[tp] = ErrorCode.FENCED_LEADER_EPOCH
            doomed = []
            self.replica_fetcher_manager.remove_partitions([tp for tp, _ in stopped])
            for tp, delete in stopped:
                if delete:
                    self.partitions.pop(tp, None)
                    self.empty_partitions.discard(tp)
                    doomed.append(tp)
                # requests parked on a partition we may have led complete now (not after a timeout)
                self.produce_purgatory.check_and_complete(tp)
                self.fetch_purgatory.check_and_complete(tp)
            if doomed:
                failures = await asyncio.get_running_loop().run_in_executor(None, self._delete_logs, doomed)
                for tp, e in failures.items():
                    scl.error(f"Ignoring StopReplica request (delete=true) from controller {controller_id} with "
                              f"correlation id {correlation_id} epoch {controller_epoch} for partition {_tp(tp)} due "
                              f"to an unexpected {type(e).__name__} exception: {e}")
                    responses[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            self._leadership_changed([], [tp for tp in doomed if responses[tp] == ErrorCode.NONE])
            return responses, ErrorCode.NONE

    def _delete_logs(self, tps: list[TopicPartition]) -> dict[TopicPartition, Exception]:
        failures: dict[TopicPartition, Exception] = {}
        for tp in tps:
            try:
                self.log_manager.async_delete(*tp)
            except (OSError, StorageError) as e:
                failures[tp] = e
        return failures


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _opt(value: int | None) -> str:
    return "None" if value is None else f"Some({value})"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _describe(st: Any) -> str:
    """A LeaderAndIsrPartitionState as Kafka's toString prints it."""
    return (f"LeaderAndIsrPartitionState(topicName='{st.topic_name}', partitionIndex={st.partition_index}, "
            f"controllerEpoch={st.controller_epoch}, leader={st.leader}, leaderEpoch={st.leader_epoch}, "
            f"isr={_ids(st.isr)}, partitionEpoch={st.partition_epoch}, replicas={_ids(st.replicas)}, "
            f"addingReplicas={_ids(getattr(st, 'adding_replicas', []))}, "
            f"removingReplicas={_ids(getattr(st, 'removing_replicas', []))}, isNew={_bool(getattr(st, 'is_new', False))}, "
            f"leaderRecoveryState={getattr(st, 'leader_recovery_state', 0)})")



class ReplicaManager(_ZkReplicaState):
    """Creates, looks up and removes partitions; owns the produce/fetch purgatories."""

    def __init__(self, server: BrokerServer,
                 client_factory: Callable[[NetworkClientConfig], Any] = NetworkClient) -> None:
        """`client_factory` makes the connections to other brokers (the replica fetchers', the
        AlterPartition sender's): NetworkClient, or the simulated network of tests/sim."""
        self.server = server
        self.config = server.config
        self.broker_id = server.config.broker_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self.topic_defaults = server.config.topic_defaults()
        self.fetch_sessions = FetchSessionCache()
        self.topic_stats = BrokerTopicStats()  # messages/bytes in and out (broker/metrics)
        self.isr_shrinks = 0  # ISR changes the controller accepted (IsrShrinks/IsrExpandsPerSec)
        self.isr_expands = 0
        # partitions whose last append failed with a storage error (full disk): warned once each
        self._storage_failed: set[TopicPartition] = set()
        # partitions whose log could not be created or opened (a full or failing disk) -> why:
        # answered KAFKA_STORAGE_ERROR, as Kafka answers for a partition on an offline log dir,
        # and opened again by a job that the next request for one of them starts
        self.offline: dict[TopicPartition, str] = {}
        # the partitions of those whose log dir failed (handle_log_dir_failure): never opened
        # again until the broker restarts (Kafka's HostedPartition.Offline)
        self.offline_dir_partitions: set[TopicPartition] = set()
        self._reopening: set[str] = set()  # topics with such a job running
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory("Fetch")
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory("Produce")
        self._jobs_lock = asyncio.Lock()  # metadata jobs (log creation/deletion) run one at a time
        self._jobs: set[asyncio.Future[None]] = set()
        # ZooKeeper mode: the epoch of the controller that last changed our state, and the lock
        # the controller's requests take one at a time (Kafka's replicaStateChangeLock)
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH
        self._state_change_lock = asyncio.Lock()
        # partitions a LeaderAndIsr named but did not make leader or follower here (not a
        # replica, another topic id): Kafka keeps an empty Partition for them until StopReplica
        # deletes it, so clients get NOT_LEADER_OR_FOLLOWER with no known leader (-1, -1)
        self.empty_partitions: set[TopicPartition] = set()
        # told of leadership changes the controller's requests make (the group coordinator)
        self.leadership_listeners: list[Callable[[list[TopicPartition], list[TopicPartition]], None]] = []
        self.state_change_logger = StateChangeLogger(self.broker_id)
        # ZooKeeper mode: reads a topic's config overrides (/config/topics/<t>) for the logs
        # LeaderAndIsr creates (Kafka's ZkConfigRepository); set by the server
        self.topic_config_source: Callable[[str], Awaitable[dict[str, str]]] | None = None
        cfg = server.config
        # ZooKeeper mode: followers fetch from their leaders (a single node has none)
        self.replica_fetcher_manager = ReplicaFetcherManager(FetcherConfig(
            self.broker_id, max_wait_ms=cfg["replica.fetch.wait.max.ms"], min_bytes=cfg["replica.fetch.min.bytes"],
            max_bytes=cfg["replica.fetch.response.max.bytes"], partition_max_bytes=cfg["replica.fetch.max.bytes"],
            backoff_ms=cfg["replica.fetch.backoff.ms"], request_timeout_ms=cfg["request.timeout.ms"],
            num_fetchers=cfg["num.replica.fetchers"]),
            self, self._leader_address, client_factory)
        self.replica_lag_time_max_ms: int = cfg["replica.lag.time.max.ms"]
        # replication throttles (kafka-reassign-partitions --throttle): bounds from dynamic broker configs
        window = (cfg["replication.quota.window.num"], cfg["replication.quota.window.size.seconds"])
        self.leader_quota = ReplicationQuotaManager("leader", self.broker_id, *window)
        self.follower_quota = ReplicationQuotaManager("follower", self.broker_id, *window)
        self.alter_partition_manager = AlterPartitionManager(
            self.broker_id, lambda: server.broker_epoch, self._controller_address, cfg["request.timeout.ms"],
            client_factory)
        # KIP-392: which replica consumers are sent to fetch from (None: the leader, always)
        self.replica_selector = replica_selector(cfg["replica.selector.class"])
        # the replica each rack-aware consumer's partition was last served by (log lines on change)
        self.read_replicas = RecentValues()
        # KIP-890: asks transaction coordinators about transactional produces (set by the server)
        self.add_partitions_to_txn_manager: AddPartitionsToTxnManager | None = None

    def _controller_address(self) -> tuple[int, str, int] | None:
        cid = self.image.controller_id
        address = self._leader_address(cid) if cid >= 0 else None
        return None if address is None else (cid, *address)

    # -- the ISR (ZooKeeper mode): changed through the controller ----------------------------------

    def maybe_expand_isr(self, p: Partition, replica_id: int) -> None:
        """A follower outside the ISR that caught up joins it (Kafka's maybeExpandIsr)."""
        pending = p.prepare_isr_expand(replica_id)
        if pending is not None:
            self._submit_isr_change(p, pending)

    def maybe_shrink_isr(self, now_ms: int) -> None:
        """ISR members that have not caught up for replica.lag.time.max.ms leave it (Kafka's
        maybeShrinkIsr, run every half of that)."""
        for p in list(self.partitions.values()):
            proposal = p.prepare_isr_shrink(now_ms, self.replica_lag_time_max_ms)
            if proposal is None:
                continue
            pending, out = proposal
            lags = {r: p.log.log_end_offset - p.followers[r].log_end_offset if r in p.followers else None for r in out}
            log.info(f"[Partition {p.topic}-{p.index} broker={self.broker_id}] Shrinking ISR from "
                     f"{','.join(map(str, pending.committed_isr))} to {','.join(map(str, pending.isr))}",
                     out_of_sync=out, log_end_offset_lag=lags, high_watermark=p.high_watermark,
                     replica_lag_time_max_ms=self.replica_lag_time_max_ms)
            self._submit_isr_change(p, pending)

    def record_follower_fetch(self, replica_id: int, parts: dict[TopicPartition, Any], diverging_check: bool,
                              now_ms: int) -> dict[TopicPartition, tuple[int, int]]:
        """A follower's fetch of the partitions we lead (Kafka's Partition.fetchRecords, follower
        side), before any read: a fetch naming another leader epoch than ours records nothing
        (its read answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); one whose log diverged
        from ours records nothing either and gets (our epoch, its end offset) to truncate to;
        otherwise its fetch offset is its log end offset, which may move the high watermark
        (completing acks=all produces and consumer fetches waiting on it) and let it join the
        ISR. In a fetch session `parts` is every partition of the session, so a caught-up
        follower that names none of them stays caught up. `diverging_check`: Fetch v12+."""
        diverging: dict[TopicPartition, tuple[int, int]] = {}
        for key, preq in parts.items():
            p = self.partitions.get(key)
            if p is None:
                continue
            recorded, hw_moved, epoch_end = p.follower_fetch(
                replica_id, preq.fetch_offset, preq.current_leader_epoch, preq.last_fetched_epoch, diverging_check,
                now_ms, preq.log_start_offset)
            if epoch_end is not None:
                diverging[key] = epoch_end
            if hw_moved:
                self.produce_purgatory.check_and_complete(key)
                self.fetch_purgatory.check_and_complete(key)
            if recorded:
                self.maybe_expand_isr(p, replica_id)
        return diverging

    def find_preferred_read_replica(self, p: Partition, client: ClientMetadata, fetch_offset: int,
                                    now_ms: int) -> int | None:
        """The follower a consumer's fetch of `p` at `fetch_offset` should go to, or None: read
        here (Kafka's findPreferredReadReplica; broker.replica_selector says which replicas are
        offered). Only a leader with a selector configured answers one."""
        selector = self.replica_selector
        if selector is None or not p.is_leader:
            return None
        brokers = self.image.brokers
        racks = {r: b.rack for r in p.state.replicas
                 if (b := brokers.get(r)) is not None and b.endpoint(client.listener_name) is not None}
        return preferred_read_replica(selector, p.tp, client, self.broker_id, p.log.log_end_offset,
                                      p.read_replica_candidates(fetch_offset, now_ms), racks)

    def should_leader_throttle(self, p: Partition, replica_id: int) -> bool:
        """Kafka's ReplicationQuotaManager check on the leader (shouldLeaderThrottle): a follower
        outside the ISR gets no records of a throttled partition while the leader's throttled
        byte rate is over leader.replication.throttled.rate."""
        quota = self.leader_quota
        return (quota.bound != UNLIMITED and replica_id not in p.state.isr
                and quota.is_throttled(p.index, p.log.config.leader_replication_throttled_replicas)
                and quota.is_quota_exceeded())

    def _submit_isr_change(self, p: Partition, pending: PendingIsrChange) -> None:
        """Send ``p``'s pending ISR change to the controller (retried until answered or
        superseded) and apply the answer to the partition."""

        def superseded() -> bool:
            return p.pending_isr is not pending or self.partitions.get(p.tp) is not p

        async def alter() -> None:
            try:
                result = await self.alter_partition_manager.submit(
                    p.tp, pending.leader_epoch, pending.isr, pending.partition_epoch, superseded,
                    alter_partition_retriable)
            except Exception:  # a bug: the controller may have applied it, so it stays pending (safe)
                log.exception("sending an ISR change failed: the partition keeps it pending until the "
                              "controller's next LeaderAndIsr", topic=p.topic, partition=p.index, proposed=pending.isr)
                return
            if result is None or self.partitions.get(p.tp) is not p:
                return
            was_pending = p.pending_isr is pending
            moved = p.complete_isr_change(pending, result)
            if was_pending and not isinstance(result, int) and p.pending_isr is None:  # applied
                if pending.expand:
                    self.isr_expands += 1
                else:
                    self.isr_shrinks += 1
            if moved:
                self.produce_purgatory.check_and_complete(p.tp)
                self.fetch_purgatory.check_and_complete(p.tp)

        self.server._spawn(alter())

    # -- log dir failures (Kafka's LogDirFailureHandler and ReplicaManager.handleLogDirFailure) ----

    async def _handle_log_dir_failures(self) -> None:
        """Take each dir the LogDirFailureChannel reports, in order, and stop serving it."""
        channel = self.log_manager.log_dir_failure_channel
        while True:
            d = await channel.take_next_offline_log_dir()
            try:
                await self.handle_log_dir_failure(d)
            except Exception:  # a bug: the dir's partitions may still be served, say so
                log.exception("handling the failure of a log dir failed", log_dir=d)

    async def handle_log_dir_failure(self, log_dir: str) -> None:
        """A log dir failed: its partitions stop at once (no retry loop on a broken disk): the
        fetchers stop following them, they are no longer hosted -- every request for them,
        the controller's LeaderAndIsr included, is answered KAFKA_STORAGE_ERROR until the broker
        restarts -- the requests parked on them complete, the coordinators let them go, and
        their logs close without writing. Then the controller is told (ZooKeeper mode: a
        /log_dir_event_notification znode): it sends LeaderAndIsr for this broker's replicas,
        and the KAFKA_STORAGE_ERROR answers make it elect other leaders and shrink the ISRs
        now, not after replica.lag.time.max.ms. The LogManager halts the broker when this was
        its last log dir. Kafka's ReplicaManager.handleLogDirFailure. The partitions are dropped
        without waiting for their serialisation points: nothing of theirs is written again (their
        logs refuse every write once the dir is offline), so work in flight on them only fails."""
        d = Path(log_dir)
        loop = asyncio.get_running_loop()
        log.warning(f"Stopping serving replicas in dir {d} because the log directory has failed.")
        async with self._state_change_lock:
            failed = [tp for tp, p in self.partitions.items() if p.log.dir.parent.absolute() == d]
            self.replica_fetcher_manager.remove_partitions(failed)
            reason = f"the log dir {d} is offline"
            was_leader = [tp for tp in failed if self.partitions[tp].is_leader]
            for tp in failed:
                self.partitions.pop(tp)
                self.offline[tp] = reason
                self.offline_dir_partitions.add(tp)
                self.produce_purgatory.check_and_complete(tp)
                self.fetch_purgatory.check_and_complete(tp)
            self._leadership_changed([], was_leader)
            log.warning(f"Broker {self.broker_id} stopped fetcher for partitions "
                        f"{','.join(_tp(tp) for tp in failed)} because they are in the failed log directory {d}.")
            # logs loaded but not hosted yet (their LeaderAndIsr to come) are offline too
            unhosted = await loop.run_in_executor(None, self.log_manager.handle_log_dir_failure, d)
            for tp in unhosted:
                if tp not in self.partitions:
                    self.offline[tp] = reason
                    self.offline_dir_partitions.add(tp)
        if not self.server.zk_mode and d == self.config.log_dirs[0].absolute():
            # the single node's metadata store lives there (Kafka halts on its metadata log dir)
            self.log_manager.halt(f"Shutdown broker because the metadata log dir {d} has failed")
        if self.server.zk_mode and self.server.zk_registration is not None:
            try:
                path = await self.server.zk_registration.kafka_zk.propagate_log_dir_event(self.broker_id)
                log.info("told the controller of the failed log dir", log_dir=str(d), znode=path)
            except Exception as e:  # ZooKeeper unreachable: the partitions stay offline here
                log.error("could not tell the controller of the failed log dir: its leaderships move when "
                          "replica.lag.time.max.ms drops this broker from the ISRs", log_dir=str(d), error=str(e))
        log.warning(f"Stopped serving replicas in dir {d}")

    async def _check_isr_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.replica_lag_time_max_ms / 2000)
            try:
                self.maybe_shrink_isr(int(time.time() * 1000))
            except Exception:
                log.exception("ISR expiration check failed")

    def _leader_address(self, broker_id: int) -> tuple[str, int] | None:
        """The leader's endpoint on the inter-broker listener, from the metadata cache."""
        b = self.image.brokers.get(broker_id)
        return None if b is None else b.endpoint(self.server.inter_broker_listener_name)

    @property
    def log_manager(self) -> Any:
        return self.server.log_manager

    @property
    def image(self) -> MetadataCache:
        """The broker's MetadataCache (what the ReplicaManager hosts follows it)."""
        return self.server.metadata_cache

    async def startup(self) -> None:
        self.fetch_purgatory.start()
        self.produce_purgatory.start()
        if self.server.zk_mode:  # Kafka's isr-expiration task
            self.server._spawn(self._check_isr_periodically())
        self.server._spawn(self._handle_log_dir_failures())
        for topic in list(self.image.topics.values()):
            self._host_topic(topic)

    async def shutdown(self) -> None:
        await self.replica_fetcher_manager.shutdown()
        await self.alter_partition_manager.close()
        if self._jobs:  # logs being created or deleted: let the executor work finish
            await asyncio.gather(*self._jobs, return_exceptions=True)
        await self.fetch_purgatory.shutdown()
        await self.produce_purgatory.shutdown()
        self.partitions.clear()

    # -- metadata changes ---------------------------------------------------------------------

    def log_config_for(self, topic: TopicState) -> LogConfig:
        defaults = LogConfig.from_props(self.topic_defaults)
        return LogConfig.from_props(topic.configs, defaults)

    def _update_hosted(self, topic: TopicState) -> tuple[LogConfig, list[PartitionState]]:
        """Apply ``topic``'s state and config to the partitions hosted already; returns the
        config and the states of the partitions whose logs must still be opened."""
        config = self.log_config_for(topic)
        missing = []
        for state in topic.partitions.values():
            if self.broker_id not in state.replicas or (topic.name, state.partition) in self.offline_dir_partitions:
                continue
            existing = self.partitions.get((topic.name, state.partition))
            if existing is not None:
                existing.set_state(state)
                existing.log.update_config(config)
            else:
                missing.append(state)
        return config, missing

    def _open_logs(
        self, topic: TopicState, config: LogConfig, states: list[PartitionState]
    ) -> list[Log | Exception]:
        """Open or create the logs of ``states`` (blocking: directories, partition.metadata,
        segments, preallocated indexes; an executor runs it once the broker serves). A log that
        cannot be (a full disk, EMFILE) is its error in the list: the others are still hosted."""
        opened: list[Log | Exception] = []
        for s in states:
            try:
                opened.append(self.log_manager.get_or_create_log(topic.name, s.partition, config, topic.topic_id))
            except (OSError, StorageError) as e:
                opened.append(e)
        return opened

    def _add_partitions(self, topic: TopicState, states: list[PartitionState], logs: list[Log | Exception]) -> None:
        for state, log_ in zip(states, logs, strict=True):
            tp = (topic.name, state.partition)
            if isinstance(log_, Exception):
                if tp not in self.offline:  # once per partition, not per retry
                    log.warning("could not create or open the log: answering KAFKA_STORAGE_ERROR for "
                                "the partition until it opens", topic=tp[0], partition=tp[1], error=str(log_))
                self.offline[tp] = str(log_)
                continue
            if self.offline.pop(tp, None) is not None:
                log.info("log opened after a storage error", topic=tp[0], partition=tp[1])
            partition = self.partitions[tp] = Partition(topic, state, log_, self.broker_id)
            partition.on_high_watermark_moved = self._high_watermark_moved
            partition.maybe_increment_high_watermark()  # a leader whose ISR is itself

    def _reopen(self, topic: str) -> None:
        """Start a job that opens the offline partitions of ``topic`` again (one at a time per
        topic): a request for one of them is answered KAFKA_STORAGE_ERROR meanwhile, and its
        retry finds the partition hosted once the disk has room."""
        state = self.image.topics.get(topic)
        if state is None or topic in self._reopening:
            return
        self._reopening.add(topic)

        def done(job: asyncio.Future[None]) -> None:
            self._reopening.discard(topic)
            if not job.cancelled() and job.exception() is not None:
                log.error("reopening offline partitions failed", topic=topic, exc_info=job.exception())

        self.on_metadata_change("changed", state).add_done_callback(done)

    def _host_topic(self, topic: TopicState) -> None:
        """Start-up (before serving): host ``topic``'s partitions inline."""
        config, missing = self._update_hosted(topic)
        self._add_partitions(topic, missing, self._open_logs(topic, config, missing))

    def on_metadata_change(self, event: str, topic: TopicState) -> asyncio.Future[None]:
        """Controller listener. The file work -- creating logs, or closing and removing a deleted
        topic's -- runs in an executor, never on the loop; the returned future completes when it
        is done (the controller's ``committed()`` awaits it before a handler answers). Jobs run one
        at a time in event order, so a topic deleted and re-created at once is deleted first."""
        if event == "deleted":  # no more appends or fetches from now on
            for tp in [tp for tp in self.partitions if tp[0] == topic.name]:
                self.partitions.pop(tp)
            for tp in [tp for tp in self.offline if tp[0] == topic.name]:
                self.offline.pop(tp)
                self.offline_dir_partitions.discard(tp)  # a new topic of that name may use the live dirs
        job = asyncio.ensure_future(self._metadata_job(event, topic))
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)
        return job

    async def _metadata_job(self, event: str, topic: TopicState) -> None:
        loop = asyncio.get_running_loop()
        async with self._jobs_lock:
            if event == "deleted":
                for tp in [tp for tp in self.partitions if tp[0] == topic.name]:
                    self.partitions.pop(tp)  # hosted by a job queued before the deletion
                doomed = [tp for tp, _ in self.log_manager if tp[0] == topic.name]
                for tp in doomed:
                    await loop.run_in_executor(None, self.log_manager.async_delete, tp[0], tp[1])
                return
            if self.image.topics.get(topic.name) is not topic:
                return  # deleted (or replaced) since: its deletion job follows
            config, missing = self._update_hosted(topic)
            if missing:
                logs = await loop.run_in_executor(None, self._open_logs, topic, config, missing)
                self._add_partitions(topic, missing, logs)

    # -- lookups --------------------------------------------------------------------------------

    def get_partition(self, topic: str, partition: int) -> Partition:
        """The partition this broker hosts, or the Kafka error a client should see."""
        p = self.partitions.get((topic, partition))
        if p is None:
            error = self.offline.get((topic, partition)) if self.offline else None
            if error is not None:
                if (topic, partition) in self.offline_dir_partitions:
                    raise KafkaProtocolError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition}: {error}")
                if not self.server.zk_mode:  # in a cluster the controller re-sends LeaderAndIsr
                    self._reopen(topic)
                raise KafkaProtocolError(
                    ErrorCode.KAFKA_STORAGE_ERROR, f"The log of {topic}-{partition} could not be opened: {error}"
                )
            if self.empty_partitions and (topic, partition) in self.empty_partitions:
                raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # Kafka's Partition without a log
            if self.server.zk_mode and self.image.partition(topic, partition) is not None:
                # Kafka's getPartitionOrError: the partition exists but is not hosted here, so the
                # client must refresh its metadata to find it
                raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return p

    def get_leader_partition(self, topic: str, partition: int) -> Partition:
        p = self.get_partition(topic, partition)
        if not p.is_leader:
            raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return p

    # -- produce ----------------------------------------------------------------------------------

    async def append_records(
        self,
        entries: list[tuple[TopicPartition, Any]],
        required_acks: int,
        internal_topics_allowed: bool = False,
        timeout_ms: int = 30000,
        order: asyncio.Lock | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transactional_id: str | None = None,
        produce_version: int = 11,
        verification_guard: VerificationGuard | None = None,
    ) -> dict[TopicPartition, ProduceResult]:
        """Append each partition's batches as leader (errors are per partition), validated for
        `origin` (Kafka's AppendOrigin: CLIENT for Produce, COORDINATOR for the coordinators'
        writes and transaction markers, as Kafka's appendRecords passes it to
        UnifiedLog.appendAsLeader). An internal topic (`__consumer_offsets`, `__transaction_state`) takes appends
        only when `internal_topics_allowed` (the coordinators, markers; a Produce from Kafka's admin
        client id), else INVALID_TOPIC_EXCEPTION without a message, as Kafka's
        appendToLocalLog answers (its LogAppendResult has no custom message there). When a log's
        flush.messages / flush.ms make a flush due, it is fsynced (in an executor) before the
        write is acknowledged, as Kafka flushes in the append path. `order` (the connection's)
        is held while appending, not while waiting for acks: the appends of one client's
        requests happen in its order even when one of them waits for a segment roll.
        A client's Produce with a `transactional_id` is verified first when
        transaction.partition.verification.enable is on (broker/transaction_verification.py,
        KIP-890), under `order` too: as Kafka mutes the connection meanwhile, the connection's
        next produce waits for it. A coordinator's write passes the `verification_guard` its
        own verification gave (TxnOffsetCommit's; None: not verified)."""
        now_ms = int(time.time() * 1000)
        results: dict[TopicPartition, ProduceResult] = {}
        due: list[tuple[Any, int]] = []
        required: dict[TopicPartition, int] = {}
        async with order if order is not None else contextlib.nullcontext():
            guards: dict[TopicPartition, VerificationGuard] | None = None
            if verification_guard is not None:
                guards = dict.fromkeys((tp for tp, _ in entries), verification_guard)
            elif origin is AppendOrigin.CLIENT and self.config["transaction.partition.verification.enable"]:
                guards = {}
                if transactional_id is not None and self.add_partitions_to_txn_manager is not None:
                    failures, guards = await verify_transactional_produce(
                        entries, transactional_id, produce_version, self.get_partition,
                        self.add_partitions_to_txn_manager)
                    for tp, failure in failures.items():
                        results[tp] = ProduceResult(error=failure.error, message=failure.message)
                    now_ms = int(time.time() * 1000)
            for tp, records in entries:
                if tp in results:
                    continue  # refused by the verification
                if not internal_topics_allowed and tp[0] in INTERNAL_TOPICS:
                    results[tp] = ProduceResult(error=ErrorCode.INVALID_TOPIC_EXCEPTION)
                    continue
                p = None
                try:
                    if records is None:
                        raise KafkaProtocolError(ErrorCode.CORRUPT_MESSAGE, "null records")
                    p = self.get_leader_partition(*tp)
                    info = await p.append_records(records, required_acks, now_ms, origin,
                                                  None if guards is None else guards.get(tp, SENTINEL))
                    self.topic_stats.record_append(tp[0], info.record_count, info.valid_bytes)
                    results[tp] = ProduceResult(
                        base_offset=info.first_offset,
                        log_append_time=info.log_append_time,
                        log_start_offset=p.log.log_start_offset,
                    )
                    required[tp] = info.last_offset + 1
                    if self._storage_failed and tp in self._storage_failed:
                        self._storage_failed.discard(tp)
                        log.info("appends succeed again after storage errors", topic=tp[0], partition=tp[1])
                    self.fetch_purgatory.check_and_complete(tp)
                    flush_at = p.log.flush_due(now_ms)
                    if flush_at is not None:
                        due.append((tp, p.log, flush_at))
                except KafkaProtocolError as e:
                    # Kafka's appendToLocalLog: a failed append to a hosted partition reports its log
                    # start offset, except for the errors answered with UNKNOWN_LOG_APPEND_INFO
                    lso = -1 if p is None or e.code in _NO_LOG_START_OFFSET else p.log.log_start_offset
                    results[tp] = ProduceResult(error=e.code, log_start_offset=lso, message=e.message,
                                                record_errors=getattr(e, "record_errors", None))
                    if (e.code == ErrorCode.KAFKA_STORAGE_ERROR and tp not in self._storage_failed
                            and tp not in self.offline_dir_partitions and not isinstance(e, KafkaStorageError)):
                        # once per partition, not per request: a full disk fails every produce
                        self._storage_failed.add(tp)
                        log.warning("storage error on append: answering KAFKA_STORAGE_ERROR until an append "
                                    "succeeds (not logged again)", topic=tp[0], partition=tp[1], error=e.message)
        if due:
            loop = asyncio.get_running_loop()
            flushed = await asyncio.gather(*(loop.run_in_executor(None, lg.flush, off) for _, lg, off in due),
                                           return_exceptions=True)
            for (tp, _, _), outcome in zip(due, flushed, strict=True):
                if isinstance(outcome, StorageError):  # its dir went offline: not acknowledged
                    results[tp] = ProduceResult(error=outcome.code, message=outcome.message)
                    required.pop(tp, None)
                elif isinstance(outcome, BaseException):
                    raise outcome
        if required_acks == -1 and required:
            op = DelayedProduce(timeout_ms, results, required, self._leader_high_watermark, self._enough_isr)
            self.produce_purgatory.try_complete_else_watch(op, list(required))
            return await op.future
        return results

    async def cleanup_logs(self) -> int:
        """Retention for every log (Kafka's LogManager.cleanupLogs, every
        log.retention.check.interval.ms): a hosted partition's under its serialisation point
        (Partition.run_exclusive: its appends queue behind the renames instead of the event loop
        waiting on the log's lock, issue #20). A log not hosted (yet: loaded at start-up, its
        LeaderAndIsr to come) waits for the next run: hosted while its retention ran outside the
        partition's serialisation, its first appends would wait on that lock (tests/sim seed
        201). Returns the segments deleted."""
        now_ms = int(time.time() * 1000)
        deleted = 0
        for tp, lg in self.log_manager:
            p = self.partitions.get(tp)
            if p is not None and p.log is lg:
                try:
                    deleted += await p.run_exclusive(self.log_manager.cleanup_log, lg, now_ms)
                except KafkaStorageError:  # its dir went offline (reported once): the others go on
                    continue
        return deleted

    def _high_watermark_moved(self, tp: TopicPartition) -> None:
        """A partition's high watermark moved after executor work on its log ended (it waited):
        the acks=all produces and the fetches waiting on it may complete."""
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def _enough_isr(self, tp: TopicPartition) -> bool:
        p = self.partitions.get(tp)
        return p is None or len(p.maximal_isr) >= p.log.config.min_insync_replicas

    def _leader_high_watermark(self, tp: TopicPartition) -> int | None:
        p = self.partitions.get(tp)
        return p.high_watermark if p is not None and p.is_leader else None

    # -- fetch ------------------------------------------------------------------------------------

    async def delayed_fetch(self, keys: list[TopicPartition], max_wait_ms: int, min_bytes: int, first: Any,
                            read_one: Any, read_all: Any) -> Any:
        """Park a fetch (whose read `first` had less than min_bytes) until appends to `keys`
        make min_bytes available, or max_wait_ms passes (broker.delayed_fetch); returns the
        completing read."""
        op = DelayedFetch(max_wait_ms, min_bytes, first, read_one, read_all)
        self.fetch_purgatory.try_complete_else_watch(op, keys)
        return await op.future
