"""Differential: AlterPartitionReassignments and ListPartitionReassignments answered by the active
controller, on Apache Kafka 3.9.2 in ZooKeeper mode and on an Odradek ZooKeeper-mode broker.

Each broker is broker 1, alone in its own cluster (a chroot of one real ZooKeeper), so it is its
cluster's controller. Both get the same topic (t, one partition on broker 1) and the same requests:
every refused target (empty, duplicate ids, a negative id, a broker that is not alive, an unknown
partition), a cancellation with nothing to cancel, a no-op target, and the lists. Error codes and
messages must be equal (the moves themselves need three brokers: tests/cluster/test_reassignment.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    CreateTopicsRequest,
    ListPartitionReassignmentsRequest,
)
from protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.create_topics_request import CreatableReplicaAssignment, CreatableTopic
from protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsTopics
from tests.broker_process import BrokerProcess
from tests.cluster.control_requests import Client
from tests.compat.test_zk_znodes import ZkModeKafka
from tests.zookeeper import ZooKeeperServer

CASES: list[tuple[str, str, int, list[int] | None]] = [
    ("empty", "t", 0, []),
    ("duplicates", "t", 0, [1, 1]),
    ("negative id", "t", 0, [1, -1]),
    ("broker not alive", "t", 0, [1, 2]),
    ("unknown partition", "t", 5, [1]),
    ("unknown topic", "nosuch", 0, [1]),
    ("cancel, nothing to cancel", "t", 0, None),
    ("unknown partition, cancel", "nosuch", 0, None),
    ("no-op", "t", 0, [1]),
]


async def conversation(port: int) -> list[tuple[Any, ...]]:
    client = Client(port)
    out: list[tuple[Any, ...]] = []
    try:
        deadline = time.monotonic() + 60
        while True:  # until this broker knows it is the controller (its Metadata says so)
            if (await client.metadata()).controller_id == 1:
                break
            assert time.monotonic() < deadline, "no controller"
            await asyncio.sleep(0.1)
        r = await client.send(CreateTopicsRequest(topics=[CreatableTopic(
            name="t", num_partitions=-1, replication_factor=-1, configs=[],
            assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1])])], timeout_ms=30_000), 7)
        out.append(("CreateTopics", [(t.name, t.error_code) for t in r.topics]))
        while True:
            m = await client.metadata(["t"])
            if m.topics and m.topics[0].partitions and m.topics[0].partitions[0].leader_id == 1:
                break
            assert time.monotonic() < deadline, "no leader for t-0"
            await asyncio.sleep(0.1)
        for label, topic, partition, replicas in CASES:
            r = await client.send(AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[ReassignableTopic(
                name=topic, partitions=[ReassignablePartition(partition_index=partition, replicas=replicas)])]), 0)
            out.append((f"AlterPartitionReassignments, {label}", r.error_code, r.error_message,
                        [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                         for t in r.responses]))
        for label, topics in [("all", None),
                              ("named", [ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 3])]),
                              ("unknown", [ListPartitionReassignmentsTopics(name="nosuch", partition_indexes=[0])])]:
            r = await client.send(ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=topics), 0)
            out.append((f"ListPartitionReassignments, {label}", r.error_code, r.error_message,
                        [(t.name, [(p.partition_index, p.replicas) for p in t.partitions]) for t in r.topics]))
    finally:
        await client.close()
    return out


@pytest.mark.slow
async def test_reassignment_requests_are_answered_as_kafka_39_does(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    kafka = ZkModeKafka(tmp_path / "kafka", zookeeper.connect_string("/kafka39"))
    ours = BrokerProcess(tmp_path / "ours", zookeeper_connect=zookeeper.connect_string("/odradek"), broker_id=1)
    try:
        await asyncio.gather(asyncio.to_thread(kafka.start), asyncio.to_thread(ours.start))
        theirs_answers = await conversation(kafka.port)
        our_answers = await conversation(ours.port)
    finally:
        await asyncio.gather(asyncio.to_thread(ours.stop), asyncio.to_thread(kafka.stop))
    different = [(t, o) for t, o in zip(theirs_answers, our_answers, strict=True) if t != o]
    assert not different, "\n".join(f"Kafka: {t}\nours:  {o}" for t, o in different)
    answers = dict((a[0], a[1:]) for a in our_answers)
    assert answers["AlterPartitionReassignments, broker not alive"][2][0][1][0][1] == 39  # INVALID_REPLICA_ASSIGNMENT
    assert answers["AlterPartitionReassignments, cancel, nothing to cancel"][2] == [("t", [(0, 85, answers[
        "AlterPartitionReassignments, cancel, nothing to cancel"][2][0][1][0][2])])]  # NO_REASSIGNMENT_IN_PROGRESS
    assert answers["AlterPartitionReassignments, no-op"][2] == [("t", [(0, 0, None)])]
