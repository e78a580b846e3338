"""Kafka 3.9's znodes: every path and JSON document exactly as `kafka.zk.ZkData` writes and reads them
(core/src/main/scala/kafka/zk/ZkData.scala), so an operator's `zkCli.sh`, Kafka's own tools and a
Kafka 3.9 broker in the same cluster read what Odradek writes, and the reverse.

Pure codecs, no I/O: one class per Kafka znode object with `path(...)`, `encode(...)` and
`decode(...)`, named as Kafka names them (`BrokerIdZNode`, `TopicPartitionStateZNode`, ...), and
dataclasses for the values (`BrokerInfo`, `LeaderAndIsr`, `ReplicaAssignment`, `ProducerIdsBlock`).

What Kafka's JSON looks like, and what surprises (captured from a Kafka 3.9.2 broker in ZooKeeper
mode, see tests/unit/controller/test_zk_data.py):
  * compact (Jackson: no spaces), UTF-8, object keys in Scala HashMap order. Key order carries no
    meaning; encoders here put keys in the order Kafka 3.9.2 printed them where that order is fixed
    (Scala's Map1..Map4 keep insertion order) or was observed.
  * several numbers are JSON *strings*: every `timestamp`, `/cluster/id`'s `"version":"1"`, and
    `/latest_producer_id_block`'s `block_start` / `block_end`.
  * `/controller_epoch` is not JSON but the bare decimal epoch ("1").
  * persistent container znodes (`/brokers/ids`, `/config/topics`, a topic's `partitions`, ...) and
    `/admin/delete_topics/<t>` carry *null* data (length -1 on the wire), not an empty byte string.
  * the broker registration's top-level `host`/`port` are those of its first PLAINTEXT endpoint, or
    null/-1 when it has none (clients of 0.8 read only those).
  * `leader_recovery_state` is written only when it is not RECOVERED (0); readers default it.
  * topic ids are Kafka `Uuid`s: URL-safe base64 of the 16 bytes without padding (22 characters).

Decoding follows Kafka's leniency exactly where Kafka is lenient: a topic znode or partition state
that is not JSON decodes to "nothing" (`Json.parseBytes` returns None), a config znode that is not
JSON to no configs, a missing `listener_security_protocol_map` (registration v2/v3) to the default
map (each security protocol as a listener of its own name). Where Kafka throws, `ZkDataError`.
"""

from __future__ import annotations

import base64
import enum
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from broker.security.sanitizer import (
    desanitize as desanitize,  # re-exported: callers use zd.sanitize
)
from broker.security.sanitizer import sanitize as sanitize


class ZkDataError(ValueError):
    """A znode's content that Kafka would refuse to parse (Kafka throws KafkaException or
    IllegalArgumentException there)."""


# kafka.zk.ZkVersion
MATCH_ANY_VERSION = -1  # a conditional set/delete with this version matches any version
UNKNOWN_VERSION = -2  # the version reported for a znode that does not exist

# kafka.controller.KafkaController
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# SocketServerConfigs.DEFAULT_NAME_TO_SECURITY_PROTO: what a registration without a listener map means
DEFAULT_NAME_TO_SECURITY_PROTO = {p: p for p in SECURITY_PROTOCOLS}


def dumps(value: Any) -> bytes:
    """JSON the way Kafka's `Json.encodeAsBytes` (Jackson) writes it: compact, UTF-8, non-ASCII
    characters unescaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse(data: bytes | None) -> Any | None:
    """Kafka's `Json.parseBytes`: the parsed document, or None when the bytes are null or not JSON."""
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _try_parse(data: bytes | None, what: str) -> Any:
    """Kafka's `Json.tryParseBytes` where a failure is an error: the document or ZkDataError."""
    doc = parse(data)
    if doc is None:
        shown = data.decode("utf-8", "replace") if data is not None else "null"
        raise ZkDataError(f"Failed to parse {what}: {shown}")
    return doc


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {value!r}")
    return value


def _int(value: Any, what: str) -> int:
    """Jackson's `to[Int]`: a JSON integer (not a string, not a float, not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZkDataError(f"{what}: expected an integer, got {value!r}")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ZkDataError(f"{what}: expected a string, got {value!r}")
    return value


def _req(doc: dict[str, Any], key: str, what: str) -> Any:
    if key not in doc:
        raise ZkDataError(f"{what}: no {key!r} in {doc!r}")
    return doc[key]


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list):
        raise ZkDataError(f"{what}: expected a list of integers, got {value!r}")
    return [_int(v, what) for v in value]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def uuid_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def uuid_from_string(text: str) -> uuid.UUID:
    """Kafka's `Uuid.fromString` (22 base64 characters; anything else is refused)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise ZkDataError(f"Invalid topic id {text!r}") from e
    if len(raw) != 16:
        raise ZkDataError(f"Input string with prefix `{text[:22]}` is too long to be decoded as a base64 UUID")
    return uuid.UUID(bytes=raw)


# ---------------------------------------------------------------------------------------------
# top-level and container paths


class ConfigType:
    """org.apache.kafka.server.config.ConfigType: the entity types with a znode under /config."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"
    ALL = (TOPIC, CLIENT, USER, BROKER, IP)


class ConsumerPathZNode:
    path = "/consumers"  # the old consumer's path; still created at startup


class BrokersZNode:
    path = "/brokers"


class BrokerIdsZNode:
    path = "/brokers/ids"


class TopicsZNode:
    path = "/brokers/topics"


class BrokerSequenceIdZNode:
    path = "/brokers/seqid"


class ConfigZNode:
    path = "/config"


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"


class AdminZNode:
    path = "/admin"


class DeleteTopicsZNode:
    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """`/admin/delete_topics/<topic>`: a deletion request; null data (only its name counts)."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class IsrChangeNotificationZNode:
    path = "/isr_change_notification"


class LogDirEventNotificationZNode:
    path = "/log_dir_event_notification"


class ClusterZNode:
    path = "/cluster"


# ZkData.PersistentZkPaths: created (null data, no error if present) by every broker at startup,
# in this order (KafkaZkClient.createTopLevelPaths).
PERSISTENT_ZK_PATHS: tuple[str, ...] = (
    ConsumerPathZNode.path,
    BrokerIdsZNode.path,
    TopicsZNode.path,
    ConfigEntityChangeNotificationZNode.path,
    DeleteTopicsZNode.path,
    BrokerSequenceIdZNode.path,
    IsrChangeNotificationZNode.path,
    "/latest_producer_id_block",
    LogDirEventNotificationZNode.path,
    *(ConfigEntityTypeZNode.path(t) for t in ConfigType.ALL),
)


# ---------------------------------------------------------------------------------------------
# /controller and /controller_epoch


@dataclass(frozen=True)
class ZkControllerRegistration:
    """What /controller says (ZKControllerRegistration): the controller's broker id, the KRaft
    controller epoch a migrating KRaft controller writes (None when absent; ZK controllers write -1)
    and the znode's version."""

    broker: int
    kraft_epoch: int | None
    zk_version: int


class ControllerZNode:
    """`/controller` (ephemeral): `{"version":2,"brokerid":1,"timestamp":"1795528463381",
    "kraftControllerEpoch":-1}`; the first broker to create it is the controller."""

    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None, kraft_controller_epoch: int = -1) -> bytes:
        ts = now_ms() if timestamp_ms is None else timestamp_ms
        return dumps({"version": 2, "brokerid": broker_id, "timestamp": str(ts),
                      "kraftControllerEpoch": kraft_controller_epoch})

    @staticmethod
    def decode(data: bytes | None) -> int | None:
        """The controller's broker id; None when the data is not JSON (Kafka: Option)."""
        doc = parse(data)
        if doc is None:
            return None
        return _int(_req(_obj(doc, "controller"), "brokerid", "controller"), "controller brokerid")

    @staticmethod
    def decode_controller(data: bytes | None, zk_version: int) -> ZkControllerRegistration:
        doc = _obj(_try_parse(data, "ZooKeeper registration for controller"), "controller")
        broker = _int(_req(doc, "brokerid", "controller"), "controller brokerid")
        kraft = doc.get("kraftControllerEpoch")
        return ZkControllerRegistration(broker, None if kraft is None else _int(kraft, "kraftControllerEpoch"),
                                        zk_version)


class ControllerEpochZNode:
    """`/controller_epoch` (persistent): the epoch as a bare decimal string, e.g. b"1"."""

    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("utf-8")

    @staticmethod
    def decode(data: bytes | None) -> int:
        try:
            return int((data or b"").decode("utf-8"))
        except ValueError as e:
            raise ZkDataError(f"controller epoch {data!r} is not a number") from e


# ---------------------------------------------------------------------------------------------
# /brokers/ids/<id>


@dataclass(frozen=True)
class EndPoint:
    """kafka.cluster.EndPoint: one listener as a broker advertises it. `host` None means "all
    interfaces" (`PLAINTEXT://:9092`)."""

    host: str | None
    port: int
    listener_name: str
    security_protocol: str

    def connection_string(self) -> str:
        """`LISTENER://host:port`, an IPv6 host in brackets (Utils.formatAddress)."""
        if self.host is None:
            hostport = f":{self.port}"
        elif ":" in self.host:
            hostport = f"[{self.host}]:{self.port}"
        else:
            hostport = f"{self.host}:{self.port}"
        return f"{self.listener_name}://{hostport}"

    @staticmethod
    def parse(connection_string: str, security_protocol_map: Mapping[str, str]) -> EndPoint:
        """SocketServerConfigs.listenerListToEndPoints for one entry: `NAME://host:port`, host may be
        empty (None) or a bracketed IPv6 address; the protocol comes from the listener map."""
        name, sep, rest = connection_string.partition("://")
        if not sep or not name:
            raise ZkDataError(f"Unable to parse {connection_string} to a broker endpoint")
        host_part, colon, port_text = rest.rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            colon = ""
        if not colon:
            raise ZkDataError(f"Unable to parse {connection_string} to a broker endpoint")
        host = host_part[1:-1] if host_part.startswith("[") and host_part.endswith("]") else host_part
        protocol = security_protocol_map.get(name)
        if protocol is None:
            raise ZkDataError(f"No security protocol defined for listener {name}")
        return EndPoint(host or None, port, name, protocol)


@dataclass(frozen=True)
class SupportedVersionRange:
    """A feature's supported version range, as a broker registration lists it."""

    min_version: int
    max_version: int


@dataclass(frozen=True)
class Broker:
    """kafka.cluster.Broker: what a registration says about a broker."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    features: Mapping[str, SupportedVersionRange] = field(default_factory=dict)

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


@dataclass(frozen=True)
class BrokerInfo:
    """kafka.zk.BrokerInfo: a broker plus the registration's JSON version (5 from IBP 2.7 on, what
    Kafka 3.9 writes) and JMX port (-1: none)."""

    broker: Broker
    version: int = 5
    jmx_port: int = -1

    @property
    def path(self) -> str:
        return BrokerIdZNode.path(self.broker.id)

    def to_json_bytes(self, timestamp_ms: int | None = None) -> bytes:
        return BrokerIdZNode.encode(self, timestamp_ms)


class BrokerIdZNode:
    """`/brokers/ids/<id>` (ephemeral): a live broker's registration; the znode's czxid is the
    broker epoch. Version 5 (Kafka 3.9.2, one PLAINTEXT listener and a rack):

        {"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
         "endpoints":["PLAINTEXT://127.0.0.1:55089"],"rack":"rack-a","jmx_port":-1,
         "port":55089,"host":"127.0.0.1","version":5,"timestamp":"1795528463215"}

    `rack` is present only when set (and version >= 3), the listener map from version 4, the
    features (name -> {"min_version","max_version"}) from version 5."""

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo, timestamp_ms: int | None = None) -> bytes:
        broker, version = info.broker, info.version
        # older clients read only host/port: the first PLAINTEXT endpoint's, or none
        plaintext = next((e for e in broker.endpoints if e.security_protocol == "PLAINTEXT"), None)
        doc: dict[str, Any] = {}
        if version >= 5:
            doc["features"] = {name: {"min_version": r.min_version, "max_version": r.max_version}
                               for name, r in broker.features.items()}
        if version >= 4:
            doc["listener_security_protocol_map"] = {e.listener_name: e.security_protocol
                                                     for e in broker.endpoints}
        doc["endpoints"] = [e.connection_string() for e in broker.endpoints]
        if broker.rack is not None and version >= 3:
            doc["rack"] = broker.rack
        doc["jmx_port"] = info.jmx_port
        doc["port"] = plaintext.port if plaintext is not None else -1
        doc["host"] = plaintext.host if plaintext is not None else None
        doc["version"] = version
        doc["timestamp"] = str(now_ms() if timestamp_ms is None else timestamp_ms)
        return dumps(doc)

    @staticmethod
    def decode(broker_id: int, data: bytes | None) -> BrokerInfo:
        what = f"ZooKeeper registration for broker {broker_id}"
        doc = _obj(_try_parse(data, what), what)
        version = _int(_req(doc, "version", what), f"{what} version")
        jmx_port = _int(_req(doc, "jmx_port", what), f"{what} jmx_port")
        if version < 1:
            raise ZkDataError(f"Unsupported version of broker registration: {data!r}")
        if version == 1:
            host = _str(_req(doc, "host", what), f"{what} host")
            port = _int(_req(doc, "port", what), f"{what} port")
            endpoints: tuple[EndPoint, ...] = (EndPoint(host, port, "PLAINTEXT", "PLAINTEXT"),)
        else:
            raw_map = doc.get("listener_security_protocol_map")
            if raw_map is None:
                protocol_map: Mapping[str, str] = DEFAULT_NAME_TO_SECURITY_PROTO
            else:
                protocol_map = {_str(k, what): _security_protocol(v, what)
                                for k, v in _obj(raw_map, what).items()}
            listeners = _req(doc, "endpoints", what)
            if not isinstance(listeners, list):
                raise ZkDataError(f"{what}: endpoints is not a list")
            endpoints = tuple(EndPoint.parse(_str(s, what), protocol_map) for s in listeners)
        rack = doc.get("rack")
        features: dict[str, SupportedVersionRange] = {}
        raw_features = doc.get("features")
        if raw_features is not None:
            for name, versions in _obj(raw_features, what).items():
                v = _obj(versions, what)
                features[name] = SupportedVersionRange(_int(_req(v, "min_version", what), what),
                                                       _int(_req(v, "max_version", what), what))
        broker = Broker(broker_id, endpoints, None if rack is None else _str(rack, what), features)
        return BrokerInfo(broker, version, jmx_port)


def _security_protocol(value: Any, what: str) -> str:
    name = _str(value, what)
    if name not in SECURITY_PROTOCOLS:
        raise ZkDataError(f"{what}: unknown security protocol {name!r}")
    return name


# ---------------------------------------------------------------------------------------------
# /brokers/topics/<t> and its partitions' state


@dataclass(frozen=True)
class ReplicaAssignment:
    """kafka.controller.ReplicaAssignment: a partition's replicas, and during a reassignment the
    replicas being added and removed (both also in `replicas`)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment (ORS): what a cancellation goes back to."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (TRS)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Kafka's ReplicaAssignment.reassignTo: RS = TRS + ORS (in that order, distinct); the
        adding replicas are the new ones, the removing ones the origin replicas not in TRS. A
        reassignment of a partition already being reassigned starts from its origin replicas."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def __str__(self) -> str:
        def ids(xs: tuple[int, ...]) -> str:
            return ",".join(map(str, xs))
        return (f"ReplicaAssignment(replicas={ids(self.replicas)}, addingReplicas={ids(self.adding_replicas)}, "
                f"removingReplicas={ids(self.removing_replicas)})")


@dataclass(frozen=True)
class TopicIdReplicaAssignment:
    """TopicZNode.TopicIdReplicaAssignment: a topic, its id (None for a topic created before
    topic ids, until the controller assigns one) and its assignment, by partition."""

    topic: str
    topic_id: uuid.UUID | None
    assignment: Mapping[int, ReplicaAssignment]


class TopicZNode:
    """`/brokers/topics/<t>` (persistent): the replica assignment. Kafka 3.9.2 writes version 3:

        {"partitions":{"0":[1],"1":[1]},"topic_id":"u0xf0HKiTg21YdWNjgYivA",
         "adding_replicas":{},"removing_replicas":{},"version":3}

    `adding_replicas` / `removing_replicas` list only partitions being reassigned; `topic_id` is
    left out when there is none."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def encode(topic_id: uuid.UUID | None, assignment: Mapping[int, ReplicaAssignment]) -> bytes:
        parts = sorted(assignment.items())
        doc: dict[str, Any] = {"partitions": {str(p): list(a.replicas) for p, a in parts}}
        if topic_id is not None:
            doc["topic_id"] = uuid_to_string(topic_id)
        doc["adding_replicas"] = {str(p): list(a.adding_replicas) for p, a in parts if a.adding_replicas}
        doc["removing_replicas"] = {str(p): list(a.removing_replicas) for p, a in parts if a.removing_replicas}
        doc["version"] = 3
        return dumps(doc)

    @staticmethod
    def decode(topic: str, data: bytes | None) -> TopicIdReplicaAssignment:
        """Kafka's TopicZNode.decode: not JSON -> no id and no partitions; a missing `partitions`
        -> none; missing adding/removing maps -> empty (versions 1 and 2 had neither, or no id)."""
        doc = parse(data)
        if doc is None:
            return TopicIdReplicaAssignment(topic, None, {})
        what = f"topic {topic} assignment"
        doc = _obj(doc, what)
        raw_id = doc.get("topic_id")
        topic_id = None if raw_id is None else uuid_from_string(_str(raw_id, what))
        adding = _obj(doc.get("adding_replicas") or {}, what)
        removing = _obj(doc.get("removing_replicas") or {}, what)
        assignment: dict[int, ReplicaAssignment] = {}
        for key, replicas in _obj(doc.get("partitions") or {}, what).items():
            try:
                partition = int(key)
            except ValueError as e:
                raise ZkDataError(f"{what}: partition {key!r} is not a number") from e
            assignment[partition] = ReplicaAssignment(
                tuple(_int_list(replicas, what)),
                tuple(_int_list(adding[key], what)) if key in adding else (),
                tuple(_int_list(removing[key], what)) if key in removing else (),
            )
        return TopicIdReplicaAssignment(topic, topic_id, dict(sorted(assignment.items())))


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{partition}"


class LeaderRecoveryState(enum.IntEnum):
    """org.apache.kafka.metadata.LeaderRecoveryState (KIP-704)."""

    RECOVERED = 0
    RECOVERING = 1


# org.apache.kafka.metadata.LeaderAndIsr constants
NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0


@dataclass(frozen=True)
class LeaderAndIsr:
    """org.apache.kafka.metadata.LeaderAndIsr: a partition's leader, leader epoch, ISR, recovery
    state and partition epoch -- in ZooKeeper mode the partition epoch *is* the state znode's
    version, which every update compares-and-sets."""

    leader: int
    leader_epoch: int = INITIAL_LEADER_EPOCH
    isr: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        return replace(self, partition_epoch=partition_epoch)

    def new_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """Kafka's `newLeaderAndIsr`: a new leader (or ISR) bumps the leader epoch."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """kafka.controller.LeaderIsrAndControllerEpoch: a partition state and the epoch of the
    controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int


class TopicPartitionStateZNode:
    """`/brokers/topics/<t>/partitions/<p>/state` (persistent): leader and ISR. Kafka 3.9.2:

        {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}

    plus `"leader_recovery_state":1` only while RECOVERING."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        lai = state.leader_and_isr
        doc: dict[str, Any] = {"controller_epoch": state.controller_epoch, "leader": lai.leader,
                               "version": 1, "leader_epoch": lai.leader_epoch, "isr": list(lai.isr)}
        if lai.leader_recovery_state != LeaderRecoveryState.RECOVERED:
            doc["leader_recovery_state"] = int(lai.leader_recovery_state)
        return dumps(doc)

    @staticmethod
    def decode(data: bytes | None, zk_version: int) -> LeaderIsrAndControllerEpoch | None:
        """None when the data is not JSON (Kafka: Option); the znode's version becomes the
        partition epoch."""
        doc = parse(data)
        if doc is None:
            return None
        what = "partition state"
        doc = _obj(doc, what)
        recovery = doc.get("leader_recovery_state")
        try:
            recovery_state = (LeaderRecoveryState.RECOVERED if recovery is None
                              else LeaderRecoveryState(_int(recovery, what)))
        except ValueError as e:
            raise ZkDataError(f"Invalid leader recovery state {recovery!r}") from e
        lai = LeaderAndIsr(
            leader=_int(_req(doc, "leader", what), f"{what} leader"),
            leader_epoch=_int(_req(doc, "leader_epoch", what), f"{what} leader_epoch"),
            isr=tuple(_int_list(_req(doc, "isr", what), f"{what} isr")),
            leader_recovery_state=recovery_state,
            partition_epoch=zk_version,
        )
        return LeaderIsrAndControllerEpoch(lai, _int(_req(doc, "controller_epoch", what), f"{what} controller_epoch"))


# ---------------------------------------------------------------------------------------------
# /config


class ConfigEntityZNode:
    """`/config/<type>/<name>`: an entity's dynamic config overrides, all values strings:

        {"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}"""

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{entity_name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        """Null, non-JSON, or no `config` object -> no overrides (Kafka: empty Properties); a value
        that is not a string is an error (Kafka's `to[String]`)."""
        doc = parse(data)
        if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
            return {}
        return {k: _str(v, f"config {k}") for k, v in doc["config"].items()}


class ConfigEntityChangeNotificationSequenceZNode:
    """`/config/changes/config_change_<10-digit sequence>` (persistent sequential): tells every
    broker to re-read one entity's config. Version 2 names the entity's path below /config:

        {"version":2,"entity_path":"topics/t2"}

    Version 1 ({"version":1,"entity_type":"topics","entity_name":"t2"}) is still read."""

    SEQUENCE_NUMBER_PREFIX = "config_change_"
    create_path = f"{ConfigEntityChangeNotificationZNode.path}/{SEQUENCE_NUMBER_PREFIX}"

    @staticmethod
    def encode(sanitized_entity_path: str) -> bytes:
        return dumps({"version": 2, "entity_path": sanitized_entity_path})

    @staticmethod
    def decode(data: bytes | None) -> str:
        """The entity path ("topics/t2") of a version 1 or 2 notification (ZkConfigManager)."""
        what = "config change notification"
        doc = _obj(_try_parse(data, what), what)
        version = _int(_req(doc, "version", what), f"{what} version")
        if version == 1:
            return f"{_str(_req(doc, 'entity_type', what), what)}/{_str(_req(doc, 'entity_name', what), what)}"
        if version == 2:
            return _str(_req(doc, "entity_path", what), what)
        raise ZkDataError(f"Config change notification has an unsupported version {version}, "
                          "supported versions are 1 and 2")


# sanitize / desanitize: broker.security.sanitizer (imported above), shared with the broker's SCRAM code


# ---------------------------------------------------------------------------------------------
# notifications the controller reads


class IsrChangeNotificationSequenceZNode:
    """`/isr_change_notification/isr_change_<seq>`: partitions whose ISR a leader changed directly
    in ZooKeeper (brokers before IBP 2.7; Kafka 3.9 leaders send AlterPartition instead):

        {"version":1,"partitions":[{"topic":"t","partition":0}]}"""

    SEQUENCE_NUMBER_PREFIX = "isr_change_"

    @staticmethod
    def path(sequence_number: str = "") -> str:
        return f"{IsrChangeNotificationZNode.path}/isr_change_{sequence_number}"

    @staticmethod
    def encode(partitions: Iterable[tuple[str, int]]) -> bytes:
        return dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data: bytes | None) -> set[tuple[str, int]]:
        return _decode_partition_list(data, "ISR change notification")

    @staticmethod
    def sequence_number(path: str) -> str:
        prefix = IsrChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return path[path.rindex(prefix) + len(prefix):]


def _decode_partition_list(data: bytes | None, what: str) -> set[tuple[str, int]]:
    """`{"partitions":[{"topic":..,"partition":..}]}`; not JSON -> empty (Kafka: Option)."""
    doc = parse(data)
    if doc is None:
        return set()
    partitions = _req(_obj(doc, what), "partitions", what)
    if not isinstance(partitions, list):
        raise ZkDataError(f"{what}: partitions is not a list")
    out = set()
    for entry in partitions:
        e = _obj(entry, what)
        out.add((_str(_req(e, "topic", what), what), _int(_req(e, "partition", what), what)))
    return out


class LogDirEventNotificationSequenceZNode:
    """`/log_dir_event_notification/log_dir_event_<seq>`: a broker lost a log dir:
    {"version":1,"broker":1,"event":1} (event 1 = LogDirFailure)."""

    SEQUENCE_NUMBER_PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE_EVENT = 1

    @staticmethod
    def path(sequence_number: str) -> str:
        return f"{LogDirEventNotificationZNode.path}/log_dir_event_{sequence_number}"

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return dumps({"version": 1, "broker": broker_id, "event": 1})

    @staticmethod
    def decode(data: bytes | None) -> int | None:
        doc = parse(data)
        if doc is None:
            return None
        return _int(_req(_obj(doc, "log dir event"), "broker", "log dir event"), "log dir event broker")

    @staticmethod
    def sequence_number(path: str) -> str:
        prefix = LogDirEventNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return path[path.rindex(prefix) + len(prefix):]


class PreferredReplicaElectionZNode:
    """`/admin/preferred_replica_election` (the pre-2.4 tools' way to ask for one):
    {"version":1,"partitions":[{"topic":"t","partition":0}]}."""

    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[tuple[str, int]]) -> bytes:
        return dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data: bytes | None) -> set[tuple[str, int]]:
        return _decode_partition_list(data, "preferred replica election")


class ReassignPartitionsZNode:
    """`/admin/reassign_partitions` (deprecated since 2.4, still honoured by a 3.9 controller):
    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}."""

    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
        return dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in reassignment.items()]})

    @staticmethod
    def decode(data: bytes | None) -> dict[tuple[str, int], list[int]]:
        what = "partition reassignment"
        doc = _obj(_try_parse(data, what), what)
        partitions = _req(doc, "partitions", what)
        if not isinstance(partitions, list):
            raise ZkDataError(f"{what}: partitions is not a list")
        out = {}
        for entry in partitions:
            e = _obj(entry, what)
            tp = (_str(_req(e, "topic", what), what), _int(_req(e, "partition", what), what))
            out[tp] = _int_list(_req(e, "replicas", what), what)
        return out


# ---------------------------------------------------------------------------------------------
# /cluster/id, /latest_producer_id_block, /feature


class ClusterIdZNode:
    """`/cluster/id`: {"version":"1","id":"lP9wR2hPT0-azxxhPGkl7A"} -- the version is a string."""

    path = "/cluster/id"

    @staticmethod
    def to_json(cluster_id: str) -> bytes:
        return dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def from_json(data: bytes | None) -> str:
        doc = parse(data)
        if not isinstance(doc, dict) or "id" not in doc:
            raise ZkDataError(f"Failed to parse the cluster id json {data!r}")
        return _str(doc["id"], "cluster id")


PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


@dataclass(frozen=True)
class ProducerIdsBlock:
    """org.apache.kafka.server.common.ProducerIdsBlock: `size` producer ids from
    `first_producer_id`, handed to broker `assigned_broker_id`."""

    assigned_broker_id: int
    first_producer_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


class ProducerIdBlockZNode:
    """`/latest_producer_id_block`: the last block handed out, ids as *strings*:

        {"version":1,"broker":1,"block_start":"0","block_end":"999"}"""

    path = "/latest_producer_id_block"
    CURRENT_VERSION = 1

    @staticmethod
    def generate_producer_id_block_json(block: ProducerIdsBlock) -> bytes:
        return dumps({"version": 1, "broker": block.assigned_broker_id,
                      "block_start": str(block.first_producer_id), "block_end": str(block.last_producer_id)})

    @staticmethod
    def parse_producer_id_block_data(data: bytes | None) -> ProducerIdsBlock:
        what = "producerId block json"
        doc = parse(data)
        if not isinstance(doc, dict):
            raise ZkDataError(f"Failed to parse the {what} {data!r}")
        try:
            start = int(_str(_req(doc, "block_start", what), what))
            end = int(_str(_req(doc, "block_end", what), what))
        except ValueError as e:
            raise ZkDataError(f"Read jason data {data!r} contains producerIds that have exceeded long type limit") from e
        return ProducerIdsBlock(_int(_req(doc, "broker", what), what), start, end - start + 1)


class FeatureZNodeStatus(enum.IntEnum):
    DISABLED = 0
    ENABLED = 1


@dataclass(frozen=True)
class FeatureZNode:
    """`/feature`: the cluster's finalized features (KIP-584). Kafka 3.9.2 in ZooKeeper mode:

        {"features":{},"version":2,"status":1}

    Version 2 lists each feature as {"max_version_level":n}; version 1 also had min_version_level."""

    version: int
    status: FeatureZNodeStatus
    features: Mapping[str, int]

    path = "/feature"
    V1 = 1
    V2 = 2

    @staticmethod
    def encode(node: FeatureZNode) -> bytes:
        if node.version == FeatureZNode.V1:
            features = {n: {"max_version_level": v, "min_version_level": v} for n, v in node.features.items()}
        else:
            features = {n: {"max_version_level": v} for n, v in node.features.items()}
        return dumps({"features": features, "version": node.version, "status": int(node.status)})

    @staticmethod
    def decode(data: bytes | None) -> FeatureZNode:
        what = "feature information"
        doc = parse(data)
        if not isinstance(doc, dict):
            raise ZkDataError(f"Failed to parse {what}: {data!r}")
        version = _int(_req(doc, "version", what), f"{what} version")
        if version < FeatureZNode.V1 or version > FeatureZNode.V2:
            raise ZkDataError(f"Unsupported version: {version} of {what}: {data!r}")
        status_int = doc.get("status")
        if status_int is None:
            raise ZkDataError(f"Status can not be absent in {what}: {data!r}")
        try:
            status = FeatureZNodeStatus(_int(status_int, what))
        except ValueError as e:
            raise ZkDataError(f"Malformed status: {status_int} found in {what}: {data!r}") from e
        raw = doc.get("features")
        if raw is None:
            raise ZkDataError(f"Features map can not be absent in: {data!r}")
        features = {}
        for name, levels in _obj(raw, what).items():
            lv = _obj(levels, what)
            if version == FeatureZNode.V1 and "min_version_level" not in lv:
                raise ZkDataError(f"min_version_level absent in [{lv}]")
            if "max_version_level" not in lv:
                raise ZkDataError(f"max_version_level absent in [{lv}]")
            max_v = _int(lv["max_version_level"], what)
            if version == FeatureZNode.V1:
                min_v = _int(lv["min_version_level"], what)
                if min_v < 1 or max_v < min_v:
                    raise ZkDataError("Expected minValue >= 1, maxValue >= 1 and maxValue >= minValue, "
                                      f"but received minValue: {min_v}, maxValue: {max_v}")
            if max_v < 1:
                raise ZkDataError(f"Expected maxValue >= 1, but received maxValue: {max_v}")
            features[name] = max_v
        return FeatureZNode(version, status, features)
