"""Replica assignment for new topics and for added partitions, as Kafka 3.9 computes it.

Ported from `org.apache.kafka.admin.AdminUtils` (server-common/src/main/java/org/apache/kafka/
admin/AdminUtils.java) and from the ZooKeeper-mode callers that feed it:
`AdminZkClient.getBrokerMetadatas`, `createNewPartitionsAssignment`, `validateReplicaAssignment`
and `validateTopicCreate` (core/src/main/scala/kafka/zk/AdminZkClient.scala) and
`ZkAdminManager.createPartitions` (core/src/main/scala/kafka/server/ZkAdminManager.scala).
Why a port and not our own spreading: an operator moving between Apache Kafka and Odradek expects
`kafka-topics --describe` to show the same shape of assignment, and Kafka's tests pin exact
outputs for fixed start indexes, which ours reproduce (tests/unit/controller/test_assignment.py).

The three goals (AdminUtils' javadoc): spread replicas evenly over brokers; for the partitions
led by one broker, spread their followers over the other brokers; with rack information on every
broker, put the replicas of a partition on different racks while racks remain.

Rack-unaware: the first replica (the preferred leader) of partition p is
`brokers[(p + startIndex) % n]`; follower j sits `1 + (shift + j) % (n - 1)` places further on,
and `shift` grows by one each time p wraps around the broker list, so the next round pairs
leaders with different followers. With 5 brokers, start index 0 and shift 0:

    broker-0  broker-1  broker-2  broker-3  broker-4
    p0        p1        p2        p3        p4        (1st replica)
    p5        p6        p7        p8        p9        (1st replica)
    p4        p0        p1        p2        p3        (2nd replica)
    p8        p9        p5        p6        p7        (2nd replica)
    p3        p4        p0        p1        p2        (3rd replica)
    p7        p8        p9        p5        p6        (3rd replica)

Rack-aware: the same round robin over a *rack-alternated* broker list (one broker from each rack
in turn, racks in name order, brokers in id order within a rack); followers skip a broker whose
rack already holds a replica while some rack holds none, and a broker already holding one while
some broker holds none. Rack 1: 0, 5; rack 2: 3, 4; rack 3: 1, 2 alternates to 0, 3, 1, 5, 4, 2.

Both draw the start index and the first shift at random unless `fixed_start_index` is given
(Kafka uses the same value for both then); `start_partition_id` numbers the first partition
assigned, so added partitions continue the round robin of the existing ones. The order of the
broker list matters to the rack-unaware algorithm: Kafka's CreateTopics (ZkAdminManager) passes
the metadata cache's live brokers in its map's order, while CreatePartitions and the admin tools
pass `getBrokerMetadatas()`, sorted by id. Callers here should pass brokers sorted by id so that
`create_new_partitions_assignment` finds the start index the topic was created with.

Errors are Kafka's exceptions as KafkaProtocolError with the code Kafka's `Errors.forException`
maps them to and the same message; `AdminOperationException` is not an ApiException in Kafka, so
a response carries UNKNOWN_SERVER_ERROR for it (and `ApiError.fromThrowable` drops the message).
Pure functions: no I/O, no asyncio, safe to call from any task.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaProtocolError


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as the assignment sees it: its id and its `broker.rack` (None when unset)."""

    id: int
    rack: str | None = None


class AdminOperationException(KafkaProtocolError):
    """Kafka's `org.apache.kafka.server.common.AdminOperationException`: a RuntimeException, not an
    ApiException, so the answer's error code is UNKNOWN_SERVER_ERROR; the message is kept for logs."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)


def _invalid_partitions(message: str) -> KafkaProtocolError:
    return KafkaProtocolError(ErrorCode.INVALID_PARTITIONS, message)


def _invalid_replication_factor(message: str) -> KafkaProtocolError:
    return KafkaProtocolError(ErrorCode.INVALID_REPLICATION_FACTOR, message)


def _invalid_replica_assignment(message: str) -> KafkaProtocolError:
    return KafkaProtocolError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def assign_replicas_to_brokers(
    broker_metadatas: Collection[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's `AdminUtils.assignReplicasToBrokers`: partition id -> replicas, preferred leader first.

    `fixed_start_index` < 0 draws the start index and the first replica shift from `rng` (two
    draws, as Kafka's two `RAND.nextInt` calls); `start_partition_id` < 0 means 0. Raises
    INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR with Kafka's messages, and
    AdminOperationException when only some brokers have a rack.
    """
    if n_partitions <= 0:
        raise _invalid_partitions("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise _invalid_replication_factor("Replication factor must be larger than 0.")
    if replication_factor > len(broker_metadatas):
        raise _invalid_replication_factor(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(broker_metadatas)}."
        )
    rng = rng if rng is not None else random.Random()
    if all(b.rack is None for b in broker_metadatas):
        return _assign_rack_unaware(
            n_partitions,
            replication_factor,
            [b.id for b in broker_metadatas],
            fixed_start_index,
            start_partition_id,
            rng,
        )
    if any(b.rack is None for b in broker_metadatas):
        raise AdminOperationException(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return _assign_rack_aware(
        n_partitions, replication_factor, broker_metadatas, fixed_start_index, start_partition_id, rng
    )


def _start(fixed_start_index: int, n_brokers: int, rng: random.Random) -> tuple[int, int]:
    """(startIndex, nextReplicaShift): both the fixed index, or two independent draws in [0, n)."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start_index = rng.randrange(n_brokers)
    return start_index, rng.randrange(n_brokers)


def _assign_rack_unaware(
    n_partitions: int,
    replication_factor: int,
    broker_list: Sequence[int],
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    """AdminUtils.assignReplicasToBrokersRackUnaware."""
    n = len(broker_list)
    start_index, next_replica_shift = _start(fixed_start_index, n, rng)
    current_partition_id = max(0, start_partition_id)
    ret: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % n == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % n
        replicas = [broker_list[first_replica_index]]
        for j in range(replication_factor - 1):
            replicas.append(broker_list[replica_index(first_replica_index, next_replica_shift, j, n)])
        ret[current_partition_id] = replicas
        current_partition_id += 1
    return ret


def _assign_rack_aware(
    n_partitions: int,
    replication_factor: int,
    broker_metadatas: Iterable[BrokerMetadata],
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    """AdminUtils.assignReplicasToBrokersRackAware.

    The inner search ends: `replica_index` visits every position but the leader's within n - 1
    steps of k, and while fewer than `replication_factor` (<= n) replicas are placed there is an
    unused broker, in an unused rack if any rack is still unused.
    """
    broker_rack_map = {b.id: b.rack for b in broker_metadatas if b.rack is not None}
    num_racks = len(set(broker_rack_map.values()))
    arranged = get_rack_alternated_broker_list(broker_rack_map)
    num_brokers = len(arranged)
    start_index, next_replica_shift = _start(fixed_start_index, num_brokers, rng)
    current_partition_id = max(0, start_partition_id)
    ret: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % num_brokers == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % num_brokers
        leader = arranged[first_replica_index]
        replicas = [leader]
        racks_with_replicas = {broker_rack_map[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _j in range(replication_factor - 1):
            while True:
                broker = arranged[
                    replica_index(first_replica_index, next_replica_shift * num_racks, k, num_brokers)
                ]
                rack = broker_rack_map[broker]
                k += 1
                # Skip a broker whose rack already holds a replica while some rack holds none,
                # and a broker already holding one while some broker holds none.
                if (rack not in racks_with_replicas or len(racks_with_replicas) == num_racks) and (
                    broker not in brokers_with_replicas or len(brokers_with_replicas) == num_brokers
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        ret[current_partition_id] = replicas
        current_partition_id += 1
    return ret


def get_rack_alternated_broker_list(broker_rack_map: Mapping[int, str]) -> list[int]:
    """Kafka's `AdminUtils.getRackAlternatedBrokerList`: one broker of each rack in turn.

    Racks in name order, brokers in id order within a rack; rack1: 0, 1, 2 / rack2: 3, 4, 5 /
    rack3: 6, 7, 8 gives 0, 3, 6, 1, 4, 7, 2, 5, 8. An exhausted rack is skipped.
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_rack_map.items():
        by_rack.setdefault(rack, []).append(broker_id)
    iterators = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iterators)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_rack_map):
        nxt = next(iterators[racks[rack_index]], None)
        if nxt is not None:
            result.append(nxt)
        rack_index = (rack_index + 1) % len(racks)
    return result


def replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    """Kafka's `AdminUtils.replicaIndex`: never lands on the first replica's own position."""
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


class RackAwareMode(enum.Enum):
    """Kafka's `RackAwareMode`: how `get_broker_metadatas` treats racks.

    ENFORCED refuses brokers of which only some have a rack; SAFE then drops every rack; DISABLED
    always drops them.
    """

    DISABLED = "Disabled"
    ENFORCED = "Enforced"
    SAFE = "Safe"


def get_broker_metadatas(
    brokers: Iterable[BrokerMetadata],
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    broker_list: Collection[int] | None = None,
) -> list[BrokerMetadata]:
    """Kafka's `AdminZkClient.getBrokerMetadatas`: the registered brokers (optionally only those in
    `broker_list`) with racks per `rack_aware_mode`, sorted by id. CreatePartitions uses this with
    ENFORCED, hence its own message for brokers of which only some have a rack."""
    chosen = [b for b in brokers if broker_list is None or b.id in broker_list]
    with_rack = [b for b in chosen if b.rack is not None]
    if rack_aware_mode is RackAwareMode.ENFORCED and with_rack and len(with_rack) < len(chosen):
        raise AdminOperationException(
            "Not all brokers have rack information. Add --disable-rack-aware in command line"
            " to make replica assignment without rack information."
        )
    if rack_aware_mode is RackAwareMode.DISABLED or (
        rack_aware_mode is RackAwareMode.SAFE and len(with_rack) < len(chosen)
    ):
        chosen = [BrokerMetadata(b.id, None) for b in chosen]
    return sorted(chosen, key=lambda b: b.id)


def _scala_map(assignment: Mapping[int, Sequence[int]]) -> str:
    """How Kafka prints `Map[Int, ReplicaAssignment]` in the partition-0-missing message."""
    entries = ", ".join(
        f"{p} -> ReplicaAssignment(replicas={','.join(map(str, r))}, addingReplicas=, removingReplicas=)"
        for p, r in assignment.items()
    )
    return f"Map({entries})"


def create_new_partitions_assignment(
    topic: str,
    existing_assignment: Mapping[int, Sequence[int]],
    all_brokers: Sequence[BrokerMetadata],
    num_partitions: int = 1,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's `AdminZkClient.createNewPartitionsAssignment`: the assignment of the partitions added
    to reach `num_partitions` (existing ones are never moved).

    Without a manual `replica_assignment` the new partitions continue the round robin: the start
    index is the position of the first broker whose id is >= partition 0's first replica (0 when
    none is), the replication factor is partition 0's, and numbering starts at the existing count.
    Kafka uses that start index as the replica shift too, so followers of the new partitions need
    not follow the pattern of the old ones; only the leaders continue it.
    """
    if 0 not in existing_assignment:
        raise AdminOperationException(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing. "
            f"Assignment: {_scala_map(existing_assignment)}"
        )
    partition0 = existing_assignment[0]
    partitions_to_add = num_partitions - len(existing_assignment)
    if partitions_to_add <= 0:
        raise _invalid_partitions(
            f"The number of partitions for a topic can only be increased. "
            f"Topic {topic} currently has {len(existing_assignment)} partitions, "
            f"{num_partitions} would not be an increase."
        )
    if replica_assignment is not None:
        validate_replica_assignment(replica_assignment, len(partition0), {b.id for b in all_brokers})
        return {p: list(r) for p, r in replica_assignment.items()}
    start_index = max(
        0, next((i for i, b in enumerate(all_brokers) if b.id >= partition0[0]), -1)
    )
    return assign_replicas_to_brokers(
        all_brokers, partitions_to_add, len(partition0), start_index, len(existing_assignment), rng
    )


def validate_replica_assignment(
    replica_assignment: Mapping[int, Sequence[int]],
    expected_replication_factor: int,
    available_broker_ids: Collection[int],
) -> None:
    """Kafka's `AdminZkClient.validateReplicaAssignment` for manually assigned new partitions."""
    available = set(available_broker_ids)
    for partition_id, replicas in replica_assignment.items():
        if not replicas:
            raise _invalid_replica_assignment(
                f"Cannot have replication factor of 0 for partition id {partition_id}."
            )
        if len(replicas) != len(set(replicas)):
            raise _invalid_replica_assignment(
                f"Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition_id}."
            )
        if not set(replicas) <= available:
            raise KafkaProtocolError(
                ErrorCode.BROKER_NOT_AVAILABLE,
                f"Some brokers specified for partition id {partition_id} are not available. "
                f"Specified brokers: {', '.join(map(str, replicas))}, "
                f"available brokers: {', '.join(map(str, sorted(available)))}.",
            )
    bad = sorted(
        (p, len(r)) for p, r in replica_assignment.items() if len(r) != expected_replication_factor
    )
    if bad:
        raise _invalid_replica_assignment(
            f"Inconsistent replication factor between partitions, partition 0 has "
            f"{expected_replication_factor} while partitions [{', '.join(str(p) for p, _ in bad)}] "
            f"have replication factors [{', '.join(str(n) for _, n in bad)}], respectively."
        )


def create_partitions_assignment(
    topic: str,
    existing_assignment: Mapping[int, Sequence[int]],
    all_brokers: Sequence[BrokerMetadata],
    new_count: int,
    assignments: Sequence[Sequence[int]] | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """What Kafka's `ZkAdminManager.createPartitions` computes for one topic of a CreatePartitions
    request: its checks (with the messages clients see), then `create_new_partitions_assignment`.

    `existing_assignment` is the topic's current assignment (empty: the topic does not exist);
    `assignments` the request's manual replica lists for the new partitions, in order. The caller
    refuses a topic under reassignment first (REASSIGNMENT_IN_PROGRESS) and passes
    `get_broker_metadatas(...)` as `all_brokers`.
    """
    if not existing_assignment:
        raise KafkaProtocolError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
        )
    old = len(existing_assignment)
    increment = new_count - old
    if increment < 0:
        raise _invalid_partitions(
            f"Topic currently has {old} partitions, which is higher than the requested {new_count}."
        )
    if increment == 0:
        raise _invalid_partitions(f"Topic already has {old} partitions.")
    manual: dict[int, Sequence[int]] | None = None
    if assignments is not None:
        broker_ids = {b.id for b in all_brokers}
        unknown = sorted({r for replicas in assignments for r in replicas} - broker_ids)
        if unknown:
            raise _invalid_replica_assignment(
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
            )
        if len(assignments) != increment:
            raise _invalid_replica_assignment(
                f"Increasing the number of partitions by {increment} "
                f"but {len(assignments)} assignments provided."
            )
        manual = {old + i: replicas for i, replicas in enumerate(assignments)}
    return create_new_partitions_assignment(
        topic, existing_assignment, all_brokers, new_count, manual, rng
    )


def validate_topic_create_assignment(partition_replica_assignment: Mapping[int, Sequence[int]]) -> None:
    """The assignment checks of Kafka's `AdminZkClient.validateTopicCreate`, for CreateTopics with
    manual assignments. Kafka does not check for unknown brokers here (unlike CreatePartitions),
    following TopicCommand."""
    if len({len(r) for r in partition_replica_assignment.values()}) != 1:
        raise _invalid_replica_assignment("All partitions should have the same number of replicas")
    for replicas in partition_replica_assignment.values():
        if len(replicas) != len(set(replicas)):
            raise _invalid_replica_assignment(
                f"Duplicate replica assignment found: {_scala_plain_map(partition_replica_assignment)}"
            )
    size = len(partition_replica_assignment)
    if sum(p for p in partition_replica_assignment if p >= 0) != size * (size - 1) // 2:
        raise _invalid_replica_assignment("partitions should be a consecutive 0-based integer sequence")


def _scala_plain_map(assignment: Mapping[int, Sequence[int]]) -> str:
    """How Kafka prints a `Map[Int, Seq[Int]]` built from a request (a mutable HashMap of
    ArrayBuffers)."""
    entries = ", ".join(f"{p} -> ArrayBuffer({', '.join(map(str, r))})" for p, r in assignment.items())
    return f"HashMap({entries})"
