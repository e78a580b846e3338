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

from typing import Protocol

from controller.image import Listener, TopicState

__all__ = ["Controller"]


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

    def set_broker_configs(self, configs: dict[str, str]) -> None: ...

    async def allocate_producer_id(self) -> int: ...

    async def committed(self) -> None:
        """Wait until every change started so far is durable and applied."""

    def close(self) -> None: ...
