"""The Controller interface (controller.interface) in ZooKeeper mode: what broker/server.py builds
when `zookeeper.connect` is set, in place of the single node's EmbeddedController.

It is two things of Kafka 3.9's ZooKeeper-mode broker in one object:
* the broker's KafkaController (controller.zk.controller), started with the broker: it runs for
  election and, while elected, controls the cluster;
* ZkAdminManager: the admin changes any broker accepts, checked as Kafka checks them (topic-name
  rules, collisions, replication factor against the live brokers with AdminUtils' messages,
  replica assignment with controller.assignment) and written to ZooKeeper (AdminZkClient); the
  elected controller -- on this broker or another -- reacts to the znodes.

A change is started by a plain call (validated at once against this broker's metadata, plus the
changes it started that the metadata does not show yet); :meth:`committed` then waits for the
ZooKeeper writes *and*, as Kafka's DelayedCreatePartitions / DelayedDeleteTopics purgatories do,
until this broker's metadata shows the result (a new topic with a leader for every partition, a
deleted topic gone, added partitions led), bounded by `commit_timeout_ms` (REQUEST_TIMED_OUT).
It waits for the changes the calling request (its task) started, and only those: Kafka's purgatory
watches a request's own topics, so a topic created while 1,000 others are being deleted is
answered once it is led, not once the deletion is over (issue #21). A failure raises a
StorageError subclass carrying Kafka's error code, so handlers answer it.

Topics to delete are marked in batches: the names DeleteTopics hands over one by one in a request
(no await between them) are checked against /brokers/topics with one read and their
/admin/delete_topics/<t> znodes created in one multi (AdminZkClient.delete_topics), so the
controller sees the whole request in one TopicDeletion event and a CreateTopics behind it waits
for a few ZooKeeper round trips, not two per deleted topic.

The broker's metadata is the broker's (its MetadataCache, fed by the controller's UpdateMetadata,
read through `metadata()`); whoever applies an UpdateMetadata calls :meth:`metadata_updated`,
which wakes the waits and tells the listeners (add_listener) of topics created, deleted or changed
in it. Producer ids come in blocks of 1000 from /latest_producer_id_block (compare-and-set).

Who may call: the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from broker.quota.admin import apply_ops
from broker.quota.entity import Entity, parse_entity, zk_entity
from controller.assignment import (
    BrokerMetadata,
    RackAwareMode,
    assign_replicas_to_brokers,
    create_partitions_assignment,
    get_broker_metadatas,
    validate_topic_create_assignment,
)
from controller.channel import BrokerRequestSender
from controller.image import (
    Listener,
    MetadataImage,
    PartitionState,
    TopicState,
    validate_topic_name,
)
from controller.topic_partition import TopicPartition
from controller.zk.admin import AdminZkClient
from controller.zk.client import ZooKeeperClientError
from controller.zk.controller import KafkaController, KafkaControllerConfig
from controller.zk.data import ProducerIdsBlock
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from protocol.errors import ErrorCode, KafkaProtocolError
from storage.errors import StorageError

__all__ = ["ZkController", "ZkWriteError"]

log = logging.getLogger(__name__)

NO_LEADER = -1


# conditional writes of one AlterClientQuotas entry before it gives up (each lost to a concurrent one)
_QUOTA_WRITE_ATTEMPTS = 20

class ZkWriteError(StorageError):
    """A change that ZooKeeper refused or that did not show up in time, with Kafka's error code
    (TOPIC_ALREADY_EXISTS, NOT_CONTROLLER, REQUEST_TIMED_OUT, ...)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        KafkaProtocolError.__init__(self, code, message)


def _has_collision(a: str, b: str) -> bool:
    return a.replace(".", "_") == b.replace(".", "_")


class ZkController:
    """See the module docstring."""

    def __init__(
        self,
        zk_client: KafkaZkClient,
        broker_id: int,
        sender: BrokerRequestSender,
        metadata: Callable[[], MetadataImage],
        *,
        config: KafkaControllerConfig | None = None,
        commit_timeout_ms: float = 30_000,
        rng: random.Random | None = None,
    ) -> None:
        """`zk_client`: this broker's ZooKeeper session; `sender`: the network client the controller
        channel uses (broker.network_client.NetworkClient); `metadata`: this broker's current
        metadata image (MetadataCache.image); `config`: the controller's settings (broker id,
        inter.broker.listener.name, delete.topic.enable, unclean.leader.election.enable,
        request timeout)."""
        self.broker_id = broker_id
        self.zk_client = zk_client
        self.admin = AdminZkClient(zk_client)
        self.kafka_controller = KafkaController(config or KafkaControllerConfig(broker_id), zk_client, sender)
        self.metadata = metadata
        self.commit_timeout_ms = commit_timeout_ms
        self.rng = rng or random.Random()
        self.listeners: list[Listener] = []
        self.broker_configs: dict[str, str] = {}
        self._pending: set[asyncio.Future[Any]] = set()
        # the changes each request (its task) started, for its own committed(); weak: an entry
        # goes with its task
        self._started_by: weakref.WeakKeyDictionary[asyncio.Task[Any], list[asyncio.Future[Any]]] = (
            weakref.WeakKeyDictionary())
        # topics to mark for deletion in the next batch (AdminZkClient.delete_topics), each with
        # the future its deletion waits on
        self._to_mark: dict[str, asyncio.Future[None]] = {}
        self._creating: dict[str, TopicState] = {}  # started here, not in the metadata yet
        self._deleting: set[str] = set()
        self._known: dict[str, _Seen] = {}  # the topics of the last metadata seen
        self._changed = asyncio.Event()
        self._pid_lock = asyncio.Lock()
        self._pid_block: ProducerIdsBlock | None = None
        self._next_pid = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def startup(self) -> None:
        """Start the KafkaController (it runs for election)."""
        self._known = {name: _Seen.of(t) for name, t in self.metadata().topics.items()}
        self.kafka_controller.startup()

    async def shutdown(self) -> None:
        """Stop the KafkaController (resigning if elected); changes in flight are abandoned."""
        await self.kafka_controller.shutdown()
        for fut in list(self._pending):
            fut.cancel()

    def close(self) -> None:
        """Nothing to release synchronously (the interface's; `shutdown` stops the controller)."""

    # -- metadata -------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """`listener(event, topic)` for every topic created, deleted or changed in this broker's
        metadata (as told by metadata_updated)."""
        self.listeners.append(listener)

    def metadata_updated(self, image: MetadataImage | None = None) -> None:
        """This broker's metadata changed (an UpdateMetadata was applied): tell the listeners what
        changed for topics and wake the changes waiting to show up."""
        image = image if image is not None else self.metadata()
        # snapshots, not the TopicState objects: a cache may update those in place
        before, after = self._known, {name: _Seen.of(t) for name, t in image.topics.items()}
        self._known = after
        for name, old in before.items():
            new = after.get(name)
            if new is None or new.topic_id != old.topic_id:
                self._notify("deleted", old.topic)
        for name, new in after.items():
            old = before.get(name)
            if old is None or old.topic_id != new.topic_id:
                self._notify("created", new.topic)
            elif (old.partitions, old.configs) != (new.partitions, new.configs):
                self._notify("changed", new.topic)
        for name in [n for n, t in self._creating.items() if after.get(n) is not None
                     and after[n].topic_id == t.topic_id]:
            del self._creating[name]
        self._deleting -= {n for n in self._deleting if n not in after}
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _notify(self, event: str, topic: TopicState) -> None:
        for listener in self.listeners:
            work = listener(event, topic)
            if work is not None:
                self._track(asyncio.ensure_future(work))

    def _track(self, fut: asyncio.Future[Any]) -> asyncio.Future[Any]:
        self._pending.add(fut)
        fut.add_done_callback(self._pending.discard)
        fut.add_done_callback(_retrieve)
        return fut

    def _start(self, work: Awaitable[Any]) -> None:
        fut = self._track(asyncio.ensure_future(work))
        task = asyncio.current_task()
        if task is not None:
            self._started_by.setdefault(task, []).append(fut)

    async def _until(self, condition: Callable[[MetadataImage], bool], what: str) -> None:
        """Until `condition(this broker's metadata)` holds; REQUEST_TIMED_OUT after the timeout."""
        async def wait() -> None:
            while not condition(self.metadata()):
                await self._changed.wait()
        try:
            await asyncio.wait_for(wait(), self.commit_timeout_ms / 1000)
        except TimeoutError:
            raise KafkaProtocolError(ErrorCode.REQUEST_TIMED_OUT, f"Timed out waiting for {what}.") from None

    async def committed(self) -> None:
        """Wait until every change the calling task (a request's handler) started is written and
        shows in this broker's metadata. Another request's changes are not waited for, nor their
        errors raised here: a topic created during a long deletion is answered when it is led.
        A task that started none returns at once (at shutdown the requests were drained first;
        what is still in flight then is abandoned by :meth:`shutdown`). Await it in the task that
        made the changes: ``asyncio.wait_for`` would run it in a task of its own (Python 3.11)."""
        task = asyncio.current_task()
        mine = self._started_by.pop(task, None) if task is not None else None
        if not mine:
            return
        done, _ = await asyncio.wait(mine)
        for fut in done:
            exc = None if fut.cancelled() else fut.exception()
            if isinstance(exc, KafkaProtocolError):
                raise ZkWriteError(exc.code, exc.message) from exc
            if exc is not None:
                raise ZkWriteError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}") from exc

    # -- topics ---------------------------------------------------------------------------------

    def _topic_names(self) -> set[str]:
        return set(self.metadata().topics) | set(self._creating)

    def _live_brokers(self) -> list[BrokerMetadata]:
        return sorted((BrokerMetadata(b.broker_id, b.rack) for b in self.metadata().brokers.values()),
                      key=lambda b: b.id)

    def _validate_name(self, name: str) -> None:
        """AdminZkClient.validateTopicCreate's name checks."""
        validate_topic_name(name)
        if name in self._deleting:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
        existing = self._topic_names()
        if name in existing:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if "." in name or "_" in name:
            colliding = sorted(t for t in existing if _has_collision(name, t))
            if colliding:
                raise KafkaProtocolError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                         f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")

    def validate_new_topic(self, name: str, num_partitions: int, replication_factor: int) -> None:
        self._validate_name(name)
        assign_replicas_to_brokers(self._live_brokers(), num_partitions, replication_factor, rng=self.rng)

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> TopicState:
        """ZkAdminManager.createTopics for one topic: the assignment (AdminUtils over the live
        brokers, or the request's), then config + assignment written to ZooKeeper."""
        self._validate_name(name)
        if assignments:
            validate_topic_create_assignment(assignments)
            assignment = {p: list(r) for p, r in sorted(assignments.items())}
        else:
            assignment = assign_replicas_to_brokers(self._live_brokers(), num_partitions, replication_factor,
                                                    rng=self.rng)
        topic = TopicState(
            name=name, topic_id=uuid.uuid4(), configs=dict(configs or {}),
            partitions={p: PartitionState(partition=p, replicas=list(r), leader=r[0], isr=list(r))
                        for p, r in assignment.items()})
        self._creating[name] = topic
        self._start(self._create(topic, assignment))
        return topic

    async def _create(self, topic: TopicState, assignment: dict[int, list[int]]) -> None:
        try:
            # the /controller read the writes are checked against goes with the validation's
            controller, _ = await asyncio.gather(self.zk_client.get_controller_registration(),
                                                 self._validate_in_zookeeper(topic.name))
            await self.admin.create_topic_with_assignment(topic.name, topic.configs, assignment, topic.topic_id,
                                                          controller)
        except BaseException:
            self._creating.pop(topic.name, None)
            raise

        def led(image: MetadataImage) -> bool:
            t = image.topics.get(topic.name)
            return (t is not None and t.topic_id == topic.topic_id and set(t.partitions) >= set(assignment)
                    and all(t.partitions[p].leader != NO_LEADER for p in assignment))
        await self._until(led, f"the leaders of topic {topic.name}")

    async def _validate_in_zookeeper(self, name: str) -> None:
        """validateTopicCreate's checks against ZooKeeper itself, which may know of topics this
        broker's metadata does not show yet (created through another broker a moment ago)."""
        # both reads at once: each round trip of a new topic's waits behind whatever this
        # broker's session sent before it (a controller deleting 1,000 topics)
        marked, topics = await asyncio.gather(self.zk_client.is_topic_marked_for_deletion(name),
                                              self.zk_client.get_all_topics_in_cluster())
        if marked:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
        if name in topics:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        colliding = sorted(t for t in topics if _has_collision(name, t))
        if colliding:
            raise KafkaProtocolError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")

    def delete_topic(self, name: str) -> TopicState:
        topic = self.metadata().topics.get(name)
        if topic is None:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{name}` to delete does not exist")
        self._deleting.add(name)
        self._start(self._delete(name, self._mark_for_deletion(name)))
        return topic

    def _mark_for_deletion(self, name: str) -> asyncio.Future[None]:
        """Join the next batch of topics marked for deletion (one write for every topic a request
        names; see the module docstring); the future ends when the topic's mark is written."""
        marked = self._to_mark.get(name)
        if marked is None:
            if not self._to_mark:
                self._track(asyncio.ensure_future(self._write_marks()))
            marked = self._to_mark[name] = asyncio.get_running_loop().create_future()
            marked.add_done_callback(_retrieve)  # its _delete may be cancelled before it looks
        return marked

    async def _write_marks(self) -> None:
        """Mark the batch gathered since this task was started (it runs once the handler that
        started it yields, so after the request's last name)."""
        batch, self._to_mark = self._to_mark, {}
        try:
            errors = await self.admin.delete_topics(list(batch))
        except asyncio.CancelledError:
            for fut in batch.values():
                fut.cancel()
            raise
        except Exception as e:
            for fut in batch.values():
                fut.set_exception(e)
            raise
        for name, fut in batch.items():
            error = errors.get(name)
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)

    async def _delete(self, name: str, marked: asyncio.Future[None]) -> None:
        try:
            await marked
        except BaseException:
            self._deleting.discard(name)
            raise
        await self._until(lambda image: name not in image.topics, f"the deletion of topic {name}")

    def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> TopicState:
        """ZkAdminManager.createPartitions for one topic: Kafka's checks and messages, the new
        partitions continuing the round robin (controller.assignment), the assignment written."""
        topic = self.metadata().topics.get(name)
        if any(tp.topic == name for tp in self.kafka_controller.controller_context.partitions_being_reassigned):
            # Kafka's first check, before the assignment's (a reassignment adding a broker that has
            # died since must not turn this into INVALID_REPLICATION_FACTOR); the admin's write
            # checks the znode again
            raise KafkaProtocolError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                     f"A partition reassignment is in progress for the topic '{name}'.")
        existing = {} if topic is None else {p: list(s.replicas) for p, s in topic.partitions.items()}
        brokers = get_broker_metadatas(self._live_brokers(), RackAwareMode.ENFORCED)
        new = create_partitions_assignment(name, existing, brokers, total, assignments, rng=self.rng)
        assert topic is not None  # create_partitions_assignment refused an unknown topic
        partitions = dict(topic.partitions)
        for p, replicas in new.items():
            partitions[p] = PartitionState(partition=p, replicas=list(replicas), leader=replicas[0], isr=list(replicas))
        self._start(self._add_partitions(name, existing, new))
        return dataclasses.replace(topic, partitions=partitions)

    async def _add_partitions(self, name: str, existing: dict[int, list[int]], new: dict[int, list[int]]) -> None:
        await self.admin.create_partitions_with_assignment(name, existing, new)

        def led(image: MetadataImage) -> bool:
            t = image.topics.get(name)
            return t is not None and all(p in t.partitions and t.partitions[p].leader != NO_LEADER for p in new)
        await self._until(led, f"the leaders of the new partitions of topic {name}")

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicState:
        topic = self.metadata().topics.get(name)
        if topic is None:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        changed = dataclasses.replace(topic, configs=dict(configs))
        self._start(self.admin.change_topic_config(name, configs))
        self._notify("changed", changed)  # the log configs of this broker at once
        return changed

    def set_broker_configs(self, configs: dict[str, str], cluster_default: bool = False) -> None:
        """This broker's dynamic configs (/config/brokers/<id>), or with `cluster_default` every
        broker's (/config/brokers/<default>), and a change notification; every broker's
        ZkConfigManager applies them."""
        if not cluster_default:
            self.broker_configs = dict(configs)
        self._start(self.admin.change_broker_config(None if cluster_default else self.broker_id, configs))

    async def alter_client_quota(self, entity: Entity, ops: list[tuple[str, float, bool]]) -> dict[str, str]:
        """ZkAdminManager.alterClientQuotas for one entry: the entity's znode read, `ops` applied
        (other keys kept: SCRAM credentials live next to user quotas), written back with a
        /config/changes notification that every broker's ZkConfigManager applies."""
        entity_type, name = zk_entity(entity)
        zk = self.zk_client
        try:
            # a conditional write of what was read: two concurrent alters of one entity (on this
            # broker or another) would otherwise each write back the znode without the other's keys
            for _ in range(_QUOTA_WRITE_ATTEMPTS):
                stored, version = await zk.get_entity_configs_and_version(entity_type, name)
                config = apply_ops(stored, ops)
                if await zk.set_entity_configs_conditionally(entity_type, name, config, version):
                    break
            else:
                raise KafkaProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR, f"The quotas of {entity_type}/{name} kept "
                                         f"changing under {_QUOTA_WRITE_ATTEMPTS} attempts to alter them")
            await zk.create_config_change_notification(f"{entity_type}/{name}")
        except ZooKeeperClientError as e:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {e}") from e
        return config

    async def client_quota_configs(self) -> dict[Entity, dict[str, str]]:
        """Every user and client-id entity's configs as ZooKeeper has them (describeClientQuotas)."""
        zk = self.zk_client
        out: dict[Entity, dict[str, str]] = {}
        try:
            for user in await zk.get_all_entities_with_config("users"):
                out[parse_entity("users", user)] = await zk.get_entity_configs("users", user)
                for client in await zk.get_all_entities_with_config(f"users/{user}/clients"):
                    name = f"{user}/clients/{client}"
                    out[parse_entity("users", name)] = await zk.get_entity_configs("users", name)
            for client in await zk.get_all_entities_with_config("clients"):
                out[parse_entity("clients", client)] = await zk.get_entity_configs("clients", client)
        except ZooKeeperClientError as e:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {e}") from e
        return out

    # -- requests only the elected controller answers --------------------------------------------

    async def _ask(self, put: Callable[[Callable[[Any], None]], None]) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def answer(value: Any) -> None:
            if not fut.done():
                fut.set_result(value)
        put(answer)
        return await fut

    @property
    def is_active_controller(self) -> bool:
        return self.kafka_controller.is_active

    async def alter_partition(self, request: Any, version: int) -> Any:
        """AlterPartition from a leader: the AlterPartitionResponse (NOT_CONTROLLER unless this
        broker is the controller)."""
        return await self._ask(lambda cb: self.kafka_controller.alter_partitions(request, version, cb))

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[Any]:
        """ControlledShutdown: the partitions the broker still leads (empty: it may stop); raises
        the controller's error as KafkaProtocolError (Kafka's Errors.forException: NOT_CONTROLLER,
        STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE, ...)."""
        result = await self._ask(lambda cb: self.kafka_controller.controlled_shutdown(broker_id, broker_epoch, cb))
        if isinstance(result, ControllerMovedError):
            raise KafkaProtocolError(ErrorCode.NOT_CONTROLLER, str(result)) from result
        if isinstance(result, BaseException):
            code = getattr(result, "code", None)
            raise KafkaProtocolError(code if isinstance(code, int) else ErrorCode.UNKNOWN_SERVER_ERROR,
                                     str(result)) from result
        return set(result)

    async def elect_leaders(self, partitions: Any, election_type: str) -> dict[Any, Any]:
        """ElectLeaders ("PREFERRED" or "UNCLEAN"): per partition the leader elected, or (error
        code, message)."""
        tps = [TopicPartition(topic, partition) for topic, partition in partitions]
        return await self._ask(lambda cb: self.kafka_controller.elect_leaders(tps, election_type, cb))

    async def alter_partition_reassignments(self, reassignments: dict[tuple[str, int], list[int] | None]) -> Any:
        """AlterPartitionReassignments: {(topic, partition): (error code, message)}, or (error
        code, message) for the whole request (NOT_CONTROLLER)."""
        tps = {TopicPartition(t, p): r for (t, p), r in reassignments.items()}
        return await self._ask(lambda cb: self.kafka_controller.alter_partition_reassignments(tps, cb))

    async def list_partition_reassignments(self, partitions: Any) -> Any:
        """ListPartitionReassignments (None: all): {(topic, partition): ReplicaAssignment} of
        those being reassigned, or (error code, message)."""
        tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        return await self._ask(lambda cb: self.kafka_controller.list_partition_reassignments(tps, cb))

    # -- producer ids ---------------------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        """The next producer id of this broker's block; a new block of 1000 from ZooKeeper
        (ZkProducerIdManager's compare-and-set on /latest_producer_id_block) when it runs out."""
        async with self._pid_lock:
            block = self._pid_block
            if block is None or self._next_pid > block.last_producer_id:
                try:
                    block = self._pid_block = await self.zk_client.get_new_producer_id_block(self.broker_id)
                except ZooKeeperClientError as e:  # retriable for the client, as RPCProducerIdManager's
                    raise KafkaProtocolError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                             f"Producer ID block is not available yet: {e}") from e
                self._next_pid = block.first_producer_id
            pid = self._next_pid
            self._next_pid += 1
            return pid


@dataclasses.dataclass(frozen=True)
class _Seen:
    """What metadata_updated compares of a topic between two images."""

    topic: TopicState
    topic_id: uuid.UUID
    partitions: int
    configs: tuple[tuple[str, str], ...]

    @staticmethod
    def of(t: TopicState) -> _Seen:
        return _Seen(t, t.topic_id, len(t.partitions), tuple(sorted(t.configs.items())))


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
