"""CoordinatorRuntime: the part of a coordinator that is not about groups or transactions (Kafka
3.9's CoordinatorRuntime / CoordinatorShard / CoordinatorLoader, and the generic half of its
ZooKeeper-mode GroupMetadataManager). One runtime per internal topic (`__consumer_offsets` now,
`__transaction_state` next); the coordinator using it supplies a shard per partition.

What it owns:

* The internal topic: created on first use with its coordinator's settings (`InternalTopic`: the
  offsets.topic.* keys for groups, transaction.state.log.* for transactions), and which
  partition a key belongs to (`partition_for`, Kafka's `abs(hashCode) % partitions`).
* Ownership of that topic's partitions, one `CoordinatorContext` each, with the leader epoch it
  was taken at. ZooKeeper mode: a partition becomes this broker's by election (LeaderAndIsr made
  it leader: `on_election`) and stops being so by resignation (it became a follower, was deleted
  or its log dir failed: `on_resignation`). An election starts a load -- the partition's records
  read in an executor (loader.py), then replayed into a new shard on the loop in one step -- and
  the partition answers COORDINATOR_LOAD_IN_PROGRESS meanwhile. A load is fenced: when a
  resignation, or a resignation and a new election, came while it read, its context is no longer
  the partition's and the load is dropped without replaying anything (the newer election loads
  for itself). An election or resignation at an epoch not newer than the context's is ignored,
  as Kafka's scheduleLoadOperation / scheduleUnloadOperation do. A single node has no elections:
  the partitions it leads at start-up are loaded before clients connect (`load_led_partitions`)
  and one it comes to lead later (the topic created on first use) is empty, so it is active at
  once.
* Writes: `append` writes a shard's records to its partition with acks=all and the COORDINATOR
  append origin (ReplicaManager lets no client append to an internal topic), and answers the
  coordinator's error for the log's: NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT and
  UNKNOWN_TOPIC_OR_PARTITION are COORDINATOR_NOT_AVAILABLE (retriable: the client looks the
  coordinator up again), NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR are NOT_COORDINATOR,
  anything else (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE ...) is
  UNKNOWN_SERVER_ERROR, as Kafka's CoordinatorRuntime (and TransactionStateManager) map them;
  the ZooKeeper-mode group coordinator answers from the log's error itself, as Kafka's old
  GroupMetadataManager does (broker/group/write_errors.py). A write to a partition that is
  loading, or that resigned while the write waited for its acks, is NOT_COORDINATOR: the state it
  was computed from is not this broker's any more (Kafka fails such writes on unload). `write`
  is the same with the batch's offset and the log's error in its answer, and can write a
  transactional batch for a producer (TxnOffsetCommit); such records are loaded by
  `loader.read_records` into a `TransactionalCoordinatorShard`, with the markers that end them.
* Timers (Kafka's CoordinatorTimer): `schedule(partition, key, delay_ms, fn)` runs `fn` on the
  event loop after `delay_ms`, on the runtime's timing wheel (SystemTimer), for an active
  partition; scheduling a key again replaces its timer, `cancel` drops it, and a partition's
  timers are cancelled when it resigns, so a timer never acts on state that is not this
  broker's (a shard's timeouts, e.g. transaction timeouts).

Threading: none. Everything runs on the event loop; the only awaits are the load's read (in an
executor) and the write's acks, after each of which the context is checked again.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import structlog

from broker.coordinator.loader import KeyValue, LoadedMarker, LoadedRecord, read_key_values
from broker.coordinator.partitioner import partition_for
from broker.timer import CallbackTimerTask, SystemTimer, TimerTask
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, Record, build_batch
from storage.producer_state import AppendOrigin
from storage.verification_guard import VerificationGuard

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ProduceResult, ReplicaManager
    from controller.interface import Controller

log = structlog.get_logger("odradek.coordinator")

TopicPartition = tuple[str, int]

# the log's error -> the coordinator's (Kafka's CoordinatorRuntime / GroupMetadataManager)
_COORDINATOR_NOT_AVAILABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
})
_NOT_COORDINATOR = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})


def coordinator_error(log_error: int) -> int:
    """The error a coordinator answers for a failed write to its partition."""
    if log_error == ErrorCode.NONE:
        return ErrorCode.NONE
    if log_error in _COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if log_error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


class CoordinatorShard(Protocol):
    """One partition's coordinator state (Kafka's CoordinatorShard): rebuilt from the partition's
    records on election, dropped on resignation."""

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of the partition (a None value is a tombstone), in offset order."""

    def on_loaded(self) -> None:
        """Every record is replayed and the partition is this broker's: start timers."""

    def on_unloaded(self) -> None:
        """The partition is not this broker's any more: answer what waits, forget the state."""


class TransactionalCoordinatorShard(CoordinatorShard, Protocol):
    """A shard whose partition holds transactional records (the group coordinator's
    TxnOffsetCommit offsets): its loader (loader.read_records) hands it every record with its
    batch's offset and producer, and the transaction markers, in offset order."""

    def replay_record(self, record: LoadedRecord) -> None:
        """Apply one data record (transactional ones stay pending until their marker)."""

    def replay_end_transaction_marker(self, marker: LoadedMarker) -> None:
        """Apply a COMMIT/ABORT marker to the producer's pending records."""


S = TypeVar("S", bound=CoordinatorShard)


def _replay(shard: Any, entry: Any) -> None:
    """One loaded entry into the shard: a (key, value) of read_key_values, or a LoadedRecord /
    LoadedMarker of read_records for a TransactionalCoordinatorShard."""
    if isinstance(entry, LoadedRecord):
        shard.replay_record(entry)
    elif isinstance(entry, LoadedMarker):
        shard.replay_end_transaction_marker(entry)
    else:
        key, value = entry
        shard.replay(key, value)


@dataclass(frozen=True, slots=True)
class WriteResult:
    """A coordinator write's outcome: `error` is the coordinator's error (the module docstring's
    mapping, NOT_COORDINATOR when the partition was lost meanwhile), `log_error` the log's own
    (for a coordinator that maps errors its own way, as Kafka's storeOffsets does for
    TxnOffsetCommit), `base_offset` the batch's offset in the log (-1 unless written)."""

    error: int
    log_error: int
    base_offset: int = -1


class CoordinatorState(enum.Enum):
    LOADING = "Loading"
    ACTIVE = "Active"


@dataclass(eq=False)
class CoordinatorContext(Generic[S]):
    """One owned partition (Kafka's CoordinatorContext). Compared by identity: a load or a write
    that waited applies only if its context is still the partition's."""

    partition: int
    epoch: int  # the leader epoch the partition was taken (or last re-elected) at
    state: CoordinatorState
    shard: S | None = None
    timers: dict[str, TimerTask] = field(default_factory=dict)  # by key, while active


@dataclass(frozen=True)
class InternalTopic:
    """A coordinator topic as its coordinator creates it (Kafka: offsets.topic.num.partitions /
    replication.factor and GroupCoordinator.offsetsTopicConfigs for `__consumer_offsets`)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


class CoordinatorRuntime(Generic[S]):
    def __init__(
        self,
        topic: InternalTopic,
        shard_builder: Callable[[int], S],
        *,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        controller: Controller | None,
        spawn: Callable[[Any], asyncio.Task[Any]],
        elections: bool,
        what: str,
        loader: Callable[[Any], list[Any]] = read_key_values,
        write_timeout_ms: int = 30000,
    ) -> None:
        """`elections`: ownership comes from on_election / on_resignation (ZooKeeper mode); else a
        partition led here is owned (a single node). `controller` creates the topic (None: it
        cannot be created here). `spawn` runs the loads as background tasks (BackgroundTasks).
        `loader` reads a partition for replay: read_key_values, or read_records for a
        TransactionalCoordinatorShard.
        `what` names the state in log lines ("offsets and group metadata")."""
        self.topic = topic
        self._shard_builder = shard_builder
        self._replica_manager = replica_manager
        self._metadata_cache = metadata_cache
        self._controller = controller
        self._spawn = spawn
        self._elections = elections
        self._what = what
        self._loader = loader
        self._write_timeout_ms = write_timeout_ms
        self._contexts: dict[int, CoordinatorContext[S]] = {}
        self._topic_requested = False  # asked the controller to create the topic, not seen yet
        self._timer = SystemTimer(f"{topic.name}-coordinator")

    def start(self) -> None:
        """Start the timers' reaper (needs the running loop)."""
        self._timer.start()

    async def shutdown(self) -> None:
        """Stop the timers; pending ones never run."""
        for ctx in self._contexts.values():
            self._cancel_timers(ctx)
        await self._timer.shutdown()

    # -- the topic --------------------------------------------------------------------------------

    @property
    def topic_state(self) -> Any:
        """The topic in this broker's metadata, None until it exists."""
        return self._metadata_cache.topic(self.topic.name)

    def partition_for(self, key: str) -> int:
        topic = self.topic_state
        n = len(topic.partitions) if topic is not None else self.topic.num_partitions
        return partition_for(key, n)

    def ensure_topic(self) -> bool:
        """Create the topic on first use (FindCoordinator), as Kafka does; True when it exists or
        its creation was started (in ZooKeeper mode the controller writes it in the background:
        FindCoordinator answers COORDINATOR_NOT_AVAILABLE until a leader is known). Logged as it
        happens: the request once, the topic once this broker's metadata shows it, not each
        FindCoordinator that asked while ZooKeeper could not be written."""
        name = self.topic.name
        if self.topic_state is not None:
            if self._topic_requested:
                self._topic_requested = False
                log.info(f"the {name} topic was created", topic=name, partitions=len(self.topic_state.partitions))
            return True
        if self._controller is None:  # ZooKeeper mode without a controller to create it with
            return False
        rf = min(self.topic.replication_factor, len(self._metadata_cache.brokers))
        try:
            self._controller.create_topic(name, self.topic.num_partitions, rf, configs=dict(self.topic.configs))
        except KafkaProtocolError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning(f"could not create the {name} topic", error=e.message)
                return False
            return True
        if self.topic_state is not None:  # created at once (a single node's embedded controller)
            log.info(f"created the {name} topic", topic=name, partitions=self.topic.num_partitions)
        elif not self._topic_requested:
            self._topic_requested = True
            log.info(f"asked the controller to create the {name} topic", topic=name,
                     partitions=self.topic.num_partitions, replication_factor=rf)
        return True

    # -- ownership --------------------------------------------------------------------------------

    def _leader_epoch(self, partition: int) -> int | None:
        p = self._replica_manager.partitions.get((self.topic.name, partition))
        return p.leader_epoch if p is not None and p.is_leader else None

    def _active(self, partition: int) -> CoordinatorContext[S] | None:
        """The partition's context when it is active here. A single node owns what it leads: a
        partition it leads without a context came after start-up, empty, and is active at once."""
        ctx = self._contexts.get(partition)
        if ctx is None and not self._elections:
            epoch = self._leader_epoch(partition)
            if epoch is not None:
                ctx = self._contexts[partition] = CoordinatorContext(partition, epoch, CoordinatorState.ACTIVE,
                                                                     self._shard_builder(partition))
                ctx.shard.on_loaded()  # type: ignore[union-attr]
        return ctx if ctx is not None and ctx.state is CoordinatorState.ACTIVE else None

    def is_loading(self, partition: int) -> bool:
        ctx = self._contexts.get(partition)
        return ctx is not None and ctx.state is CoordinatorState.LOADING

    def is_active(self, partition: int) -> bool:
        """This broker coordinates the partition's keys now (leads it and has loaded it)."""
        return self.topic_state is not None and self._leader_epoch(partition) is not None \
            and self._active(partition) is not None

    def error_for(self, key: str) -> int | None:
        """None when this broker coordinates `key` now, else why not: COORDINATOR_LOAD_IN_PROGRESS
        while its partition loads, NOT_COORDINATOR otherwise."""
        if self.topic_state is None:
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(key)
        if self.is_loading(partition):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None if self.is_active(partition) else ErrorCode.NOT_COORDINATOR

    def shard(self, partition: int) -> S | None:
        ctx = self._active(partition)
        return ctx.shard if ctx is not None else None

    def epoch(self, partition: int) -> int | None:
        """The leader epoch an active partition was taken (or last re-elected) at: the
        coordinator epoch (Kafka's TransactionStateManager keeps it per loaded partition), None
        when the partition is not active here."""
        ctx = self._active(partition)
        return ctx.epoch if ctx is not None else None

    @property
    def loading_partitions(self) -> list[int]:
        """The partitions being loaded here now (Kafka's TransactionStateManager.loadingPartitions:
        ListTransactions answers COORDINATOR_LOAD_IN_PROGRESS while any is)."""
        return sorted(p for p, ctx in self._contexts.items() if ctx.state is CoordinatorState.LOADING)

    @property
    def active_partitions(self) -> list[int]:
        return sorted(p for p, ctx in self._contexts.items() if ctx.state is CoordinatorState.ACTIVE)

    def on_leadership_change(self, leaders: Iterable[TopicPartition], followers: Iterable[TopicPartition]) -> None:
        """ReplicaManager's leadership listener (Kafka's KafkaApis onLeadershipChange): elect the
        topic's partitions this broker now leads, resign those it stopped leading, at the leader
        epoch the partition has now (none for a partition no longer hosted)."""
        for topic, partition in leaders:
            if topic == self.topic.name:
                epoch = self._leader_epoch(partition)
                if epoch is not None:
                    self.on_election(partition, epoch)
        for topic, partition in followers:
            if topic == self.topic.name:
                p = self._replica_manager.partitions.get((topic, partition))
                self.on_resignation(partition, p.leader_epoch if p is not None else None)

    def on_election(self, partition: int, epoch: int) -> asyncio.Task[None] | None:
        """This broker leads the partition at `epoch`: load it in the background (the load's task,
        None when nothing is to load). A partition loading or loaded already only takes the newer
        epoch (a new leader epoch of a partition this broker kept leading)."""
        name = f"{self.topic.name}-{partition}"
        ctx = self._contexts.get(partition)
        if ctx is not None:
            if ctx.epoch < epoch:
                ctx.epoch = epoch
            else:
                log.info(f"Ignored loading {self._what} from {name} since current epoch {ctx.epoch} is larger "
                         f"than or equals to {epoch}.")
            return None
        ctx = self._contexts[partition] = CoordinatorContext(partition, epoch, CoordinatorState.LOADING)
        log.info(f"Scheduling loading of {self._what} from {name} for epoch {epoch}")
        return self._spawn(self._load(ctx))

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        """This broker stopped leading the partition (`epoch`: the new leader epoch, None when the
        partition is no longer hosted here): drop its state, or its load in progress."""
        ctx = self._contexts.get(partition)
        if ctx is None:
            return
        if epoch is not None and ctx.epoch >= epoch:
            log.info(f"Ignored unloading {self._what} for {self.topic.name}-{partition} in epoch {epoch} since "
                     f"current epoch is {ctx.epoch}.")
            return
        del self._contexts[partition]
        self._cancel_timers(ctx)
        if ctx.shard is not None:
            ctx.shard.on_unloaded()

    async def load_led_partitions(self) -> int:
        """Start-up: load every partition of the topic this broker leads and has no context for
        (a single node, before clients connect). Returns the records replayed."""
        replayed = 0
        for (topic, partition), p in list(self._replica_manager.partitions.items()):
            if topic == self.topic.name and p.is_leader and partition not in self._contexts:
                ctx = self._contexts[partition] = CoordinatorContext(partition, p.leader_epoch,
                                                                     CoordinatorState.LOADING)
                replayed += await self._load(ctx)
        return replayed

    async def _load(self, ctx: CoordinatorContext[S]) -> int:
        """Read the partition in an executor, then -- if `ctx` is still the partition's loading
        context -- replay it into a new shard and make it active, in one step on the loop.
        Returns the records replayed (0 when the load was dropped)."""
        started = time.monotonic()
        partition = ctx.partition
        name = f"{self.topic.name}-{partition}"
        p = self._replica_manager.partitions.get((self.topic.name, partition))
        try:
            if p is None or not p.is_leader:
                raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{name} is not led here")
            entries = await asyncio.get_running_loop().run_in_executor(None, self._loader, p.log)
        except Exception:
            log.exception(f"Error loading {self._what} from {name}")
            if self._contexts.get(partition) is ctx:
                del self._contexts[partition]
            return 0
        if self._contexts.get(partition) is not ctx:
            log.info(f"Ignored the load of {self._what} from {name} for epoch {ctx.epoch}: the partition "
                     "resigned while it was read")
            return 0
        shard = self._shard_builder(partition)
        try:
            for entry in entries:
                _replay(shard, entry)
        except Exception:
            # Kafka's GroupMetadataManager: the partition is owned after a failed load too, with
            # what was replayed; the error is logged
            log.exception(f"Error replaying {self._what} from {name}")
        ctx.shard = shard
        ctx.state = CoordinatorState.ACTIVE
        shard.on_loaded()
        log.info(f"Finished loading {self._what} from {name} in {int((time.monotonic() - started) * 1000)} "
                 f"milliseconds for epoch {ctx.epoch}", records=len(entries))
        return len(entries)

    # -- timers -----------------------------------------------------------------------------------

    def schedule(self, partition: int, key: str, delay_ms: int, fn: Callable[[], object]) -> bool:
        """Run `fn` in `delay_ms` if the partition is still this broker's context then, replacing
        the partition's timer of the same `key`. False (nothing scheduled) when the partition is
        not active here. An exception from `fn` is logged; the timer is gone either way."""
        ctx = self._active(partition)
        if ctx is None:
            return False

        def expired() -> None:  # a replaced or resigned timer was cancelled: it never gets here
            del ctx.timers[key]
            try:
                fn()
            except Exception:
                log.exception(f"timer {key} of {self.topic.name}-{partition} failed")

        task = CallbackTimerTask(delay_ms, expired)
        old = ctx.timers.get(key)
        if old is not None:
            old.cancel()
        ctx.timers[key] = task
        self._timer.add(task)
        return True

    def cancel(self, partition: int, key: str) -> None:
        ctx = self._contexts.get(partition)
        task = ctx.timers.pop(key, None) if ctx is not None else None
        if task is not None:
            task.cancel()

    @staticmethod
    def _cancel_timers(ctx: CoordinatorContext[Any]) -> None:
        for task in ctx.timers.values():
            task.cancel()
        ctx.timers.clear()

    # -- writes -----------------------------------------------------------------------------------

    async def append(self, partition: int, entries: list[KeyValue], *, required_acks: int = -1) -> int:
        """Write `entries` (key, value; a None value is a tombstone) to the partition as one batch
        with acks=all (or `required_acks`: 0 appends to this leader's log without waiting, as
        Kafka's group coordinator writes its clean-up tombstones) and the COORDINATOR origin; the
        coordinator's error code (see the module docstring). The caller applies what it wrote to
        its state only on NONE."""
        return (await self.write(partition, entries, required_acks=required_acks)).error

    async def write(self, partition: int, entries: list[KeyValue], *, producer_id: int = NO_PRODUCER_ID,
                    producer_epoch: int = NO_PRODUCER_EPOCH,
                    verification_guard: VerificationGuard | None = None, required_acks: int = -1) -> WriteResult:
        """`append`, with the batch's offset and the log's error too; with a `producer_id` the
        batch is transactional, written for that producer id and epoch (base sequence 0, as
        Kafka's GroupMetadataManager.storeOffsets builds a TxnOffsetCommit's batch): it stays
        open in the partition until a marker ends the producer's transaction, and the log's
        producer state checks the epoch (INVALID_PRODUCER_EPOCH for an older one) and, given the
        `verification_guard` of a KIP-890 verification, that it still holds (INVALID_TXN_STATE)."""
        ctx = self._contexts.get(partition)
        if ctx is not None and ctx.state is not CoordinatorState.ACTIVE:
            # loading: the state the write was computed from is gone
            return WriteResult(ErrorCode.NOT_COORDINATOR, ErrorCode.NONE)
        now = int(time.time() * 1000)
        transactional = producer_id != NO_PRODUCER_ID
        batch = build_batch([Record(offset_delta=i, key=k, value=v) for i, (k, v) in enumerate(entries)],
                            base_timestamp=now, producer_id=producer_id, producer_epoch=producer_epoch,
                            base_sequence=0 if transactional else NO_SEQUENCE, is_transactional=transactional)
        tp = (self.topic.name, partition)
        result = await self._append_to_log(tp, batch, verification_guard, required_acks)
        error = coordinator_error(result.error)
        if error == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.warning(f"append to {self.topic.name} failed", partition=partition, error=result.error)
        if ctx is not None and self._contexts.get(partition) is not ctx:
            # resigned while the write waited for its acks
            return WriteResult(ErrorCode.NOT_COORDINATOR, ErrorCode.NONE)
        return WriteResult(error, result.error, result.base_offset if result.error == ErrorCode.NONE else -1)

    async def _append_to_log(self, tp: TopicPartition, batch: bytes,
                             verification_guard: VerificationGuard | None = None,
                             required_acks: int = -1) -> ProduceResult:
        results = await self._replica_manager.append_records(
            [(tp, batch)], required_acks, internal_topics_allowed=True, origin=AppendOrigin.COORDINATOR,
            timeout_ms=self._write_timeout_ms, verification_guard=verification_guard)
        return results[tp]
