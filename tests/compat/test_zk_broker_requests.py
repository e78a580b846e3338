"""Differential: the controller's requests to a broker, and what clients see after them, on
Apache Kafka 3.9.2 in ZooKeeper mode and on an Odradek ZooKeeper-mode broker.

Each broker is broker 1 of its own cluster (a chroot of one real ZooKeeper); the test holds the
controller seat of both (/controller = 7, so neither broker's own controller acts) and sends both
the same sequence: UpdateMetadata v8, LeaderAndIsr v7 (leader of one partition, follower of
another, not a replica of a third), client requests (Metadata, Produce v11 with KIP-951's current
leader, Fetch v12 from a follower, ListOffsets, OffsetForLeaderEpoch), a coordinator's
WriteTxnMarkers, then every fenced case -- equal, older leader epochs, another topic id, an older
controller or broker epoch, StopReplica with an older leader epoch, without and with delete,
markers to the stopped partitions -- and a partial UpdateMetadata. Every answer (error codes per
partition, leaders, epochs, rack, the cache's view) must be equal; only the
brokers' own ports differ and are left out."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from controller.zk.client import ZooKeeperClient
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ListPartitionReassignmentsRequest,
    WriteTxnMarkersRequest,
)
from protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.create_partitions_request import CreatePartitionsTopic
from protocol.messages.create_topics_request import CreatableTopic
from protocol.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from tests.broker_process import BrokerProcess
from tests.cluster.control_requests import Client, Controller, Part, metadata_view, partition_errors
from tests.compat.test_zk_znodes import ZkModeKafka
from tests.zookeeper import ZooKeeperServer

TOPIC_ID = uuid.UUID("5f1ad5b6-0c3e-4b1f-9a7e-2d7f3c1b9e01")
GHOST_PORT = 1  # broker 2 exists only in the metadata


async def take_controller_seat(zookeeper: ZooKeeperServer, chroot: str) -> KafkaZkClient:
    client = await ZooKeeperClient(zookeeper.connect_string(chroot), session_timeout_ms=18000,
                                   request_timeout_ms=30_000).start(create_chroot=True)
    kzk = KafkaZkClient(client)
    await kzk.create_top_level_paths()
    assert await kzk.register_controller_and_increment_controller_epoch(7) == (1, 1)
    return kzk


def view(resp: Any) -> dict[str, Any]:
    m = metadata_view(resp)
    m["brokers"] = [(b[0], b[3]) for b in m["brokers"]]  # the own port differs
    del m["cluster_id"]
    return m


async def write_txn_markers(client: Client, tps: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """A COMMIT marker (v1) of producer 4000 for ``tps``; (topic, partition, error) sorted."""
    topics: dict[str, list[int]] = {}
    for topic, index in tps:
        topics.setdefault(topic, []).append(index)
    r = await client.send(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=4000, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name=t, partition_indexes=p) for t, p in topics.items()])]), 1)
    return sorted((t.name, p.partition_index, p.error_code) for m in r.markers for t in m.topics for p in t.partitions)


async def conversation(port: int, kzk: KafkaZkClient) -> list[tuple[Any, ...]]:
    """The sequence of requests; every answer that matters, in order."""
    epoch = (await kzk.get_all_broker_and_epochs_in_cluster())[1].epoch
    controller, client = Controller(), Client(port)
    controller.add_broker(1, port)
    live = [(1, port, "rack-a"), (2, GHOST_PORT, "rack-b")]
    ids = {"t": TOPIC_ID}
    parts = [Part("t", 0, 1, 3, [1], [1, 2], 4), Part("t", 1, 2, 5, [2, 1], [2, 1], 6), Part("t", 2, 2, 0, [2], [2, 3])]
    out: list[tuple[Any, ...]] = []

    def stop_replica(resp: Any) -> tuple[Any, ...]:
        return resp.error_code, sorted((p.topic_name, p.partition_index, p.error_code) for p in resp.partition_errors)

    try:
        r = await controller.update_metadata(1, controller_epoch=1, broker_epoch=epoch, live=live, parts=parts,
                                             topic_ids=ids)
        out.append(("UpdateMetadata", r.error_code))
        r = await controller.leader_and_isr(1, controller_epoch=1, broker_epoch=epoch, parts=parts, topic_ids=ids,
                                            leaders=[(1, port), (2, GHOST_PORT)])
        out.append(("LeaderAndIsr", r.error_code, sorted(partition_errors(r).items())))
        out.append(("Metadata", view(await client.metadata())))
        for requested in (3, 2):  # a new leader records where its epoch starts before any append
            r = await client.offset_for_leader_epoch("t", 0, requested)
            out.append((f"OffsetForLeaderEpoch t-0 epoch {requested}", r.error_code, r.leader_epoch, r.end_offset))
        for p in (0, 1, 2):
            resp, r = await client.produce("t", p, b"x")
            out.append((f"Produce t-{p}", r.error_code, r.base_offset, r.current_leader.leader_id,
                        r.current_leader.leader_epoch, [(n.node_id, n.port, n.rack) for n in resp.node_endpoints]))
        out.append(("Produce unknown", (await client.produce("nope", 0, b"x"))[1].error_code))
        # a coordinator's markers: the leader writes (ISR [1]: acks=all at once), a follower
        # refuses, a partition not hosted here is unknown (Produce says NOT_LEADER_OR_FOLLOWER)
        out.append(("WriteTxnMarkers", await write_txn_markers(client, [("t", 0), ("t", 1), ("t", 2), ("nope", 0)])))
        for p in (0, 1, 2):
            f = await client.fetch("t", p)
            out.append((f"Fetch v12 t-{p}", f.error_code, f.high_watermark))
        out.append(("Fetch v10 t-1", (await client.fetch("t", 1, version=10)).error_code))
        out.append(("ListOffsets t-1", (await client.list_offsets("t", 1)).error_code))
        out.append(("OffsetForLeaderEpoch t-1", (await client.offset_for_leader_epoch("t", 1, 5)).error_code))
        # what a follower (t-1, leader epoch 5, log end 0) answers consumers (KIP-392): the leader
        # epoch checked before the leadership; a debugging client's ListOffsets answered
        for current in (4, 5, 6):
            f = await client.fetch("t", 1, current_leader_epoch=current)
            out.append((f"Fetch v12 t-1 at epoch {current}", f.error_code, f.high_watermark))
            out.append((f"ListOffsets t-1 at epoch {current}",
                        (await client.list_offsets("t", 1, current_leader_epoch=current)).error_code))
            out.append((f"OffsetForLeaderEpoch t-1 at epoch {current}",
                        (await client.offset_for_leader_epoch("t", 1, 5, current_leader_epoch=current)).error_code))
        out.append(("Fetch v12 t-1 past its log end", (await client.fetch("t", 1, offset=5)).error_code))
        r = await client.list_offsets("t", 1, replica_id=-2)
        out.append(("ListOffsets t-1 from a debugging client", r.error_code, r.offset))
        # topic changes are the active controller's: this broker is not it (the test holds the seat)
        r = await client.send(CreateTopicsRequest(topics=[CreatableTopic(
            name="new", num_partitions=1, replication_factor=1, assignments=[], configs=[])], timeout_ms=5000), 7)
        out.append(("CreateTopics", [(t.name, t.error_code, t.num_partitions) for t in r.topics]))
        r = await client.send(CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=5, assignments=None)],
                                                      timeout_ms=5000), 3)
        out.append(("CreatePartitions", [(t.name, t.error_code) for t in r.results]))
        r = await client.send(DeleteTopicsRequest(topic_names=["t"], timeout_ms=5000), 5)
        out.append(("DeleteTopics", [(t.name, t.error_code) for t in r.responses]))
        r = await client.send(AlterPartitionReassignmentsRequest(timeout_ms=5000, topics=[ReassignableTopic(
            name="t", partitions=[ReassignablePartition(partition_index=0, replicas=[1])])]), 0)
        out.append(("AlterPartitionReassignments", r.error_code, r.error_message,
                    [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.responses]))
        r = await client.send(ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None), 0)
        out.append(("ListPartitionReassignments", r.error_code, r.error_message, [t.name for t in r.topics]))
        for label, controller_epoch, broker_epoch, changed, topic_id in [
            ("equal leader epochs", 1, epoch, [Part("t", 0, 1, 3, [1], [1, 2]), Part("t", 1, 2, 5, [2], [2, 1])], TOPIC_ID),
            ("older leader epochs", 1, epoch, [Part("t", 0, 1, 2, [1], [1, 2]), Part("t", 1, 2, 4, [2], [2, 1])], TOPIC_ID),
            ("equal epoch, newer partition epoch", 1, epoch, [Part("t", 0, 1, 3, [1], [1, 2], 9)], TOPIC_ID),
            ("another topic id", 1, epoch, [Part("t", 0, 1, 9, [1], [1, 2])], uuid.UUID(int=5)),
            ("older controller epoch", 0, epoch, [Part("t", 0, 2, 9, [2], [1, 2])], TOPIC_ID),
            ("older broker epoch", 1, epoch - 1, [Part("t", 0, 2, 9, [2], [1, 2])], TOPIC_ID),
        ]:
            r = await controller.leader_and_isr(1, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                                parts=changed, topic_ids={p.topic: topic_id for p in changed})
            out.append((f"LeaderAndIsr, {label}", r.error_code, sorted(partition_errors(r).items())))
        for label, controller_epoch, broker_epoch, stops in [
            ("older leader epoch", 1, epoch, [("t", 0, 2, True)]),
            ("without delete", 1, epoch, [("t", 1, 5, False)]),
            ("older controller epoch", 0, epoch, [("t", 0, -2, True)]),
            ("older broker epoch", 1, epoch - 1, [("t", 0, -2, True)]),
            ("unknown partition", 1, epoch, [("zz", 0, -2, True)]),
            ("delete", 1, epoch, [("t", 0, -2, True)]),
        ]:
            r = await controller.stop_replica(1, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                              parts=stops)
            out.append((f"StopReplica, {label}", stop_replica(r)))
        # t-0 deleted (unknown now), t-1 stopped without delete (still hosted, not led)
        out.append(("WriteTxnMarkers after StopReplica", await write_txn_markers(client, [("t", 0), ("t", 1)])))
        for p in (0, 1):
            _, r = await client.produce("t", p, b"x")
            out.append((f"Produce t-{p} after StopReplica", r.error_code, r.current_leader.leader_id,
                        r.current_leader.leader_epoch))
        r = await controller.update_metadata(1, controller_epoch=0, broker_epoch=epoch, live=live)
        out.append(("UpdateMetadata, older controller epoch", r.error_code))
        r = await controller.update_metadata(1, controller_epoch=1, broker_epoch=epoch - 1, live=live)
        out.append(("UpdateMetadata, older broker epoch", r.error_code))
        r = await controller.update_metadata(1, controller_epoch=2, broker_epoch=epoch, live=live[:1], topic_ids=ids,
                                             parts=[Part("t", 2, -2, 0, [2], [2, 3])], controller_id=8)
        out.append(("UpdateMetadata, partial from a new controller", r.error_code))
        out.append(("Metadata after", view(await client.metadata())))
    finally:
        await client.close()
        await controller.close()
    return out


@pytest.mark.slow
async def test_controller_requests_are_answered_as_kafka_39_does(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    theirs_zk = await take_controller_seat(zookeeper, "/kafka39")
    ours_zk = await take_controller_seat(zookeeper, "/odradek")
    kafka = ZkModeKafka(tmp_path / "kafka", zookeeper.connect_string("/kafka39"))
    ours = BrokerProcess(tmp_path / "ours", zookeeper_connect=zookeeper.connect_string("/odradek"), broker_id=1,
                         overrides=["broker.rack=rack-a"])
    try:
        await asyncio.gather(asyncio.to_thread(kafka.start), asyncio.to_thread(ours.start))
        theirs_answers = await conversation(kafka.port, theirs_zk)
        our_answers = await conversation(ours.port, ours_zk)
    finally:
        await asyncio.gather(asyncio.to_thread(ours.stop), asyncio.to_thread(kafka.stop))
        for kzk in (theirs_zk, ours_zk):
            await kzk.zk.close()
    different = [(t, o) for t, o in zip(theirs_answers, our_answers, strict=True) if t != o]
    assert not different, "\n".join(f"Kafka: {t}\nours:  {o}" for t, o in different)
    # and the conversation said what it should
    answers = dict((a[0], a[1:]) for a in our_answers)
    assert answers["Produce t-1"][0] == 6 and answers["Produce t-1"][2:4] == (2, 5)  # KIP-951
    assert [answers[f"ListOffsets t-1 at epoch {e}"] for e in (4, 5, 6)] == [(74,), (6,), (75,)]  # fenced first
    assert answers["ListOffsets t-1 from a debugging client"] == (0, 0)
    assert answers["LeaderAndIsr, older broker epoch"][0] == 77
    assert answers["StopReplica, older leader epoch"] == ((0, [("t", 0, 74)]),)
    assert answers["WriteTxnMarkers"] == ([("nope", 0, 3), ("t", 0, 0), ("t", 1, 6), ("t", 2, 3)],)
    assert answers["WriteTxnMarkers after StopReplica"] == ([("t", 0, 3), ("t", 1, 6)],)
    assert answers["CreateTopics"] == ([("new", 41, -1)],)  # NOT_CONTROLLER
    assert answers["DeleteTopics"] == ([("t", 41)],)
    assert answers["AlterPartitionReassignments"][0] == answers["ListPartitionReassignments"][0] == 41
