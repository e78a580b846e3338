"""The test as a ZooKeeper-mode controller and as a client: the requests a Kafka 3.9 controller
sends brokers (UpdateMetadata v8, LeaderAndIsr v7, StopReplica v4) and the client requests that
check what a broker made of them, all over broker.network_client (real TCP, ApiVersions
negotiated, so a broker that does not advertise a version fails the call)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker.network_client import NetworkClient, NetworkClientConfig
from protocol.messages import (
    FetchRequest,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from protocol.messages import fetch_request as fr
from protocol.messages import leader_and_isr_request as lr
from protocol.messages import list_offsets_request as lo
from protocol.messages import metadata_request as mr
from protocol.messages import offset_for_leader_epoch_request as oe
from protocol.messages import produce_request as pr
from protocol.messages import stop_replica_request as sr
from protocol.messages import update_metadata_request as um
from protocol.records import Record, build_batch

HOST = "127.0.0.1"
T = TypeVar("T")
# the inter-broker versions a Kafka 3.9 controller (IBP 3.9) sends
UPDATE_METADATA_VERSION, LEADER_AND_ISR_VERSION, STOP_REPLICA_VERSION = 8, 7, 4


async def bounded(aw: Awaitable[T], seconds: float = 15) -> T:
    return await asyncio.wait_for(aw, seconds)


@dataclass
class Part:
    """One partition's state as the controller sends it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int = 0
    offline: list[int] = field(default_factory=list)


def _grouped(parts: Iterable[Part]) -> dict[str, list[Part]]:
    out: dict[str, list[Part]] = {}
    for p in parts:
        out.setdefault(p.topic, []).append(p)
    return out


class Controller:
    """Sends controller requests to brokers as controller `controller_id` (epoch per call)."""

    def __init__(self, controller_id: int = 7) -> None:
        self.controller_id = controller_id
        self.client = NetworkClient(NetworkClientConfig(client_id=f"controller-{controller_id}", request_timeout_ms=10_000))

    def add_broker(self, broker_id: int, port: int) -> None:
        self.client.update_node(broker_id, HOST, port)

    async def close(self) -> None:
        await self.client.close()

    async def update_metadata(self, broker_id: int, *, controller_epoch: int, broker_epoch: int,
                              live: Iterable[tuple[int, int, str | None]], parts: Iterable[Part] = (),
                              topic_ids: dict[str, uuid.UUID] | None = None, controller_id: int | None = None) -> Any:
        topic_ids = topic_ids or {}
        req = UpdateMetadataRequest(
            controller_id=self.controller_id if controller_id is None else controller_id,
            controller_epoch=controller_epoch, broker_epoch=broker_epoch,
            topic_states=[um.UpdateMetadataTopicState(
                topic_name=t, topic_id=topic_ids.get(t, uuid.UUID(int=0)), partition_states=[
                    um.UpdateMetadataPartitionState(
                        partition_index=p.partition, controller_epoch=controller_epoch, leader=p.leader,
                        leader_epoch=p.leader_epoch, isr=p.isr, zk_version=p.partition_epoch, replicas=p.replicas,
                        offline_replicas=p.offline) for p in ps]) for t, ps in _grouped(parts).items()],
            live_brokers=[um.UpdateMetadataBroker(id=i, endpoints=[um.UpdateMetadataEndpoint(
                port=port, host=HOST, listener="PLAINTEXT", security_protocol=0)], rack=rack) for i, port, rack in live])
        return await bounded(self.client.send(broker_id, req, version=UPDATE_METADATA_VERSION))

    async def leader_and_isr(self, broker_id: int, *, controller_epoch: int, broker_epoch: int, parts: Iterable[Part],
                             topic_ids: dict[str, uuid.UUID], leaders: Iterable[tuple[int, int]] = ()) -> Any:
        req = LeaderAndIsrRequest(
            controller_id=self.controller_id, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
            topic_states=[lr.LeaderAndIsrTopicState(topic_name=t, topic_id=topic_ids[t], partition_states=[
                lr.LeaderAndIsrPartitionState(
                    partition_index=p.partition, controller_epoch=controller_epoch, leader=p.leader,
                    leader_epoch=p.leader_epoch, isr=p.isr, partition_epoch=p.partition_epoch, replicas=p.replicas,
                    is_new=True) for p in ps]) for t, ps in _grouped(parts).items()],
            live_leaders=[lr.LeaderAndIsrLiveLeader(broker_id=i, host_name=HOST, port=port) for i, port in leaders])
        return await bounded(self.client.send(broker_id, req, version=LEADER_AND_ISR_VERSION))

    async def stop_replica(self, broker_id: int, *, controller_epoch: int, broker_epoch: int,
                           parts: Iterable[tuple[str, int, int, bool]]) -> Any:
        """`parts`: (topic, partition, leader epoch, delete)."""
        by_topic: dict[str, list[sr.StopReplicaPartitionState]] = {}
        for t, p, epoch, delete in parts:
            by_topic.setdefault(t, []).append(
                sr.StopReplicaPartitionState(partition_index=p, leader_epoch=epoch, delete_partition=delete))
        req = StopReplicaRequest(controller_id=self.controller_id, controller_epoch=controller_epoch,
                                 broker_epoch=broker_epoch, topic_states=[
                                     sr.StopReplicaTopicState(topic_name=t, partition_states=ps)
                                     for t, ps in by_topic.items()])
        return await bounded(self.client.send(broker_id, req, version=STOP_REPLICA_VERSION))


class Client:
    """A Kafka client's requests to one broker."""

    def __init__(self, port: int) -> None:
        self.client = NetworkClient(NetworkClientConfig(client_id="zk-mode-test", request_timeout_ms=10_000),
                                    {0: (HOST, port)})

    async def close(self) -> None:
        await self.client.close()

    async def send(self, request: Any, version: int | None = None) -> Any:
        return await bounded(self.client.send(0, request, version=version))

    async def metadata(self, topics: list[str] | None = None, version: int = 12) -> Any:
        req = MetadataRequest(topics=None if topics is None else [mr.MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=False)
        return await self.send(req, version)

    async def produce(self, topic: str, partition: int, value: bytes, version: int = 11, acks: int = -1) -> Any:
        batch = build_batch([Record(value=value)])
        req = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[pr.TopicProduceData(
            name=topic, partition_data=[pr.PartitionProduceData(index=partition, records=batch)])])
        resp = await self.send(req, version)
        return resp, resp.responses[0].partition_responses[0]

    async def fetch(self, topic: str, partition: int, offset: int = 0, version: int = 12,
                    current_leader_epoch: int = -1) -> Any:
        req = FetchRequest(max_wait_ms=0, min_bytes=0, topics=[fr.FetchTopic(topic=topic, partitions=[
            fr.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20,
                              current_leader_epoch=current_leader_epoch)])])
        return (await self.send(req, version)).responses[0].partitions[0]

    async def list_offsets(self, topic: str, partition: int, current_leader_epoch: int = -1,
                           replica_id: int = -1) -> Any:
        req = ListOffsetsRequest(replica_id=replica_id, topics=[lo.ListOffsetsTopic(name=topic, partitions=[
            lo.ListOffsetsPartition(partition_index=partition, timestamp=-1,
                                    current_leader_epoch=current_leader_epoch)])])
        return (await self.send(req, 7)).topics[0].partitions[0]

    async def offset_for_leader_epoch(self, topic: str, partition: int, epoch: int,
                                      current_leader_epoch: int = -1) -> Any:
        req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[oe.OffsetForLeaderTopic(topic=topic, partitions=[
            oe.OffsetForLeaderPartition(partition=partition, leader_epoch=epoch,
                                        current_leader_epoch=current_leader_epoch)])])
        return (await self.send(req, 4)).topics[0].partitions[0]


def partition_errors(resp: Any) -> dict[tuple[uuid.UUID, int], int]:
    """A LeaderAndIsr v5+ response's errors by (topic id, partition)."""
    return {(t.topic_id, p.partition_index): p.error_code for t in resp.topics for p in t.partition_errors}


def metadata_view(resp: Any) -> dict[str, Any]:
    """A Metadata response as plain values for comparisons."""
    return {
        "brokers": sorted((b.node_id, b.host, b.port, b.rack) for b in resp.brokers),
        "controller_id": resp.controller_id,
        "cluster_id": resp.cluster_id,
        "topics": {t.name: (t.error_code, t.topic_id, {
            p.partition_index: (p.error_code, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes),
                                list(p.offline_replicas)) for p in t.partitions}) for t in resp.topics},
    }
