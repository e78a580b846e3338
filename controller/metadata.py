"""The single-node controller.

Why this seam: handlers and the ReplicaManager only read the broker's MetadataCache (the
`MetadataImage` types of controller.image) and ask a controller for changes through
controller.interface.Controller (create/delete topics, add partitions, alter configs, allocate
producer ids). In single-node mode `EmbeddedController` is that controller: the node is its own
controller and keeps the metadata in one JSON file in the first log dir, replaced atomically
(write temp, fsync, rename, fsync dir) so a crash leaves either the old or the new state. The
ZooKeeper-backed controller implements the same interface and feeds the same cache.

Persistence never blocks the event loop: a mutation changes the in-memory image at once, tells
the listeners, and hands the file write (two fsyncs) to a one-thread executor, so writes land in
order and each holds the whole image as of its mutation. A listener may return an awaitable for
its own file work (the ReplicaManager creating or deleting logs). A request handler that changed
something awaits :meth:`EmbeddedController.committed` before it answers, so what a client has
been told exists is on disk and served -- the CreateTopics answer awaits a future, the loop does
not wait for the disk.

Topic-name rules, partition limits and error codes follow Kafka's (`Topic.validate`,
`AdminUtils`): names of 1-249 characters from [a-zA-Z0-9._-], not "." or "..".
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from broker.quota.admin import apply_ops
from broker.quota.entity import Entity, parse_entity, zk_entity
from broker.sasl.scram import CredentialCache
from broker.security.acl import AccessControlEntry, ResourcePattern, acls_from_json, acls_to_json
from controller.image import (
    BrokerInfo,
    Listener,
    MetadataImage,
    PartitionState,
    TopicState,
    validate_topic_name,
)
from protocol.errors import ErrorCode, KafkaProtocolError
from storage.checkpoints import atomic_write
from storage.errors import StorageError

log = logging.getLogger("odradek.controller")

METADATA_FILE = "__odradek_metadata.json"
Entries = frozenset[AccessControlEntry]
PRODUCER_ID_BLOCK = 1000
class EmbeddedController:
    """The single node's own controller: owns the metadata image and its file.

    Called only from the event loop. Mutations are written by a one-thread executor (in
    order); handlers await :meth:`committed` before answering, so what a client has been told
    exists survives a crash. Without a running loop (tools, unit tests) writes are synchronous."""

    def __init__(self, log_dir: Path, broker: BrokerInfo, cluster_id: str | None = None) -> None:
        self.path = Path(log_dir) / METADATA_FILE
        self.broker = broker
        self.listeners: list[Listener] = []
        self.next_producer_id = 0
        self.producer_id_limit = 0
        self.image = MetadataImage(cluster_id=cluster_id or _new_cluster_id(), controller_id=broker.broker_id)
        # the ACLs of the single node's authorizer (broker.security.acl_store.EmbeddedAclStore)
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # client quotas by entity (broker.quota.entity: sanitized names, `<default>`), as
        # ZooKeeper would hold them under /config/users and /config/clients
        self.client_quotas: dict[Entity, dict[str, str]] = {}
        # SCRAM credentials by user name, each {mechanism: `salt=...,stored_key=...,server_key=...,
        # iterations=...`} as ZooKeeper's /config/users/<user> holds them (EmbeddedScramCredentialStore)
        self.scram_credentials: dict[str, dict[str, str]] = {}
        if self.path.exists():
            self._load()
        self.image.brokers = {broker.broker_id: broker}
        self.image.controller_id = broker.broker_id
        self._writer: ThreadPoolExecutor | None = None  # created on the first asynchronous save
        self._pending: set[asyncio.Future[Any]] = set()  # saves and listener work not yet done
        self._saves: set[asyncio.Future[Any]] = set()  # the saves among them
        self._unsaved = False  # the latest save failed: the image on disk is behind

    # -- persistence --------------------------------------------------------------------------

    def _load(self) -> None:
        data = json.loads(self.path.read_text())
        self.image.cluster_id = data["cluster_id"]
        self.image.broker_configs = dict(data.get("broker_configs", {}))
        self.producer_id_limit = self.next_producer_id = int(data.get("producer_id_limit", 0))
        self.acls = acls_from_json(data.get("acls", []))
        self.client_quotas = {parse_entity(q["entity_type"], q["entity"]): dict(q["config"])
                              for q in data.get("client_quotas", [])}
        self.scram_credentials = {u: dict(c) for u, c in data.get("scram_credentials", {}).items()}
        for t in data.get("topics", []):
            parts = {
                int(p["partition"]): PartitionState(
                    partition=int(p["partition"]),
                    replicas=list(p["replicas"]),
                    leader=int(p["leader"]),
                    leader_epoch=int(p["leader_epoch"]),
                    isr=list(p["isr"]),
                    partition_epoch=int(p.get("partition_epoch", 0)),
                )
                for p in t["partitions"]
            }
            self.image.topics[t["name"]] = TopicState(
                name=t["name"], topic_id=uuid.UUID(t["topic_id"]), partitions=parts, configs=dict(t["configs"])
            )

    def _save(self) -> None:
        data = {
            "version": 1,
            "cluster_id": self.image.cluster_id,
            "broker_configs": self.image.broker_configs,
            "producer_id_limit": self.producer_id_limit,
            "acls": acls_to_json(self.acls),
            "client_quotas": [{"entity_type": t, "entity": e, "config": c}
                              for (t, e), c in ((zk_entity(k), v) for k, v in self.client_quotas.items())],
            "scram_credentials": self.scram_credentials,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "configs": t.configs,
                    "partitions": [
                        {
                            "partition": p.partition,
                            "replicas": p.replicas,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "isr": p.isr,
                            "partition_epoch": p.partition_epoch,
                        }
                        for p in sorted(t.partitions.values(), key=lambda p: p.partition)
                    ],
                }
                for t in sorted(self.image.topics.values(), key=lambda t: t.name)
            ],
        }
        payload = json.dumps(data, indent=1, sort_keys=True).encode()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (tools, unit tests): write now
            atomic_write(self.path, payload)
            return
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="metadata-store")
        save = loop.run_in_executor(self._writer, atomic_write, self.path, payload)
        self._saves.add(save)
        self._track(save)

    def _notify(self, event: str, topic: TopicState) -> None:
        for listener in self.listeners:
            work = listener(event, topic)
            if work is not None:
                self._track(asyncio.ensure_future(work))

    def _track(self, fut: asyncio.Future[Any]) -> None:
        self._pending.add(fut)
        fut.add_done_callback(self._done)

    def _done(self, fut: asyncio.Future[Any]) -> None:
        self._pending.discard(fut)
        failed = not fut.cancelled() and fut.exception() is not None
        if fut in self._saves:  # saves finish in order, each with the whole image
            self._saves.discard(fut)
            self._unsaved = failed
        if failed:
            log.error("metadata change not applied: %r", fut.exception())

    async def committed(self) -> None:
        """Wait until every change made so far is in the metadata file and applied by the
        listeners (logs created or deleted); any number of requests may wait at once. A failed
        write (a full disk) raises StorageError here, for the request that waits to answer
        KAFKA_STORAGE_ERROR for what it changed rather than claim a change that is not durable;
        the next wait writes the image again (the in-memory change stands: a retry finds it,
        durable once a write succeeds). Other errors raise as they are (a listener's bug)."""
        if self._unsaved and not self._saves:
            self._unsaved = False
            self._save()
        if not self._pending:
            return
        # asyncio.wait, not gather: a waiter cancelled (its client went away) must not cancel
        # the write or the log creation other requests wait for too
        done, _ = await asyncio.wait(list(self._pending))
        for fut in done:
            exc = None if fut.cancelled() else fut.exception()
            if isinstance(exc, OSError):
                raise StorageError(f"The metadata change could not be written: {exc}") from exc
            if exc is not None:
                raise exc

    def close(self) -> None:
        """Stop the writer thread after its queued writes (shutdown, after :meth:`committed`)."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    # -- topics ---------------------------------------------------------------------------------

    def validate_new_topic(self, name: str, num_partitions: int, replication_factor: int) -> None:
        validate_topic_name(name)
        if name in self.image.topics:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        # '.' and '_' map to the same character in metric names (Kafka's Topic.hasCollision)
        unified = name.replace(".", "_")
        for other in self.image.topics:
            if other.replace(".", "_") == unified:
                raise KafkaProtocolError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}"
                )
        if num_partitions < 1:
            raise KafkaProtocolError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise KafkaProtocolError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        if replication_factor > len(self.image.brokers):
            raise KafkaProtocolError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): "
                f"The target replication factor of {replication_factor} cannot be reached because "
                f"only {len(self.image.brokers)} broker(s) are registered.",
            )

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> TopicState:
        if assignments:
            num_partitions = len(assignments)
            replication_factor = len(next(iter(assignments.values())))
            for p, replicas in assignments.items():
                unknown = [r for r in replicas if r not in self.image.brokers]
                if unknown:
                    raise KafkaProtocolError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Replica assignment for partition {p} names unknown brokers {unknown}.",
                    )
                if len(set(replicas)) != len(replicas):
                    raise KafkaProtocolError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers in partition {p} assignment."
                    )
        self.validate_new_topic(name, num_partitions, replication_factor)
        me = self.broker.broker_id
        parts = {}
        for p in range(num_partitions):
            replicas = assignments[p] if assignments else [me]
            parts[p] = PartitionState(partition=p, replicas=list(replicas), leader=replicas[0], isr=list(replicas))
        topic = TopicState(name=name, topic_id=uuid.uuid4(), partitions=parts, configs=dict(configs or {}))
        self.image.topics[name] = topic
        self._save()
        self._notify("created", topic)
        return topic

    def adopt_topic(
        self, name: str, topic_id: uuid.UUID, num_partitions: int, latest_epochs: Mapping[int, int] | None = None
    ) -> TopicState:
        """Register a topic whose partition logs were found on disk but which this store does not
        know (partition dirs copied from another Kafka broker): its id stays the one the logs'
        `partition.metadata` name, every partition is led by this node, and no config override
        is known (Kafka keeps topic configs in its metadata log or ZooKeeper, not beside the
        data). Taking over leadership starts a new leader epoch, above the latest one a log
        holds (`latest_epochs`): epochs never go back, or OffsetForLeaderEpoch would place the
        new records inside an old epoch and clients would see a truncation. Called at startup,
        before the ReplicaManager hosts the topics, so nobody is told."""
        validate_topic_name(name)
        if name in self.image.topics:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if self.image.topic_by_id(topic_id) is not None:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic id {topic_id} is taken.")
        me = self.broker.broker_id
        epochs = latest_epochs or {}
        parts = {
            p: PartitionState(partition=p, replicas=[me], leader=me, leader_epoch=epochs.get(p, -1) + 1,
                              isr=[me], partition_epoch=epochs.get(p, -1) + 1)
            for p in range(num_partitions)
        }
        topic = TopicState(name=name, topic_id=topic_id, partitions=parts)
        self.image.topics[name] = topic
        self._save()
        return topic

    def delete_topic(self, name: str) -> TopicState:
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} not found.")
        del self.image.topics[name]
        self._save()
        self._notify("deleted", topic)
        return topic

    def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> TopicState:
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} not found.")
        current = len(topic.partitions)
        if total <= current:
            raise KafkaProtocolError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested {total}.",
            )
        if assignments is not None and len(assignments) != total - current:
            raise KafkaProtocolError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {total - current} but {len(assignments)} "
                "assignments provided.",
            )
        for i, replicas in enumerate(assignments or ()):
            unknown = [r for r in replicas if r not in self.image.brokers]
            if unknown or not replicas or len(set(replicas)) != len(replicas):
                raise KafkaProtocolError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment {replicas} of new partition {current + i} "
                    "names unknown or repeated brokers, or none.",
                )
        for i, p in enumerate(range(current, total)):
            replicas = assignments[i] if assignments else [self.broker.broker_id]
            topic.partitions[p] = PartitionState(partition=p, replicas=list(replicas), leader=replicas[0], isr=list(replicas))
        self._save()
        self._notify("changed", topic)
        return topic

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicState:
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} not found.")
        topic.configs = dict(configs)
        self._save()
        self._notify("changed", topic)
        return topic

    def set_broker_configs(self, configs: dict[str, str], cluster_default: bool = False) -> None:
        """A single node's dynamic configs are the cluster's: `cluster_default` changes nothing."""
        self.image.broker_configs = dict(configs)
        self._save()

    async def alter_client_quota(self, entity: Entity, ops: list[tuple[str, float, bool]]) -> dict[str, str]:
        """An AlterClientQuotas entry: the entity's configs after `ops` (broker.quota.admin.apply_ops,
        which raises KafkaProtocolError), durable once :meth:`committed` returns."""
        config = apply_ops(self.client_quotas.get(entity, {}), ops)
        if config:
            self.client_quotas[entity] = config
        else:
            self.client_quotas.pop(entity, None)
        self._save()
        return config

    async def client_quota_configs(self) -> dict[Entity, dict[str, str]]:
        return {e: dict(c) for e, c in self.client_quotas.items()}

    def set_scram_credentials(self, user: str, credentials: dict[str, str]) -> None:
        """A user's SCRAM credentials by mechanism (none: the user is removed); durable once
        :meth:`committed` returns."""
        if credentials:
            self.scram_credentials[user] = dict(credentials)
        else:
            self.scram_credentials.pop(user, None)
        self._save()

    # -- listeners ------------------------------------------------------------------------------

    def set_acls(self, resource: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """A resource's ACL entries (none: removed); durable once :meth:`committed` returns."""
        if entries:
            self.acls[resource] = entries
        else:
            self.acls.pop(resource, None)
        self._save()

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event, topic)`` after every topic change (created, deleted, changed)."""
        self.listeners.append(listener)

    # -- producer ids -----------------------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        """The next producer id (InitProducerId); see :meth:`allocate_producer_id_now`."""
        return self.allocate_producer_id_now()

    def allocate_producer_id_now(self) -> int:
        """Producer ids come from blocks persisted before use (Kafka's ProducerIdManager), so a
        restart never hands out an id twice."""
        if self.next_producer_id >= self.producer_id_limit:
            self.producer_id_limit = max(self.producer_id_limit, self.next_producer_id) + PRODUCER_ID_BLOCK
            self._save()
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid

    def reserve_producer_ids_through(self, producer_id: int) -> None:
        """Never hand out `producer_id` or a lower id: the logs' producer state still knows them
        (logs adopted from another broker, whose ids came from that broker's allocator; a new
        producer given one of them would be refused as out of sequence). Kafka's ZooKeeper to
        KRaft migration carries the producer-id block over for the same reason."""
        if producer_id >= self.next_producer_id:
            self.next_producer_id = producer_id + 1
            self.producer_id_limit = max(self.producer_id_limit, self.next_producer_id)
            self._save()


class EmbeddedAclStore:
    """The single node's ACL store (broker.security.authorizer.AclStore): the ACLs live in the
    EmbeddedController's metadata file (`acls`, each resource's entries as ZooKeeper holds them),
    durable once the controller's `committed()` returns, which the ACL handlers await."""

    def __init__(self, controller: EmbeddedController) -> None:
        self.controller = controller

    async def load(self) -> dict[ResourcePattern, Entries]:
        return dict(self.controller.acls)

    async def update(self, resource: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries:
        new = change(self.controller.acls.get(resource, frozenset()))
        self.controller.set_acls(resource, new)
        return new


class EmbeddedScramCredentialStore:
    """The single node's SCRAM credentials (broker.sasl.credential_store.ScramCredentialStore): in
    the EmbeddedController's metadata file (`scram_credentials`, in the form Kafka writes to
    ZooKeeper), durable once the controller's `committed()` returns, which the
    AlterUserScramCredentials handler awaits. A change goes into the broker's CredentialCache at
    once: no other broker is told."""

    def __init__(self, controller: EmbeddedController, cache: CredentialCache) -> None:
        self.controller = controller
        self.cache = cache

    def load(self) -> None:
        """The stored credentials into the cache (at start)."""
        for user, credentials in self.controller.scram_credentials.items():
            for mechanism in self.cache.update_user(user, credentials):
                log.error("Invalid %s credential of user %s in the metadata file: left out", mechanism, user)

    async def users(self) -> list[str]:
        return sorted(self.controller.scram_credentials)

    async def credentials(self, user: str) -> dict[str, str]:
        return dict(self.controller.scram_credentials.get(user, {}))

    async def set_credentials(self, user: str, credentials: dict[str, str]) -> None:
        self.controller.set_scram_credentials(user, credentials)
        self.cache.update_user(user, credentials)


def _new_cluster_id() -> str:
    """A cluster id in Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
