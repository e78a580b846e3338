"""Kafka's KafkaZkClient (core/src/main/scala/kafka/zk/KafkaZkClient.scala, 3.9) on our asyncio
ZooKeeperClient: the znode operations a ZooKeeper-mode broker and controller perform, with Kafka's
algorithms, so the tree looks and evolves exactly as Kafka's does.

Fencing, as Kafka does it. Every write the controller makes can carry
`expected_controller_epoch_zk_version` (the version of /controller_epoch this controller set when
it was elected): the write is then sent as a multi that first checks /controller_epoch still has
that version. If another controller was elected since, the check fails and ControllerMovedError
is raised -- a paused ("zombie") controller cannot overwrite its successor's state. The default
MATCH_ANY_VERSION (-1) writes without the check (brokers, tools).

Broker epoch = the czxid of /brokers/ids/<id>: `register_broker` returns it. It uses Kafka's
CheckedEphemeral: create (null) + set data in one multi; if the znode exists and belongs to this
client's previous, expired session (ZOOKEEPER-2985, KAFKA-7165) it is deleted and re-created;
owned by another live session -> NodeExistsError.

Every operation retries after a connection loss once the connection is back (Kafka's
retryRequestsUntilConnected); batches go out pipelined.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from controller.zk import data as zd
from controller.zk.client import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    MultiResult,
    NodeExistsError,
    NoNodeError,
    Op,
    SetDataOp,
    Stat,
    ZNodeChangeHandler,
    ZooKeeperClient,
    ZooKeeperClientError,
    gather_all,
)
from controller.zk.data import (
    MATCH_ANY_VERSION,
    UNKNOWN_VERSION,
    Broker,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    FeatureZNode,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ProducerIdBlockZNode,
    ProducerIdsBlock,
    ReassignPartitionsZNode,
    ReplicaAssignment,
    TopicIdReplicaAssignment,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
    ZkControllerRegistration,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
TopicPartition = tuple[str, int]  # (topic, partition); controller.topic_partition.TopicPartition fits

# how many times a compare-and-set loop re-reads and retries before giving up (Kafka loops forever)
MAX_CAS_ATTEMPTS = 100
# /admin/delete_topics/<t> creates per multi: a 249-character topic's op is about 300 bytes, so a
# multi stays far below ZooKeeper's 1 MB jute.maxbuffer
MARKS_PER_MULTI = 1000


class ControllerMovedError(ZooKeeperClientError):
    """Kafka's ControllerMovedException: this broker is (no longer) the controller -- another
    created /controller first, or the controller epoch moved on under a fenced write."""

    code = "CONTROLLERMOVED"


class KafkaZkError(ZooKeeperClientError):
    """Kafka's KafkaException for ZooKeeper state that should not be (e.g. /cluster/id deleted)."""

    code = "KAFKA"


@dataclass(frozen=True)
class BrokerAndEpoch:
    broker: Broker
    epoch: int  # the czxid of its registration


@dataclass
class UpdateLeaderAndIsrResult:
    """KafkaZkClient.UpdateLeaderAndIsrResult: per partition the written LeaderAndIsr (with its
    new partition epoch = znode version) or the error; `partitions_to_retry` lost the
    compare-and-set to a concurrent writer (BADVERSION) and must be re-read."""

    finished_partitions: dict[TopicPartition, LeaderAndIsr | Exception] = field(default_factory=dict)
    partitions_to_retry: list[TopicPartition] = field(default_factory=list)


class KafkaZkClient:
    """Kafka's ZooKeeper operations over one ZooKeeperClient session."""

    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk
        # the session that registered our ephemeral znodes (CheckedEphemeral, KAFKA-7165)
        self._registration_session_id: int | None = None

    # --- plumbing --------------------------------------------------------------------------------

    async def _retry(self, op: Callable[[], Awaitable[T]]) -> T:
        return await self.zk.retry_until_connected(op)

    async def _fenced(self, op: Op, expected_controller_epoch_zk_version: int) -> object:
        """Run one write, guarded by the controller epoch check when a version is given (Kafka's
        wrapRequestWithControllerEpochCheck). Returns the op's result or raises its error."""
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            return await self._retry(lambda: self._plain(op))
        if expected_controller_epoch_zk_version >= 0:
            result = await self._retry(lambda: self.zk.multi(
                [CheckOp(ControllerEpochZNode.path, expected_controller_epoch_zk_version), op]))
            check, value = result.results
            if isinstance(check, BadVersionError):
                raise ControllerMovedError(
                    "Controller epoch zkVersion check fails. Expected zkVersion = "
                    f"{expected_controller_epoch_zk_version}")
            if isinstance(check, ZooKeeperClientError) and not _rolled_back(check):
                raise check
        else:
            raise ValueError(f"Expected controller epoch zkVersion {expected_controller_epoch_zk_version} "
                             f"should be non-negative or equal to {MATCH_ANY_VERSION}")
        if isinstance(value, ZooKeeperClientError):
            raise value
        return value

    async def _plain(self, op: Op) -> object:
        """One op as a plain request (what Kafka sends when no epoch check is asked for)."""
        if isinstance(op, CreateOp):
            return await self.zk.create(op.path, op.data, ephemeral=op.ephemeral, sequential=op.sequential)
        if isinstance(op, SetDataOp):
            return await self.zk.set_data(op.path, op.data, op.version)
        if isinstance(op, DeleteOp):
            await self.zk.delete(op.path, op.version)
            return True
        raise ValueError(f"{op} needs a multi")

    async def _fenced_batch(self, ops: list[Op], expected_controller_epoch_zk_version: int) -> list[object]:
        """Many fenced writes pipelined; each result or its error (ControllerMovedError raised)."""
        results = await gather_all(self._fenced(op, expected_controller_epoch_zk_version) for op in ops)
        for r in results:
            if isinstance(r, ControllerMovedError):
                raise r
            if isinstance(r, BaseException) and not isinstance(r, Exception):
                raise r
        return results

    async def get_data_and_stat(self, path: str, watch: bool = False) -> tuple[bytes | None, Stat | None]:
        """(data, stat), or (None, None) when the znode does not exist (Kafka: ZkStat.NoStat)."""
        try:
            return await self._retry(lambda: self.zk.get_data(path, watch))
        except NoNodeError:
            return None, None

    async def get_data_and_version(self, path: str) -> tuple[bytes | None, int]:
        data, stat = await self.get_data_and_stat(path)
        return data, UNKNOWN_VERSION if stat is None else stat.version

    async def get_children(self, path: str, watch: bool = False) -> list[str]:
        """Children, or [] when the znode does not exist."""
        try:
            return await self._retry(lambda: self.zk.get_children(path, watch))
        except NoNodeError:
            return []

    async def path_exists(self, path: str) -> bool:
        return await self._retry(lambda: self.zk.exists(path)) is not None

    async def conditional_update_path(self, path: str, data: bytes, expected_version: int) -> tuple[bool, int]:
        """Set `path` if its version is `expected_version`: (True, new version), or (False,
        UNKNOWN_VERSION) on a version conflict or a missing znode (Kafka's conditionalUpdatePath
        without a checker)."""
        try:
            stat = await self._retry(lambda: self.zk.set_data(path, data, expected_version))
        except (BadVersionError, NoNodeError) as e:
            log.debug("Conditional update of path %s with expected version %d failed due to %s",
                      path, expected_version, e)
            return False, UNKNOWN_VERSION
        return True, stat.version

    async def create_recursive(self, path: str, data: bytes | None = None, throw_if_path_exists: bool = True) -> None:
        """Create `path` with `data`, missing parents with null data (Kafka's createRecursive)."""
        try:
            await self._retry(lambda: self.zk.create(path, data, makepath=True))
        except NodeExistsError:
            if throw_if_path_exists:
                raise

    async def make_sure_persistent_path_exists(self, path: str) -> None:
        await self.create_recursive(path, None, throw_if_path_exists=False)

    async def create_top_level_paths(self) -> None:
        """ZkData.PersistentZkPaths, created (if absent) by every broker at startup."""
        for path in zd.PERSISTENT_ZK_PATHS:
            await self.make_sure_persistent_path_exists(path)

    async def delete_recursive(self, path: str, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> bool:
        """Delete `path` and everything below it; False if it did not exist. Siblings are deleted
        concurrently (pipelined on the session), each subtree bottom-up, so a topic's partitions
        cost one round trip per level instead of one per znode."""
        try:
            children = await self._retry(lambda: self.zk.get_children(path))
        except NoNodeError:
            return False
        _raise_first(await gather_all(self.delete_recursive(f"{path}/{child}", expected_controller_epoch_zk_version)
                                      for child in children))
        try:
            await self._fenced(DeleteOp(path), expected_controller_epoch_zk_version)
        except NoNodeError:
            pass
        return True

    # --- brokers ---------------------------------------------------------------------------------

    async def register_broker(self, info: BrokerInfo, timestamp_ms: int | None = None) -> int:
        """Create /brokers/ids/<id> (ephemeral) and return the broker epoch (its czxid)."""
        stat = await self._checked_ephemeral_create(info.path, info.to_json_bytes(timestamp_ms))
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
                 info.broker.id, info.path, ",".join(e.connection_string() for e in info.broker.endpoints),
                 stat.czxid)
        return stat.czxid

    async def update_broker_info(self, info: BrokerInfo) -> None:
        await self._retry(lambda: self.zk.set_data(info.path, info.to_json_bytes(), MATCH_ANY_VERSION))

    async def _checked_ephemeral_create(self, path: str, data: bytes) -> Stat:
        for _ in range(MAX_CAS_ATTEMPTS):
            # create with null data, then set: the Stat of the set carries the czxid (ZooKeeper
            # 3.4 had no create2); Kafka's registration therefore always has version 1
            result: MultiResult = await self._retry(lambda: self.zk.multi(
                [CreateOp(path, None, ephemeral=True), SetDataOp(path, data, 0)]))
            if result.ok:
                self._registration_session_id = self.zk.session_id
                stat = result.results[1]
                assert isinstance(stat, Stat)
                return stat
            if not isinstance(result.error, NodeExistsError):
                raise result.error or ZooKeeperClientError(path=path)
            _, stat = await self.get_data_and_stat(path)
            if stat is None:
                log.info("The ephemeral node at %s went away while reading it, attempting create() again", path)
                continue
            owner, current = stat.ephemeral_owner, self.zk.session_id
            if owner == self._registration_session_id and owner != current:
                log.info("Was not possible to create the ephemeral at %s, node already exists and owner "
                         "'0x%x' does not match current session '0x%x', trying to delete and re-create it "
                         "with the newest Zookeeper session", path, owner, current or 0)
                try:
                    await self._retry(lambda: self.zk.delete(path))
                except NoNodeError:
                    pass
                continue
            if owner != current:
                raise NodeExistsError(
                    f"Error while creating ephemeral at {path}, node already exists and owner "
                    f"'0x{owner:x}' does not match current session '0x{current or 0:x}'", path)
            self._registration_session_id = current
            return stat
        raise KafkaZkError(f"Could not create the ephemeral node {path}", path)

    async def get_sorted_broker_list(self) -> list[int]:
        return sorted(int(c) for c in await self.get_children(BrokerIdsZNode.path))

    async def get_broker(self, broker_id: int) -> Broker | None:
        data, stat = await self.get_data_and_stat(BrokerIdZNode.path(broker_id))
        return None if stat is None else BrokerIdZNode.decode(broker_id, data).broker

    async def get_all_brokers_in_cluster(self) -> list[Broker]:
        return [b.broker for b in (await self.get_all_broker_and_epochs_in_cluster()).values()]

    async def get_all_broker_and_epochs_in_cluster(self) -> dict[int, BrokerAndEpoch]:
        """Live brokers by id, each with its epoch; a broker that went away meanwhile is left out."""
        ids = await self.get_sorted_broker_list()
        reads = await gather_all(self.get_data_and_stat(BrokerIdZNode.path(i)) for i in ids)
        out: dict[int, BrokerAndEpoch] = {}
        for broker_id, r in zip(ids, reads, strict=True):
            if isinstance(r, BaseException):
                raise r
            data, stat = r
            if stat is not None:
                out[broker_id] = BrokerAndEpoch(BrokerIdZNode.decode(broker_id, data).broker, stat.czxid)
        return out

    # --- controller ------------------------------------------------------------------------------

    async def get_controller_id(self) -> int | None:
        data, stat = await self.get_data_and_stat(ControllerZNode.path)
        return None if stat is None else ControllerZNode.decode(data)

    async def get_controller_registration(self) -> ZkControllerRegistration | None:
        data, stat = await self.get_data_and_stat(ControllerZNode.path)
        return None if stat is None else ControllerZNode.decode_controller(data, stat.version)

    async def get_controller_epoch(self) -> tuple[int, Stat] | None:
        data, stat = await self.get_data_and_stat(ControllerEpochZNode.path)
        return None if stat is None else (ControllerEpochZNode.decode(data), stat)

    async def register_controller_and_increment_controller_epoch(
            self, controller_id: int, timestamp_ms: int | None = None) -> tuple[int, int]:
        """Become the controller: create /controller (ephemeral) and bump /controller_epoch in one
        multi, compare-and-set on the epoch's version (creating /controller_epoch at 0 first if
        absent). Returns (new epoch, its znode version) -- the version every later fenced write
        checks. ControllerMovedError if another broker won."""
        current = await self.get_controller_epoch()
        if current is not None:
            cur_epoch, cur_version = current[0], current[1].version
        else:
            cur_epoch, cur_version = await self._maybe_create_controller_epoch_znode()
        new_epoch = cur_epoch + 1
        log.debug("Try to create %s and increment controller epoch to %d with expected controller epoch "
                  "zkVersion %d", ControllerZNode.path, new_epoch, cur_version)
        result = await self._retry(lambda: self.zk.multi([
            CreateOp(ControllerZNode.path, ControllerZNode.encode(controller_id, timestamp_ms), ephemeral=True),
            SetDataOp(ControllerEpochZNode.path, ControllerEpochZNode.encode(new_epoch), cur_version),
        ]))
        if result.ok:
            stat = result.results[1]
            assert isinstance(stat, Stat)
            return new_epoch, stat.version
        if isinstance(result.error, NodeExistsError | BadVersionError):
            return await self._check_controller_and_epoch(controller_id, new_epoch)
        raise result.error or ZooKeeperClientError()

    async def _check_controller_and_epoch(self, controller_id: int, new_epoch: int) -> tuple[int, int]:
        """After the multi failed: did *we* succeed anyway (a retried request after connection
        loss)? Only if /controller is ours and the epoch is the one we wrote."""
        current_controller = await self.get_controller_id()
        if current_controller is None:
            raise ControllerMovedError(
                f"The ephemeral node at {ControllerZNode.path} went away while checking whether the "
                "controller election succeeds. Aborting controller startup procedure")
        if current_controller == controller_id:
            epoch = await self.get_controller_epoch()
            if epoch is None:
                raise KafkaZkError(f"{ControllerEpochZNode.path} existed before but goes away while trying to read it")
            if epoch[0] == new_epoch:
                return new_epoch, epoch[1].version
        raise ControllerMovedError("Controller moved to another broker. Aborting controller startup procedure")

    async def _maybe_create_controller_epoch_znode(self) -> tuple[int, int]:
        try:
            await self._retry(lambda: self.zk.create(
                ControllerEpochZNode.path, ControllerEpochZNode.encode(zd.INITIAL_CONTROLLER_EPOCH)))
        except NodeExistsError:
            current = await self.get_controller_epoch()
            if current is None:
                raise KafkaZkError(f"{ControllerEpochZNode.path} existed before but goes away while trying to read it") from None
            return current[0], current[1].version
        log.info("Successfully created %s with initial epoch %d", ControllerEpochZNode.path, zd.INITIAL_CONTROLLER_EPOCH)
        return zd.INITIAL_CONTROLLER_EPOCH, zd.INITIAL_CONTROLLER_EPOCH_ZK_VERSION

    async def delete_controller(self, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> None:
        """Resign: delete /controller (a missing znode is fine)."""
        try:
            await self._fenced(DeleteOp(ControllerZNode.path), expected_controller_epoch_zk_version)
        except NoNodeError:
            pass

    async def register_znode_change_handler_and_check_existence(self, handler: ZNodeChangeHandler) -> bool:
        """Register `handler` and arm an exists-watch on its path; whether the znode exists."""
        self.zk.register_znode_change_handler(handler)
        return await self._retry(lambda: self.zk.exists(handler.path, watch=True)) is not None

    # --- topics ----------------------------------------------------------------------------------

    async def get_all_topics_in_cluster(self, watch: bool = False) -> set[str]:
        return set(await self.get_children(TopicsZNode.path, watch))

    async def topic_exists(self, topic: str) -> bool:
        return await self.path_exists(TopicZNode.path(topic))

    async def create_topic_assignment(self, topic: str, topic_id: uuid.UUID | None,
                                      assignment: Mapping[int, Iterable[int]]) -> None:
        """Create /brokers/topics/<t>: NodeExistsError if the topic exists."""
        persisted = {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}
        await self.create_recursive(TopicZNode.path(topic), TopicZNode.encode(topic_id, persisted))

    async def create_topic_with_configs(self, topic: str, topic_id: uuid.UUID | None,
                                        assignment: Mapping[int, Iterable[int]], config: Mapping[str, str],
                                        registration: ZkControllerRegistration | None) -> bool:
        """A new topic's /config/topics/<t> and /brokers/topics/<t> in one multi, behind the
        check of the /controller version (`registration`, read by the caller with its other
        reads) that setOrCreateEntityConfigs makes: what Kafka's writes (the config set, then
        created, then the assignment created) leave in ZooKeeper, in one round trip instead of
        four. Why: each round trip of a topic created while this broker's controller deletes
        1,000 topics waits behind the controller's writes (issue #21). False, nothing written,
        when the multi fails (a config znode left from before, the topic there already, the
        controller changed, none or a KRaft one): the caller then makes Kafka's writes one by
        one, which give those cases Kafka's outcome and errors."""
        if registration is None or (registration.kraft_epoch is not None and registration.kraft_epoch > 0):
            return False
        persisted = {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}
        ops: list[Op] = [CheckOp(ControllerZNode.path, registration.zk_version),
                         CreateOp(ConfigEntityZNode.path(zd.ConfigType.TOPIC, topic), ConfigEntityZNode.encode(config)),
                         CreateOp(TopicZNode.path(topic), TopicZNode.encode(topic_id, persisted))]
        result = await self._retry(lambda: self.zk.multi(ops))
        return result.ok

    async def set_topic_assignment(self, topic: str, topic_id: uuid.UUID | None,
                                   assignment: Mapping[int, ReplicaAssignment],
                                   expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> None:
        await self._fenced(SetDataOp(TopicZNode.path(topic), TopicZNode.encode(topic_id, assignment), MATCH_ANY_VERSION),
                           expected_controller_epoch_zk_version)

    async def get_replica_assignment_and_topic_ids_for_topics(
            self, topics: Iterable[str]) -> dict[str, TopicIdReplicaAssignment]:
        """Each existing topic's id and assignment (topics without a znode are left out)."""
        names = list(topics)
        reads = await gather_all(self.get_data_and_stat(TopicZNode.path(t)) for t in names)
        out = {}
        for topic, r in zip(names, reads, strict=True):
            if isinstance(r, BaseException):
                raise r
            data, stat = r
            if stat is not None:
                out[topic] = TopicZNode.decode(topic, data)
        return out

    async def get_topic_assignment(self, topic: str) -> TopicIdReplicaAssignment | None:
        return (await self.get_replica_assignment_and_topic_ids_for_topics([topic])).get(topic)

    async def get_topic_partitions(self, topic: str) -> list[int]:
        return sorted(int(p) for p in await self.get_children(TopicPartitionsZNode.path(topic)))

    async def create_topic_partition_states(
            self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
            expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION,
    ) -> dict[TopicPartition, Exception | None]:
        """Create each partition's state znode (and the `partitions` and `partitions/<p>` znodes
        above it, null data), fenced: per partition None when created, else the error
        (NodeExistsError if it was already there)."""
        tps = list(states)
        topics = list(dict.fromkeys(t for t, _ in tps))
        # the containers: "already there" is fine
        await self._fenced_batch([CreateOp(TopicPartitionsZNode.path(t)) for t in topics],
                                 expected_controller_epoch_zk_version)
        await self._fenced_batch([CreateOp(TopicPartitionZNode.path(t, p)) for t, p in tps],
                                 expected_controller_epoch_zk_version)
        results = await self._fenced_batch(
            [CreateOp(TopicPartitionStateZNode.path(t, p), TopicPartitionStateZNode.encode(states[(t, p)]))
             for t, p in tps], expected_controller_epoch_zk_version)
        return {tp: (r if isinstance(r, Exception) else None) for tp, r in zip(tps, results, strict=True)}

    async def get_topic_partition_states(
            self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Each partition's leader, ISR and controller epoch, with the znode version as partition
        epoch; partitions without a (readable) state are left out."""
        tps = list(partitions)
        reads = await gather_all(self.get_data_and_stat(TopicPartitionStateZNode.path(t, p)) for t, p in tps)
        out = {}
        for tp, r in zip(tps, reads, strict=True):
            if isinstance(r, BaseException):
                raise r
            data, stat = r
            if stat is not None and (state := TopicPartitionStateZNode.decode(data, stat.version)) is not None:
                out[tp] = state
        return out

    async def update_leader_and_isr(
            self, leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int,
            expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION,
    ) -> UpdateLeaderAndIsrResult:
        """Compare-and-set each partition's state on its partition epoch (= the version the caller
        read). Written ones come back with their new partition epoch; a lost race goes to
        `partitions_to_retry`; ControllerMovedError if this controller was fenced."""
        tps = list(leader_and_isrs)
        ops: list[Op] = [
            SetDataOp(TopicPartitionStateZNode.path(t, p),
                      TopicPartitionStateZNode.encode(LeaderIsrAndControllerEpoch(leader_and_isrs[(t, p)], controller_epoch)),
                      leader_and_isrs[(t, p)].partition_epoch)
            for t, p in tps]
        results = await self._fenced_batch(ops, expected_controller_epoch_zk_version)
        out = UpdateLeaderAndIsrResult()
        for tp, r in zip(tps, results, strict=True):
            if isinstance(r, BadVersionError):
                out.partitions_to_retry.append(tp)
            elif isinstance(r, Exception):
                out.finished_partitions[tp] = r
            else:
                assert isinstance(r, Stat)
                out.finished_partitions[tp] = leader_and_isrs[tp].with_partition_epoch(r.version)
        return out

    # --- topic deletion --------------------------------------------------------------------------

    async def create_delete_topic_path(self, topic: str) -> None:
        """Ask for a topic's deletion: /admin/delete_topics/<t> with null data."""
        await self.create_recursive(DeleteTopicsTopicZNode.path(topic))

    async def create_delete_topic_paths(self, topics: Sequence[str]) -> set[str]:
        """Ask for many topics' deletion at once: /admin/delete_topics/<t> with null data for
        each, in one multi per MARKS_PER_MULTI topics, the multis pipelined. Why: created one by
        one, 1,000 marks are 1,000 round trips, and every other write of this broker's session
        (a new topic's) waits behind them. ZooKeeper ends up holding what Kafka's one-by-one
        creates leave; a multi that fails (a topic marked already, the parent missing) is redone
        znode by znode. Returns the topics that were marked already."""
        chunks = [list(topics[i:i + MARKS_PER_MULTI]) for i in range(0, len(topics), MARKS_PER_MULTI)]
        results = await gather_all(
            self._retry(lambda c=c: self.zk.multi([CreateOp(DeleteTopicsTopicZNode.path(t), None) for t in c]))
            for c in chunks)
        redo = [t for c, r in zip(chunks, results, strict=True)
                if not (isinstance(r, MultiResult) and r.ok) for t in c]
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, Exception):
                raise r
        marked_already: set[str] = set()
        one_by_one = await gather_all(self.create_recursive(DeleteTopicsTopicZNode.path(t)) for t in redo)
        for topic, r in zip(redo, one_by_one, strict=True):
            if isinstance(r, NodeExistsError):
                marked_already.add(topic)
            elif isinstance(r, BaseException):
                raise r
        return marked_already

    async def get_topic_deletions(self, watch: bool = False) -> list[str]:
        return await self.get_children(DeleteTopicsZNode.path, watch)

    async def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return await self.path_exists(DeleteTopicsTopicZNode.path(topic))

    async def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        results = await self._fenced_batch([DeleteOp(DeleteTopicsTopicZNode.path(t)) for t in topics],
                                           expected_controller_epoch_zk_version)
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, NoNodeError):
                raise r

    async def delete_topic_znodes(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        """/brokers/topics/<t> with its partition states, for every topic at once (pipelined)."""
        _raise_first(await gather_all(self.delete_recursive(TopicZNode.path(t), expected_controller_epoch_zk_version)
                                      for t in topics))

    async def delete_topics_in_one_multi_each(self, topics: Mapping[str, Iterable[int]],
                                              expected_controller_epoch_zk_version: int) -> list[str]:
        """Delete each topic's znodes -- its partitions' state znodes, /brokers/topics/<t>,
        /config/topics/<t> and /admin/delete_topics/<t> -- in one multi per topic behind the
        controller epoch check, the multis of all topics pipelined. Why: znode by znode a topic
        costs ten round trips, one after another. Returns the topics whose multi failed (a znode
        missing, say no config, or one not known here): nothing of those was deleted, and the
        caller deletes them znode by znode. ControllerMovedError if this controller was fenced."""
        if expected_controller_epoch_zk_version < 0:
            raise ValueError("the deletion of topics is fenced by the controller epoch")
        names = list(topics)

        def ops(topic: str) -> list[Op]:
            partitions = sorted(topics[topic])
            return [CheckOp(ControllerEpochZNode.path, expected_controller_epoch_zk_version),
                    *(DeleteOp(p) for n in partitions
                      for p in (TopicPartitionStateZNode.path(topic, n), TopicPartitionZNode.path(topic, n))),
                    DeleteOp(TopicPartitionsZNode.path(topic)), DeleteOp(TopicZNode.path(topic)),
                    DeleteOp(ConfigEntityZNode.path(zd.ConfigType.TOPIC, topic)),
                    DeleteOp(DeleteTopicsTopicZNode.path(topic))]

        results = await gather_all(self._retry(lambda t=t: self.zk.multi(ops(t))) for t in names)  # type: ignore[misc]
        failed: list[str] = []
        for topic, r in zip(names, results, strict=True):
            if isinstance(r, BaseException):
                if not isinstance(r, Exception):
                    raise r
                failed.append(topic)
            elif not r.ok:
                if isinstance(r.results[0], BadVersionError):
                    raise ControllerMovedError(
                        "Controller epoch zkVersion check fails. Expected zkVersion = "
                        f"{expected_controller_epoch_zk_version}")
                log.debug("Deleting topic %s in one multi failed (%s); deleting it znode by znode", topic, r.error)
                failed.append(topic)
        return failed

    async def delete_topic_znode(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        await self.delete_topic_znodes([topic], expected_controller_epoch_zk_version)

    async def delete_topic_configs(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        results = await self._fenced_batch(
            [DeleteOp(ConfigEntityZNode.path(zd.ConfigType.TOPIC, t)) for t in topics],
            expected_controller_epoch_zk_version)
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, NoNodeError):
                raise r

    # --- log dir event notifications (a broker lost a log dir) ------------------------------------

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        """A broker tells the controller it lost a log dir (Kafka's propagateLogDirEvent):
        `/log_dir_event_notification/log_dir_event_<seq>` (persistent sequential) with
        {"version":1,"broker":<id>,"event":1}; returns the path created."""
        return await self._retry(lambda: self.zk.create(
            zd.LogDirEventNotificationSequenceZNode.path(""),
            zd.LogDirEventNotificationSequenceZNode.encode(broker_id), sequential=True))

    async def get_all_log_dir_event_notifications(self) -> list[str]:
        """The sequence numbers of the pending notifications, watched (the controller's child
        change handler fires at the next one)."""
        children = await self.get_children(zd.LogDirEventNotificationZNode.path, watch=True)
        return sorted(zd.LogDirEventNotificationSequenceZNode.sequence_number(c) for c in children)

    async def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        """The broker of each notification (one gone or unreadable meanwhile is skipped)."""
        out = []
        for seq in sequence_numbers:
            data, _ = await self.get_data_and_stat(zd.LogDirEventNotificationSequenceZNode.path(seq))
            try:
                broker = zd.LogDirEventNotificationSequenceZNode.decode(data)
            except zd.ZkDataError as e:
                log.warning("Ignoring the unreadable log dir event notification %s: %s", seq, e)
                continue
            if broker is not None:
                out.append(broker)
        return out

    async def delete_log_dir_event_notifications(self, sequence_numbers: Iterable[str] | None,
                                                 expected_controller_epoch_zk_version: int) -> None:
        """Delete the given notifications (None: all of them), as the controller that read them."""
        if sequence_numbers is None:
            sequence_numbers = [zd.LogDirEventNotificationSequenceZNode.sequence_number(c) for c in
                                await self.get_children(zd.LogDirEventNotificationZNode.path)]
        results = await self._fenced_batch(
            [DeleteOp(zd.LogDirEventNotificationSequenceZNode.path(s)) for s in sequence_numbers],
            expected_controller_epoch_zk_version)
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, NoNodeError):
                raise r

    # --- /admin/reassign_partitions (deprecated since 2.4; a 3.9 controller still honours it) ----

    async def reassign_partitions_in_progress(self) -> bool:
        return await self.path_exists(ReassignPartitionsZNode.path)

    async def get_partition_reassignment(self) -> dict[tuple[str, int], list[int]]:
        """The znode's {(topic, partition): target replicas}; empty if absent. Kafka logs and
        ignores a znode it cannot parse (empty too)."""
        data, stat = await self.get_data_and_stat(ReassignPartitionsZNode.path)
        if stat is None:
            return {}
        try:
            return ReassignPartitionsZNode.decode(data)
        except zd.ZkDataError as e:
            log.warning("Ignoring partition reassignment due to invalid json: %s", e)
            return {}

    async def set_or_create_partition_reassignment(self, reassignment: Mapping[tuple[str, int], list[int]],
                                                   expected_controller_epoch_zk_version: int) -> None:
        data = ReassignPartitionsZNode.encode(reassignment)
        try:
            await self._fenced(SetDataOp(ReassignPartitionsZNode.path, data, MATCH_ANY_VERSION),
                               expected_controller_epoch_zk_version)
        except NoNodeError:
            await self._fenced(CreateOp(ReassignPartitionsZNode.path, data), expected_controller_epoch_zk_version)

    async def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> None:
        try:
            await self._fenced(DeleteOp(ReassignPartitionsZNode.path), expected_controller_epoch_zk_version)
        except NoNodeError:
            pass

    # --- configs ---------------------------------------------------------------------------------

    async def get_entity_configs(self, entity_type: str, sanitized_name: str) -> dict[str, str]:
        data, _ = await self.get_data_and_stat(ConfigEntityZNode.path(entity_type, sanitized_name))
        return ConfigEntityZNode.decode(data)

    async def get_entity_configs_and_version(self, entity_type: str, sanitized_name: str
                                             ) -> tuple[dict[str, str], int | None]:
        """An entity's overrides and its znode's version (None: no znode), for a
        read-modify-write that must not lose a concurrent writer's keys."""
        data, stat = await self.get_data_and_stat(ConfigEntityZNode.path(entity_type, sanitized_name))
        return ConfigEntityZNode.decode(data), None if stat is None else stat.version

    async def set_entity_configs_conditionally(self, entity_type: str, sanitized_name: str,
                                               config: Mapping[str, str], version: int | None) -> bool:
        """Write an entity's overrides only if its znode is still at `version` (None: only if it
        still does not exist): a conditional setData, or a create. False when another writer got
        there first (BadVersion, NodeExists, NoNode): the caller reads again and retries."""
        path = ConfigEntityZNode.path(entity_type, sanitized_name)
        payload = ConfigEntityZNode.encode(config)
        try:
            if version is None:
                await self.create_recursive(path, payload)
            else:
                await self._retry(lambda: self.zk.set_data(path, payload, version))
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        return True

    async def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return await self.get_children(ConfigEntityTypeZNode.path(entity_type))

    async def set_or_create_entity_configs(self, entity_type: str, sanitized_name: str,
                                           config: Mapping[str, str], controller_check: bool = True) -> None:
        """Write an entity's config overrides (create the znode if absent). With
        `controller_check` (Kafka 3.9's enableEntityConfigControllerCheck, on for brokers) a
        controller must exist, must not be a KRaft one, and must not change during the write:
        the set is a multi with a version check on /controller (ControllerMovedError)."""
        path = ConfigEntityZNode.path(entity_type, sanitized_name)
        payload = ConfigEntityZNode.encode(config)
        controller_version: int | None = None
        if controller_check:
            registration = await self.get_controller_registration()
            if registration is None:
                raise ControllerMovedError(
                    f"Cannot set entity configs for {entity_type} {sanitized_name} when there is no controller.")
            if registration.kraft_epoch is not None and registration.kraft_epoch > 0:
                raise ControllerMovedError(
                    f"Cannot set entity configs for {entity_type} {sanitized_name} directly when there is a KRaft controller.")
            controller_version = registration.zk_version

        async def set_data() -> None:
            if controller_version is None:
                await self._retry(lambda: self.zk.set_data(path, payload, MATCH_ANY_VERSION))
                return
            result = await self._retry(lambda: self.zk.multi(
                [CheckOp(ControllerZNode.path, controller_version), SetDataOp(path, payload, MATCH_ANY_VERSION)]))
            check, value = result.results
            if isinstance(check, BadVersionError):
                raise ControllerMovedError(f"Controller epoch zkVersion check fails. Expected zkVersion = {controller_version}")
            if isinstance(check, ZooKeeperClientError) and not _rolled_back(check):
                raise check
            if isinstance(value, ZooKeeperClientError):
                raise value

        try:
            await set_data()
        except NoNodeError:
            try:
                await self.create_recursive(path, payload)
            except NodeExistsError:
                await set_data()

    async def create_config_change_notification(self, sanitized_entity_path: str) -> str:
        """/config/changes/config_change_<seq> telling brokers to re-read `entity_path`
        ("topics/t"); returns the created path."""
        await self.make_sure_persistent_path_exists(zd.ConfigEntityChangeNotificationZNode.path)
        return await self._retry(lambda: self.zk.create(
            ConfigEntityChangeNotificationSequenceZNode.create_path,
            ConfigEntityChangeNotificationSequenceZNode.encode(sanitized_entity_path), sequential=True))

    async def change_entity_config(self, entity_type: str, sanitized_name: str, config: Mapping[str, str],
                                   controller_check: bool = True) -> str:
        """AdminZkClient.changeEntityConfig: write the overrides, then the change notification."""
        await self.set_or_create_entity_configs(entity_type, sanitized_name, config, controller_check)
        return await self.create_config_change_notification(f"{entity_type}/{sanitized_name}")

    # --- cluster id, producer ids, features ------------------------------------------------------

    async def get_cluster_id(self) -> str | None:
        data, stat = await self.get_data_and_stat(ClusterIdZNode.path)
        return None if stat is None else ClusterIdZNode.from_json(data)

    async def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """The cluster's id: `proposed_cluster_id` if this call created /cluster/id, else the one
        already there (first broker wins)."""
        try:
            await self.create_recursive(ClusterIdZNode.path, ClusterIdZNode.to_json(proposed_cluster_id))
            return proposed_cluster_id
        except NodeExistsError:
            cluster_id = await self.get_cluster_id()
            if cluster_id is None:
                raise KafkaZkError("Failed to get cluster id from Zookeeper. This can happen if /cluster/id "
                                   "is deleted from Zookeeper.") from None
            return cluster_id

    async def get_new_producer_id_block(self, broker_id: int) -> ProducerIdsBlock:
        """ZkProducerIdManager.getNewProducerIdBlock: read /latest_producer_id_block, write the next
        block of 1000 ids with compare-and-set on the version, re-read and retry if another broker
        (or controller) won the race."""
        await self.make_sure_persistent_path_exists(ProducerIdBlockZNode.path)
        for _ in range(MAX_CAS_ATTEMPTS):
            data, version = await self.get_data_and_version(ProducerIdBlockZNode.path)
            if data:
                current = ProducerIdBlockZNode.parse_producer_id_block_data(data)
                if current.last_producer_id > 2**63 - 1 - zd.PRODUCER_ID_BLOCK_SIZE:
                    raise KafkaZkError("Have exhausted all producerIds.")
                block = ProducerIdsBlock(broker_id, current.next_block_first_id(), zd.PRODUCER_ID_BLOCK_SIZE)
            else:
                block = ProducerIdsBlock(broker_id, 0, zd.PRODUCER_ID_BLOCK_SIZE)
            ok, new_version = await self.conditional_update_path(
                ProducerIdBlockZNode.path, ProducerIdBlockZNode.generate_producer_id_block_json(block), version)
            if ok:
                log.info("Acquired new producerId block %s by writing to Zk with path version %d", block, new_version)
                return block
        raise KafkaZkError(f"Could not allocate a producer id block in {MAX_CAS_ATTEMPTS} attempts")

    async def get_feature_znode(self) -> tuple[FeatureZNode, int] | None:
        data, stat = await self.get_data_and_stat(FeatureZNode.path)
        return None if stat is None else (FeatureZNode.decode(data), stat.version)

    async def create_feature_znode(self, node: FeatureZNode) -> None:
        await self._retry(lambda: self.zk.create(FeatureZNode.path, FeatureZNode.encode(node)))


def _raise_first(results: Iterable[object]) -> None:
    """Raise the first error of a pipelined batch once all of it is done: a fenced controller's
    ControllerMovedError before any other."""
    errors = [r for r in results if isinstance(r, BaseException)]
    for e in errors:
        if isinstance(e, ControllerMovedError) or not isinstance(e, Exception):
            raise e
    if errors:
        raise errors[0]


def _rolled_back(err: ZooKeeperClientError) -> bool:
    return err.code == "ROLLEDBACK"


def random_cluster_id() -> str:
    """A new cluster id as Kafka makes one (Uuid.randomUuid().toString: 22 base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
