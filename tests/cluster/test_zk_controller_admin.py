"""controller.zk.zk_controller.ZkController -- the Controller interface in ZooKeeper mode -- against a
real ZooKeeper: two brokers' controllers (one elected), each broker's metadata fed by the
UpdateMetadata its RecordingBroker receives (as the broker side applies it), admin changes made
through either, checked in the znodes (Kafka 3.9's JSON) and in the brokers' metadata."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker.network_client import NetworkClient, NetworkClientConfig
from controller.assignment import BrokerMetadata, create_new_partitions_assignment
from controller.image import BrokerInfo, MetadataImage, PartitionState, TopicState
from controller.zk.zk_controller import ZkController
from protocol.errors import ErrorCode, KafkaProtocolError
from tests.cluster.controller_env import WAIT, ControllerEnv, idle
from tests.cluster.recording_broker import UPDATE_METADATA
from tests.zookeeper import ZooKeeperServer


def apply_update_metadata(image: MetadataImage, req: Any) -> MetadataImage:
    """What a broker's MetadataCache does with an UpdateMetadata (enough for these tests)."""
    brokers = {b.id: BrokerInfo(b.id, b.endpoints[0].host, b.endpoints[0].port, b.rack, b.endpoints[0].listener)
               for b in req.live_brokers}
    topics = {n: TopicState(t.name, t.topic_id, dict(t.partitions), dict(t.configs)) for n, t in image.topics.items()}
    for ts in req.topic_states:
        for ps in ts.partition_states:
            if ps.leader == -2:  # being deleted
                t = topics.get(ts.topic_name)
                if t is not None:
                    t.partitions.pop(ps.partition_index, None)
                    if not t.partitions:
                        del topics[ts.topic_name]
                continue
            t = topics.setdefault(ts.topic_name, TopicState(ts.topic_name, ts.topic_id, {}))
            t.partitions[ps.partition_index] = PartitionState(
                ps.partition_index, list(ps.replicas), ps.leader, ps.leader_epoch, list(ps.isr), ps.zk_version)
    return MetadataImage(image.cluster_id, req.controller_id, brokers, topics)


class Broker:
    """One broker's controller side: its ZkController and the metadata its UpdateMetadata built."""

    def __init__(self, controller: ZkController, image: list[MetadataImage]) -> None:
        self.controller = controller
        self._image = image
        self.events: list[tuple[str, str]] = []
        controller.add_listener(lambda event, topic: self.events.append((event, topic.name)))

    @property
    def image(self) -> MetadataImage:
        return self._image[0]


@pytest.fixture
async def cluster(zookeeper: ZooKeeperServer) -> AsyncIterator[tuple[ControllerEnv, dict[int, Broker]]]:
    env = ControllerEnv(zookeeper)
    brokers: dict[int, Broker] = {}
    senders = []
    try:
        for i in (1, 2, 3):
            await env.broker(i)
        for i in (1, 2):
            image = [MetadataImage(cluster_id="c", controller_id=-1)]
            sender = NetworkClient(NetworkClientConfig(client_id=f"controller-{i}", request_timeout_ms=5000))
            senders.append(sender)
            zc = ZkController(await env.zk_client(), i, sender, lambda image=image: image[0],
                              commit_timeout_ms=WAIT * 1000, rng=random.Random(i))
            env.controllers.append(zc.kafka_controller)

            def on_request(key: int, req: Any, image: list[MetadataImage] = image, zc: ZkController = zc) -> None:
                if key == UPDATE_METADATA:
                    image[0] = apply_update_metadata(image[0], req)
                    zc.metadata_updated()

            # every broker listens before any controller starts: broker 1, once elected, sends
            # UpdateMetadata to broker 2 too, possibly before broker 2's controller exists
            env.brokers[i].on_request.append(on_request)
            brokers[i] = Broker(zc, image)
        for i in (1, 2):
            zc = brokers[i].controller
            zc.startup()
            # broker 1 is elected before broker 2 runs (the tests make changes through either)
            await zc.kafka_controller.wait_until(lambda c: c.active_controller_id == 1, WAIT)
        for i in (1, 2):
            await env.brokers[i].wait_for(lambda b: b.of(UPDATE_METADATA))
        await idle(*(b.controller.kafka_controller for b in brokers.values()))
        yield env, brokers
    finally:
        await env.close()
        for s in senders:
            await s.close()


def error_of(call: Any) -> KafkaProtocolError:
    with pytest.raises(KafkaProtocolError) as e:
        call()
    return e.value


async def test_create_topic_through_a_broker_that_is_not_the_controller(cluster):
    env, brokers = cluster
    b2 = brokers[2].controller
    assert len(brokers[2].image.brokers) == 3
    e = error_of(lambda: b2.create_topic("no way", 1, 1))
    assert e.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    e = error_of(lambda: b2.validate_new_topic("big", 1, 4))
    assert (e.code, e.message) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                   "Replication factor: 4 larger than available brokers: 3.")
    topic = b2.create_topic("orders", 30, 3, {"retention.ms": "1000"})
    # validated against what this broker started too, before its metadata shows it
    e = error_of(lambda: b2.create_topic("orders", 1, 1))
    assert (e.code, e.message) == (ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'orders' already exists.")
    await b2.committed()
    # committed: written, and this broker's metadata has a leader for every partition
    shown = brokers[2].image.topics["orders"]
    assert shown.topic_id == topic.topic_id and len(shown.partitions) == 30
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in shown.partitions.values())
    leaders = [p.leader for p in shown.partitions.values()]
    assert sorted(leaders.count(b) for b in (1, 2, 3)) == [10, 10, 10]  # AdminUtils spreads leaders
    assert ("created", "orders") in brokers[2].events
    doc, _ = await env.znode_json("/brokers/topics/orders")
    assert list(doc) == ["partitions", "topic_id", "adding_replicas", "removing_replicas", "version"]
    assert doc["version"] == 3 and doc["adding_replicas"] == {} and doc["removing_replicas"] == {}
    assert {int(p): r for p, r in doc["partitions"].items()} == {p: s.replicas for p, s in topic.partitions.items()}
    assert (await env.znode_json("/config/topics/orders"))[0] == {"version": 1, "config": {"retention.ms": "1000"}}
    # the controller (broker 1) elected them and broker 1's metadata has them too
    await brokers[1].controller.committed()
    assert "orders" in brokers[1].image.topics
    # names colliding on '.' and '_', on the broker that created one and on another once it knows
    b2.create_topic("a.b", 1, 1)
    e = error_of(lambda: b2.validate_new_topic("a_b", 1, 1))
    assert (e.code, e.message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topics: a.b")
    await b2.committed()
    await env.brokers[1].wait_for(lambda b: any(t.topic_name == "a.b" for r in b.of(UPDATE_METADATA)
                                                for t in r.topic_states))
    e = error_of(lambda: brokers[1].controller.create_topic("a_b", 1, 1))
    assert (e.code, e.message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topics: a.b")


async def test_create_partitions_delete_and_configs(cluster):
    env, brokers = cluster
    admin = await env.admin()
    b1 = brokers[1].controller
    b1.create_topic("t", 3, 2, None, None)
    await b1.committed()
    before = {p: s.replicas for p, s in brokers[1].image.topics["t"].partitions.items()}
    e = error_of(lambda: b1.create_partitions("t", 2))
    assert (e.code, e.message) == (ErrorCode.INVALID_PARTITIONS,
                                   "Topic currently has 3 partitions, which is higher than the requested 2.")
    b1.create_partitions("t", 6)
    await b1.committed()
    after = brokers[1].image.topics["t"].partitions
    assert len(after) == 6 and all(after[p].leader >= 0 for p in range(6))
    assert {p: after[p].replicas for p in range(3)} == before  # existing partitions never move
    # the new partitions continue the round robin from partition 0's first replica (AdminZkClient)
    expected = create_new_partitions_assignment("t", before, [BrokerMetadata(i) for i in (1, 2, 3)], 6)
    assert {p: after[p].replicas for p in range(3, 6)} == expected
    doc, _ = await env.znode_json("/brokers/topics/t")
    assert len(doc["partitions"]) == 6
    assert ("changed", "t") in brokers[1].events  # the listeners hear of the partitions added

    b1.set_topic_configs("t", {"cleanup.policy": "compact"})
    await b1.committed()
    assert (await env.znode_json("/config/topics/t"))[0] == {"version": 1, "config": {"cleanup.policy": "compact"}}
    changes = sorted(await admin.get_children("/config/changes"))
    notes = [json.loads((await admin.get_data_and_stat(f"/config/changes/{c}"))[0]) for c in changes]
    assert {"version": 2, "entity_path": "topics/t"} in notes
    assert ("changed", "t") in brokers[1].events

    b1.set_broker_configs({"log.retention.ms": "5000"})
    await b1.committed()
    assert (await env.znode_json("/config/brokers/1"))[0] == {"version": 1, "config": {"log.retention.ms": "5000"}}

    b2 = brokers[2].controller
    b2.delete_topic("t")
    e = error_of(lambda: b2.create_topic("t", 1, 1))
    assert (e.code, e.message) == (ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' is marked for deletion.")
    await b2.committed()  # gone from this broker's metadata
    assert "t" not in brokers[2].image.topics
    assert ("deleted", "t") in brokers[2].events
    e = error_of(lambda: b2.delete_topic("t"))
    assert e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_producer_id_blocks_of_a_thousand_per_broker(cluster):
    env, brokers = cluster
    b1, b2 = brokers[1].controller, brokers[2].controller
    ids1 = [await b1.allocate_producer_id() for _ in range(1001)]
    ids2 = [await b2.allocate_producer_id() for _ in range(3)]
    assert ids1 == list(range(1001))  # the 1001st id needed broker 1's second block
    assert ids2 == [2000, 2001, 2002]  # broker 2's block follows it
    doc, _ = await env.znode_json("/latest_producer_id_block")
    assert doc == {"version": 1, "broker": 2, "block_start": "2000", "block_end": "2999"}


async def test_a_request_waits_for_its_own_changes_only(cluster):
    """committed() waits for the changes the calling request (its task) started, as Kafka's
    DelayedCreatePartitions watches its own request's topics: a topic created while another
    request's change is still pending (there, a topic that gets no leader; in issue #21 a
    1,000-topic deletion) is answered once it is led, and the other request's error stays
    that request's."""
    _, brokers = cluster
    b1 = brokers[1].controller
    b1.commit_timeout_ms = 6000

    async def stuck() -> None:  # another request: its one replica is on no broker, so no leader
        b1.create_topic("stuck", -1, -1, None, {0: [9]})
        await b1.committed()
    other = asyncio.ensure_future(stuck())
    await asyncio.sleep(0)  # its create_topic ran

    b1.create_topic("fresh", 2, 3)
    async with asyncio.timeout(5):  # in this task: committed() waits for what this task started
        await b1.committed()
    assert all(p.leader in (1, 2, 3) for p in brokers[1].image.topics["fresh"].partitions.values())
    assert not other.done()
    with pytest.raises(KafkaProtocolError) as e:
        await other
    assert e.value.code == ErrorCode.REQUEST_TIMED_OUT
