"""MetadataCache.update_metadata (Kafka's ZkMetadataCache.updateMetadata) on decoded UpdateMetadata
requests of every layout: brokers normalized per version, partition states merged, deletion by
leader -2, topic ids kept or forgotten, and images never changed in place."""

from __future__ import annotations

import uuid

from broker.metadata_cache import MetadataCache
from broker.replica_manager import leader_and_isr_partition_states, stop_replica_partition_states
from controller.image import BrokerEndpoint, MetadataImage
from protocol.framing import encode_request_frame, parse_request
from protocol.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from protocol.messages import leader_and_isr_request as lr
from protocol.messages import stop_replica_request as sr
from protocol.messages import update_metadata_request as um

TID = uuid.UUID("5f1ad5b6-0c3e-4b1f-9a7e-2d7f3c1b9e01")


def roundtrip(request: object, api_key: int, version: int) -> object:
    """Encode at `version` and decode again: the fields that version carries, as a broker gets them."""
    frame = encode_request_frame(api_key, version, 1, "test", request)
    return parse_request(frame[4:])[1]


def state(topic: str, p: int, leader: int, epoch: int = 0, offline: list[int] | None = None) -> um.UpdateMetadataPartitionState:
    return um.UpdateMetadataPartitionState(topic_name=topic, partition_index=p, controller_epoch=1, leader=leader,
                                           leader_epoch=epoch, isr=[leader], zk_version=3, replicas=[leader, 9],
                                           offline_replicas=offline or [])


def request(version: int, states: list[um.UpdateMetadataPartitionState], topic_id: uuid.UUID = TID,
            controller_id: int = 7) -> object:
    brokers = [um.UpdateMetadataBroker(id=1, v0_host="h1", v0_port=9091, rack="r1", endpoints=[
        um.UpdateMetadataEndpoint(host="h1", port=9091, listener="PLAINTEXT", security_protocol=0),
        um.UpdateMetadataEndpoint(host="h1", port=9093, listener="INTERNAL", security_protocol=0)])]
    req = UpdateMetadataRequest(controller_id=controller_id, controller_epoch=1, broker_epoch=5, live_brokers=brokers)
    if version < 5:
        req.ungrouped_partition_states = states
    else:
        by_topic: dict[str, list[um.UpdateMetadataPartitionState]] = {}
        for s in states:
            by_topic.setdefault(s.topic_name, []).append(s)
        req.topic_states = [um.UpdateMetadataTopicState(topic_name=t, topic_id=topic_id, partition_states=ps)
                            for t, ps in by_topic.items()]
    return roundtrip(req, 6, version)


def test_brokers_are_normalized_per_version() -> None:
    for version, endpoints, rack in [
        (0, (BrokerEndpoint("PLAINTEXT", "h1", 9091),), None),  # one PLAINTEXT host/port
        (1, (BrokerEndpoint("PLAINTEXT", "h1", 9091), BrokerEndpoint("PLAINTEXT", "h1", 9093)), None),  # by protocol
        (2, (BrokerEndpoint("PLAINTEXT", "h1", 9091), BrokerEndpoint("PLAINTEXT", "h1", 9093)), "r1"),
        (8, (BrokerEndpoint("PLAINTEXT", "h1", 9091), BrokerEndpoint("INTERNAL", "h1", 9093)), "r1"),
    ]:
        cache = MetadataCache(MetadataImage("c", -1))
        cache.update_metadata(1, request(version, []), version, broker_id=1)
        b = cache.brokers[1]
        assert (b.endpoints, b.rack, b.host, b.port, cache.controller_id) == (endpoints, rack, "h1", 9091, 7), version
        assert b.endpoint("PLAINTEXT") == ("h1", 9091)


def test_partition_states_merge_delete_and_keep_older_images_intact() -> None:
    cache = MetadataCache(MetadataImage("c", -1))
    seen: list[MetadataImage] = []
    cache.listeners.append(seen.append)
    deleted = cache.update_metadata(1, request(8, [state("t", 0, 1), state("t", 1, 2, 4, [9]), state("u", 0, 1)]), 8, 1)
    first = cache.image
    assert deleted == [] and seen == [first] and first.cluster_id == "c"
    p1 = cache.partition("t", 1)
    assert (p1.leader, p1.leader_epoch, p1.isr, p1.replicas, p1.partition_epoch, p1.offline_replicas) == (
        2, 4, [2], [2, 9], 3, [9])
    assert cache.topic("t").topic_id == TID

    # a partial update: t-0 changes, u-0 is deleted (leader -2), t-1 is kept
    deleted = cache.update_metadata(2, request(8, [state("t", 0, 2, 1), state("u", 0, -2)]), 8, 1)
    assert deleted == [("u", 0)] and sorted(cache.topics) == ["t"]
    assert (cache.partition("t", 0).leader, cache.partition("t", 1).leader) == (2, 2)
    # the first image is untouched (a handler that took it reads a consistent view)
    assert sorted(first.topics) == ["t", "u"] and first.topics["t"].partitions[0].leader == 1

    # v5/v6 topic states carry no id: the topic's id is forgotten, as Kafka's newZeroIds
    cache.update_metadata(3, request(6, [state("t", 0, 1, 2)]), 6, 1)
    assert cache.topic("t").topic_id == uuid.UUID(int=0)
    # v4 and before carry no offline replicas
    cache.update_metadata(4, request(3, [state("v", 0, 1, offline=[9])]), 3, 1)
    assert cache.partition("v", 0).offline_replicas == []
    # an update without partition states replaces brokers and controller only
    cache.update_metadata(5, request(8, [], controller_id=-1), 8, 1)
    assert (cache.controller_id, sorted(cache.topics)) == (-1, ["t", "v"])


def test_control_request_partition_views_of_every_layout() -> None:
    ps = lr.LeaderAndIsrPartitionState(topic_name="t", partition_index=2, leader=1, leader_epoch=3, isr=[1], replicas=[1])
    for version in (0, 1):
        req = roundtrip(LeaderAndIsrRequest(controller_id=7, controller_epoch=1, ungrouped_partition_states=[ps]), 4, version)
        assert [(s.topic_name, s.partition_index, s.leader_epoch) for s in leader_and_isr_partition_states(req, version)] == [("t", 2, 3)]
    for version in (2, 5, 7):
        grouped = lr.LeaderAndIsrPartitionState(partition_index=2, leader=1, leader_epoch=3, isr=[1], replicas=[1])
        req = roundtrip(LeaderAndIsrRequest(controller_id=7, controller_epoch=1, topic_states=[
            lr.LeaderAndIsrTopicState(topic_name="t", topic_id=TID, partition_states=[grouped])]), 4, version)
        assert [(s.topic_name, s.partition_index, s.leader_epoch) for s in leader_and_isr_partition_states(req, version)] == [("t", 2, 3)]

    v0 = StopReplicaRequest(delete_partitions=True, ungrouped_partitions=[sr.StopReplicaPartitionV0(topic_name="t", partition_index=1)])
    assert stop_replica_partition_states(roundtrip(v0, 5, 0), 0) == {("t", 1): (True, -1)}
    v1 = StopReplicaRequest(delete_partitions=False, topics=[sr.StopReplicaTopicV1(name="t", partition_indexes=[1, 2])])
    assert stop_replica_partition_states(roundtrip(v1, 5, 2), 2) == {("t", 1): (False, -1), ("t", 2): (False, -1)}
    v3 = StopReplicaRequest(topic_states=[sr.StopReplicaTopicState(topic_name="t", partition_states=[
        sr.StopReplicaPartitionState(partition_index=1, leader_epoch=-2, delete_partition=True),
        sr.StopReplicaPartitionState(partition_index=2, leader_epoch=4, delete_partition=False)])])
    assert stop_replica_partition_states(roundtrip(v3, 5, 4), 4) == {("t", 1): (True, -2), ("t", 2): (False, 4)}
