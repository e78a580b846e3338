"""The cluster metadata as the broker reads it: topics with their partitions (replicas, leader,
leader epoch, ISR), brokers with their endpoints, the controller id, the cluster id and dynamic
broker configs -- plain values, and Kafka's topic-name rules.

Why its own module: the broker imports these types and the controller interface
(controller.interface), never a concrete controller (DESIGN.md §1); the embedded single-node
controller (controller.metadata) and the ZooKeeper-backed one both produce them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode, KafkaProtocolError

__all__ = [
    "INTERNAL_TOPICS",
    "MAX_NAME_LENGTH",
    "BrokerEndpoint",
    "BrokerInfo",
    "Listener",
    "MetadataImage",
    "PartitionState",
    "TopicState",
    "validate_topic_name",
]

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION with Kafka's wording when the name is not legal."""
    if not name:
        raise KafkaProtocolError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaProtocolError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaProtocolError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL.fullmatch(name):
        raise KafkaProtocolError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'",
        )


@dataclass
class PartitionState:
    partition: int
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    # replicas on a failed log dir of a live broker (UpdateMetadata v4+); Metadata lists them
    offline_replicas: list[int] = field(default_factory=list)


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True)
class BrokerEndpoint:
    """One listener of a broker as the cluster knows it (Kafka's UpdateMetadataEndpoint)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker. `host`/`port`/`listener` are its first endpoint; `endpoints` lists every
    listener it registered (a cluster's brokers may have several: clients are answered with
    the endpoint of the listener they connected to). A single node leaves `endpoints` empty."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listener: str = "PLAINTEXT"
    endpoints: tuple[BrokerEndpoint, ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of the broker's listener named `listener`, None if it has none."""
        for e in self.endpoints:
            if e.listener == listener:
                return e.host, e.port
        if listener == self.listener:
            return self.host, self.port
        return None

    def address(self, listener: str) -> tuple[str, int]:
        """A single node's address for a client of `listener`: that listener's endpoint, else
        the first (a single node answers every client, whatever listener it came in on)."""
        return self.endpoint(listener) or (self.host, self.port)


@dataclass
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicState] = field(default_factory=dict)
    broker_configs: dict[str, str] = field(default_factory=dict)  # this broker's dynamic configs
    # ZooKeeper mode: the cluster-wide dynamic broker configs (/config/brokers/<default>), below
    # this broker's own in precedence
    broker_default_configs: dict[str, str] = field(default_factory=dict)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None


# (event: "created"/"deleted"/"changed", topic) -> None, or an awaitable of the file work it started
Listener = Callable[[str, TopicState], Awaitable[Any] | None]
