"""Kafka's AdminZkClient (core/src/main/scala/kafka/zk/AdminZkClient.scala, 3.9): the writes by which
any broker (or tool) asks a ZooKeeper-mode cluster for an admin change. None of them talks to the
controller: it watches these znodes and does the rest.

* create a topic: its config overrides (/config/topics/<t>), then its assignment and topic id
  (/brokers/topics/<t>, created -- an existing topic makes it TOPIC_ALREADY_EXISTS); both in one
  multi when neither exists (two round trips), else one by one as Kafka does (not transactional);
* delete topics: /admin/delete_topics/<t> (already marked: fine, the caller waits as for its own),
  all of a request's topics with one read and one multi (Kafka marks them one by one);
* add partitions: the whole assignment written back to /brokers/topics/<t> with the new ones;
* change configs: the entity's znode, then a /config/changes/config_change_<seq> notification.

Errors are Kafka's, as KafkaProtocolError with the code its Errors.forException gives.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence

from controller.zk.client import NodeExistsError
from controller.zk.data import ConfigType, ReplicaAssignment, ZkControllerRegistration
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from protocol.errors import ErrorCode, KafkaProtocolError

__all__ = ["DEFAULT_ENTITY", "AdminZkClient"]

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"  # ConfigEntityName.Default: cluster-wide broker configs


def _scala_assignment(assignment: Mapping[int, Sequence[int]]) -> str:
    return "Map(" + ", ".join(f"{p} -> ArrayBuffer({', '.join(map(str, r))})" for p, r in sorted(assignment.items())) + ")"


def _scala_props(config: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in config.items()) + "}"


class AdminZkClient:
    """See the module docstring."""

    def __init__(self, zk_client: KafkaZkClient) -> None:
        self.zk_client = zk_client

    async def create_topic_with_assignment(self, topic: str, config: Mapping[str, str],
                                           assignment: Mapping[int, Sequence[int]], topic_id: uuid.UUID,
                                           controller: ZkControllerRegistration | None = None) -> None:
        """`controller`: /controller as read just before (with the caller's validation reads); given,
        config and assignment are first tried in one multi checked against it."""
        log.info("Creating topic %s with configuration %s and initial partition assignment %s", topic,
                 _scala_props(config), _scala_assignment(assignment))
        if controller is not None and await self.zk_client.create_topic_with_configs(
                topic, topic_id, assignment, config, controller):
            return
        try:
            await self.zk_client.set_or_create_entity_configs(ConfigType.TOPIC, topic, config)
        except ControllerMovedError as e:
            raise KafkaProtocolError(ErrorCode.NOT_CONTROLLER, str(e)) from e
        try:
            await self.zk_client.create_topic_assignment(topic, topic_id, assignment)
        except NodeExistsError:
            raise KafkaProtocolError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.") from None

    async def delete_topics(self, topics: Sequence[str]) -> dict[str, KafkaProtocolError]:
        """Mark topics for deletion, as Kafka's deleteTopic for each, with one read of /brokers/topics and their marks
        written together (KafkaZkClient.create_delete_topic_paths). Returns the error of each
        topic that cannot be deleted (UNKNOWN_TOPIC_OR_PARTITION); a topic marked already is
        fine, as in delete_topic."""
        existing = await self.zk_client.get_all_topics_in_cluster()
        errors = {t: KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{t}` to delete does not exist")
                  for t in topics if t not in existing}
        marked_already = await self.zk_client.create_delete_topic_paths([t for t in topics if t not in errors])
        for topic in sorted(marked_already):
            log.debug("topic %s is already marked for deletion", topic)
        return errors

    async def create_partitions_with_assignment(self, topic: str, existing: Mapping[int, Sequence[int]],
                                                new: Mapping[int, Sequence[int]]) -> None:
        log.info("Creating %d partitions for '%s' with the following replica assignment: %s.", len(new), topic,
                 ", ".join(f"{p} -> ReplicaAssignment(replicas={','.join(map(str, r))}, addingReplicas=, "
                           "removingReplicas=)" for p, r in sorted(new.items())))
        current = await self.zk_client.get_topic_assignment(topic)
        if current is None:
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        if any(a.is_being_reassigned for a in current.assignment.values()):
            # Kafka refuses too: the controller may be rewriting this znode's adding/removing replicas
            raise KafkaProtocolError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                     f"A partition reassignment is in progress for the topic '{topic}'.")
        combined = {p: ReplicaAssignment(tuple(r)) for p, r in {**existing, **new}.items()}
        await self.zk_client.set_topic_assignment(topic, current.topic_id, combined)

    async def change_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        if not await self.zk_client.topic_exists(topic):
            raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
        await self._change_entity_config(ConfigType.TOPIC, topic, configs)

    async def change_broker_config(self, broker_id: int | None, configs: Mapping[str, str]) -> None:
        """Dynamic configs of one broker (`/config/brokers/<id>`) or of all (`<default>`)."""
        await self._change_entity_config(ConfigType.BROKER, DEFAULT_ENTITY if broker_id is None else str(broker_id),
                                         configs)

    async def _change_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        try:
            await self.zk_client.change_entity_config(entity_type, name, configs)
        except ControllerMovedError as e:
            raise KafkaProtocolError(ErrorCode.NOT_CONTROLLER, str(e)) from e
