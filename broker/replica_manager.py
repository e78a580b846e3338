"""ReplicaManager and Partition: the broker's view of the partitions it hosts.

Why here and not in storage: a `Log` knows bytes and offsets; a `Partition` knows whether this
broker leads it, its leader epoch, ISR and high watermark, and when a write is acknowledged
enough (acks, min.insync.replicas). The ReplicaManager creates and deletes partitions when the
metadata image changes (on one node: when the embedded controller creates or deletes a topic; in a
cluster: on LeaderAndIsr), and routes produce/fetch to them. Waiting (acks=all, fetch min bytes)
goes through purgatories keyed by partition, completed by `check_and_complete` after appends.

All state here is owned by the event loop: mutated only by plain functions on the loop thread
(STYLE #9). Blocking file work (fsync, log open/delete) runs in the default executor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from broker.delayed_fetch import DelayedFetch
from broker.delayed_produce import DelayedProduce
from broker.fetch_session import FetchSessionCache
from broker.metadata_cache import MetadataCache
from broker.purgatory import DelayedOperationPurgatory
from controller.image import PartitionState, TopicState
from protocol.errors import ErrorCode, KafkaProtocolError
from storage.config import LogConfig
from storage.errors import StorageError

if TYPE_CHECKING:
    from broker.server import BrokerServer
    from storage.log import Log

log = structlog.get_logger("odradek.replica")

TopicPartition = tuple[str, int]
_T = TypeVar("_T")


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


class Partition:
    """One hosted partition. On a single node the ISR is {this broker} and the high watermark
    follows the log end offset after every append."""

    def __init__(self, topic: TopicState, state: PartitionState, log_: Log, broker_id: int) -> None:
        self.topic = topic.name
        self.topic_id = topic.topic_id
        self.index = state.partition
        self.state = state
        self.log = log_
        self.broker_id = broker_id
        # Appends that wait for a roll running in an executor, and those queued behind them:
        # while any wait, every append to this partition takes the lock, in arrival order.
        self._append_lock = asyncio.Lock()
        self._appends_waiting = 0

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def append_records_to_leader(self, buf: Any, required_acks: int, now_ms: int) -> Any:
        if not self.is_leader:
            raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.state.isr) < min_isr:
            raise KafkaProtocolError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {set(self.state.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic}-{self.index}",
            )
        info = self.log.append_as_leader(buf, self.leader_epoch, now_ms)
        self.maybe_increment_high_watermark()
        return info

    async def append_records(self, buf: Any, required_acks: int, now_ms: int) -> Any:
        """Append as leader; when the append would roll the segment (Log.roll_due), roll first
        in an executor so the event loop never does the roll's file work. Appends to one
        partition keep their arrival order: the first that must wait takes a FIFO lock, and
        every later append queues behind it until no append waits any more. The common case
        (no roll due, nobody waiting) appends without an await."""
        if not self._appends_waiting and not self.log.roll_due(buf, now_ms):
            return self.append_records_to_leader(buf, required_acks, now_ms)
        self._appends_waiting += 1
        try:
            async with self._append_lock:
                if self.is_leader and self.log.roll_due(buf, now_ms):
                    await asyncio.get_running_loop().run_in_executor(None, self.log.roll)
                return self.append_records_to_leader(buf, required_acks, now_ms)
        finally:
            self._appends_waiting -= 1

    async def run_exclusive(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run blocking log work ``fn(*args)`` (it takes the log's lock and writes files) in an
        executor, with appends to this partition queued behind it (in order) rather than the
        event loop blocking on the log's lock meanwhile. DeleteRecords uses it."""
        self._appends_waiting += 1
        try:
            async with self._append_lock:
                return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        finally:
            self._appends_waiting -= 1

    async def truncate_to(self, offset: int) -> bool:
        """Truncate the log to ``offset`` (a follower diverging from its leader). Truncation cuts
        and renames files and writes leader-epoch-checkpoint synchronously (storage.log), so it
        runs in an executor, with appends to the partition queued behind it."""
        return await self.run_exclusive(self.log.truncate_to, offset)

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset`` (a follower behind its leader's log start),
        in an executor as :meth:`truncate_to`."""
        await self.run_exclusive(self.log.truncate_fully_and_start_at, offset)

    def maybe_increment_high_watermark(self) -> bool:
        """Single node: every ISR member (only us) has everything up to the LEO."""
        if self.state.isr == [self.broker_id]:
            leo = self.log.log_end_offset
            if leo > self.log.high_watermark:
                self.log.update_high_watermark(leo)
                return True
        return False


class ReplicaManager:
    """Creates, looks up and removes partitions; owns the produce/fetch purgatories."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.config = server.config
        self.broker_id = server.config.broker_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self.topic_defaults = server.config.topic_defaults()
        self.fetch_sessions = FetchSessionCache()
        # partitions whose last append failed with a storage error (full disk): warned once each
        self._storage_failed: set[TopicPartition] = set()
        # partitions whose log could not be created or opened (a full or failing disk) -> why:
        # answered KAFKA_STORAGE_ERROR, as Kafka answers for a partition on an offline log dir,
        # and opened again by a job that the next request for one of them starts
        self.offline: dict[TopicPartition, str] = {}
        self._reopening: set[str] = set()  # topics with such a job running
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory("Fetch")
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory("Produce")
        self._jobs_lock = asyncio.Lock()  # metadata jobs (log creation/deletion) run one at a time
        self._jobs: set[asyncio.Future[None]] = set()

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
        for topic in list(self.image.topics.values()):
            self._host_topic(topic)

    async def shutdown(self) -> None:
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
            if self.broker_id not in state.replicas:
                continue
            existing = self.partitions.get((topic.name, state.partition))
            if existing is not None:
                existing.state = state
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
                self._reopen(topic)
                raise KafkaProtocolError(
                    ErrorCode.KAFKA_STORAGE_ERROR, f"The log of {topic}-{partition} could not be opened: {error}"
                )
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
        internal: bool = False,
        timeout_ms: int = 30000,
    ) -> dict[TopicPartition, ProduceResult]:
        """Append each partition's batches as leader (errors are per partition). When a log's
        flush.messages / flush.ms make a flush due, it is fsynced (in an executor) before the
        write is acknowledged, as Kafka flushes in the append path."""
        now_ms = int(time.time() * 1000)
        results: dict[TopicPartition, ProduceResult] = {}
        due: list[tuple[Any, int]] = []
        required: dict[TopicPartition, int] = {}
        for tp, records in entries:
            p = None
            try:
                if tp[0].startswith("__") and not internal and tp[0] in ("__consumer_offsets", "__transaction_state"):
                    raise KafkaProtocolError(
                        ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {tp[0]}"
                    )
                if records is None:
                    raise KafkaProtocolError(ErrorCode.CORRUPT_MESSAGE, "null records")
                p = self.get_leader_partition(*tp)
                info = await p.append_records(records, required_acks, now_ms)
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
                    due.append((p.log, flush_at))
            except KafkaProtocolError as e:
                # Kafka's appendToLocalLog: a failed append to a hosted partition reports its log
                # start offset, except for the errors answered with UNKNOWN_LOG_APPEND_INFO
                lso = -1 if p is None or e.code in _NO_LOG_START_OFFSET else p.log.log_start_offset
                results[tp] = ProduceResult(error=e.code, log_start_offset=lso, message=e.message,
                                            record_errors=getattr(e, "record_errors", None))
                if e.code == ErrorCode.KAFKA_STORAGE_ERROR and tp not in self._storage_failed:
                    # once per partition, not per request: a full disk fails every produce
                    self._storage_failed.add(tp)
                    log.warning("storage error on append: answering KAFKA_STORAGE_ERROR until an append "
                                "succeeds (not logged again)", topic=tp[0], partition=tp[1], error=e.message)
        if due:
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(None, lg.flush, off) for lg, off in due))
        if required_acks == -1 and required:
            op = DelayedProduce(timeout_ms, results, required, self._leader_high_watermark)
            self.produce_purgatory.try_complete_else_watch(op, list(required))
            return await op.future
        return results

    def _leader_high_watermark(self, tp: TopicPartition) -> int | None:
        p = self.partitions.get(tp)
        return p.high_watermark if p is not None and p.is_leader else None

    # -- fetch ------------------------------------------------------------------------------------

    async def delayed_fetch(
        self, keys: list[TopicPartition], max_wait_ms: int, reader: Any, enough: Any
    ) -> Any:
        """Park a fetch until an append to one of `keys` makes `enough(reader())` true, or
        max_wait_ms passes; returns the completing read."""
        op = DelayedFetch(max_wait_ms, reader, enough)
        self.fetch_purgatory.try_complete_else_watch(op, keys)
        return await op.future

