"""Controller: what the broker may ask of whichever controller runs (Kafka's ``KafkaController``
seen from ``KafkaApis`` / ``ZkAdminManager``).

The broker never reaches into a concrete controller (DESIGN.md §1): handlers read the broker's
MetadataCache and ask the controller for changes through this interface. Two implementations:
``controller.metadata.EmbeddedController`` (single node, metadata in a file) and the
ZooKeeper-backed controller of a cluster.

The shape is the one request handlers need: a change is *started* by a plain call, which
validates it and raises KafkaProtocolError with Kafka's error code when it cannot be made, and
returns the resulting state; :meth:`Controller.committed` is then awaited once per request before
it is answered, so a CreateTopics of a hundred topics waits for one write, not a hundred, and
what a client was told exists is durable and served (a failed write raises StorageError there).
Producer ids come from blocks a cluster allocates centrally, hence a coroutine.
"""

from __future__ import annotations

from typing import Any, Protocol

from controller.image import Listener, TopicState

__all__ = ["ClusterController", "Controller"]


class Controller(Protocol):
    def add_listener(self, listener: Listener) -> None:
        """Be told of every topic change (created, deleted, changed) this broker must apply."""

    def validate_new_topic(self, name: str, num_partitions: int, replication_factor: int) -> None:
        """Raise as :meth:`create_topic` would, change nothing (validate_only)."""

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> TopicState: ...

    def delete_topic(self, name: str) -> TopicState: ...

    def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> TopicState: ...

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicState: ...

    def set_broker_configs(self, configs: dict[str, str], cluster_default: bool = False) -> None:
        """This broker's dynamic configs, or (`cluster_default`) the whole cluster's."""

    async def alter_client_quota(self, entity: Any, ops: list[tuple[str, float, bool]]) -> dict[str, str]:
        """AlterClientQuotas for one entity (broker.quota.entity.Entity): its stored configs after
        the (key, value, remove) ops; raises KafkaProtocolError for an invalid op."""

    async def client_quota_configs(self) -> dict[Any, dict[str, str]]:
        """Every quota entity's stored configs (DescribeClientQuotas)."""

    async def allocate_producer_id(self) -> int: ...

    async def committed(self) -> None:
        """Wait until every change started so far is durable and applied."""

    def close(self) -> None: ...


class ClusterController(Controller, Protocol):
    """What only a cluster's controller answers (the ZooKeeper-mode requests between brokers and
    the controller). Each is answered by the *active* controller; any other broker's raises (or
    answers) NOT_CONTROLLER so that the asking broker or client looks the controller up again."""

    @property
    def is_active_controller(self) -> bool: ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[tuple[str, int]]:
        """ControlledShutdown: move the broker's leaderships away; the partitions it still leads.
        Raises KafkaProtocolError (NOT_CONTROLLER, STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE)."""

    async def alter_partition(self, request: Any, version: int) -> Any:
        """AlterPartition from a leader: the AlterPartitionResponse."""

    async def elect_leaders(self, partitions: Any, election_type: str) -> dict[Any, Any]:
        """ElectLeaders ("PREFERRED" or "UNCLEAN"): per (topic, partition) the leader elected, or
        (error code, message)."""

    async def alter_partition_reassignments(self, reassignments: dict[tuple[str, int], list[int] | None]) -> Any:
        """AlterPartitionReassignments ({partition: target replicas, None cancels}): per partition
        (error code, message), or (error code, message) for the whole request."""

    async def list_partition_reassignments(self, partitions: Any) -> Any:
        """ListPartitionReassignments (None: all): per partition being reassigned its
        ReplicaAssignment, or (error code, message) for the whole request."""
