"""KafkaController's watches as events, against a real ZooKeeper and RecordingBrokers that decode
the real frames: a new topic, added partitions, a broker leaving and coming back, a topic
deletion -- what each broker is sent and what the state znodes hold (Kafka 3.9's JSON)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from controller.zk.data import Broker, BrokerInfo, EndPoint, ReplicaAssignment
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.messages import AlterPartitionRequest
from protocol.messages.alter_partition_request import BrokerState, PartitionData, TopicData
from tests.cluster.controller_env import WAIT, ControllerEnv, idle
from tests.cluster.recording_broker import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    RecordingBroker,
)


async def cluster(env: ControllerEnv, n: int = 3):
    brokers = {i: await env.broker(i) for i in range(1, n + 1)}
    c = await env.controller(1)
    await c.wait_until(lambda c: c.is_active, WAIT)
    await idle(c)
    return brokers, c


def partition_states(b: RecordingBroker, api_key: int, topic: str, start: int = 0) -> list[tuple[Any, Any]]:
    """(request, partition state) for `topic` in the requests of kind `api_key` from index `start`."""
    return [(r.request, s) for r in b.requests[start:] if r.api_key == api_key
            for t in r.request.topic_states if t.topic_name == topic for s in t.partition_states]


async def test_a_new_topic_gets_leaders_isrs_and_metadata_everywhere(env):
    brokers, _c = await cluster(env)
    admin = await env.admin()
    topic_id = uuid.uuid4()
    assignment = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3]}
    await admin.create_topic_assignment("orders", topic_id, assignment)
    for b in brokers.values():
        mine = {p for p, r in assignment.items() if b.broker_id in r}
        await b.wait_for(lambda b, mine=mine: {s.partition_index for _, s in partition_states(b, LEADER_AND_ISR, "orders")} == mine)
        await b.wait_for(lambda b: len(partition_states(b, UPDATE_METADATA, "orders")) == len(assignment))
        lai = partition_states(b, LEADER_AND_ISR, "orders")
        for request, s in lai:
            replicas = assignment[s.partition_index]
            assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (1, 1, b.epoch)
            assert (s.leader, s.leader_epoch, s.isr, s.partition_epoch, s.replicas, s.is_new,
                    s.leader_recovery_state) == (replicas[0], 0, replicas, 0, replicas, True, 0)
            assert next(t for t in request.topic_states if t.topic_name == "orders").topic_id == topic_id
            assert {ll.broker_id: ll.port for ll in request.live_leaders} == {
                s.leader: brokers[s.leader].port for _, s in lai if _ is request}
        assert all(r.version == 7 for r in b.requests if r.api_key == LEADER_AND_ISR)
        # LeaderAndIsr first, then the UpdateMetadata describing the same partitions
        kinds = [r.api_key for r in b.requests if any(t.topic_name == "orders" for t in r.request.topic_states)]
        assert kinds[0] == LEADER_AND_ISR and kinds[-1] == UPDATE_METADATA
        um = {s.partition_index: (s.leader, s.isr, s.zk_version, s.replicas, s.offline_replicas)
              for _, s in partition_states(b, UPDATE_METADATA, "orders")}
        assert um == {p: (r[0], r, 0, r, []) for p, r in assignment.items()}
    for p, replicas in assignment.items():
        state, version = await env.znode_json(f"/brokers/topics/orders/partitions/{p}/state")
        assert state == {"controller_epoch": 1, "leader": replicas[0], "version": 1, "leader_epoch": 0,
                         "isr": replicas}
        assert version == 0


async def test_added_partitions_come_online(env):
    brokers, _c = await cluster(env)
    admin = await env.admin()
    topic_id = uuid.uuid4()
    await admin.create_topic_assignment("grow", topic_id, {0: [1, 2]})
    await brokers[2].wait_for(lambda b: partition_states(b, LEADER_AND_ISR, "grow"))
    # CreatePartitions writes the longer assignment into the topic znode
    await admin.set_topic_assignment("grow", topic_id, {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((3, 1))})
    s = (await brokers[3].wait_for(lambda b: partition_states(b, LEADER_AND_ISR, "grow")))[0][1]
    assert (s.partition_index, s.leader, s.isr, s.is_new) == (1, 3, [3, 1], True)
    await brokers[2].wait_for(lambda b: any(s.partition_index == 1 for _, s in partition_states(b, UPDATE_METADATA, "grow")))
    assert not any(s.partition_index == 1 for _, s in partition_states(brokers[2], LEADER_AND_ISR, "grow"))
    assert (await env.znode_json("/brokers/topics/grow/partitions/1/state"))[0]["leader"] == 3


async def test_a_broker_leaving_and_coming_back(env):
    brokers, c = await cluster(env)
    admin = await env.admin()
    # p0 led by 2; p1 followed by 2; p2 without 2; p3 on 2 alone (RF 1)
    assignment = {0: [2, 1, 3], 1: [1, 2, 3], 2: [3, 1], 3: [2]}
    await admin.create_topic_assignment("t", uuid.uuid4(), assignment)
    for b in brokers.values():
        await b.wait_for(lambda b: len(partition_states(b, UPDATE_METADATA, "t")) == 4)
    await idle(c)
    marks = {i: len(b.requests) for i, b in brokers.items()}
    await brokers[2].kill()
    lai1 = await brokers[1].wait_for(
        lambda b: {s.partition_index: s for _, s in partition_states(b, LEADER_AND_ISR, "t", marks[1])}.keys() >= {0, 1}
        and {s.partition_index: s for _, s in partition_states(b, LEADER_AND_ISR, "t", marks[1])})
    # p0: a new leader from the ISR (the first live replica of the assignment), epoch + 1
    assert (lai1[0].leader, lai1[0].leader_epoch, lai1[0].isr, lai1[0].partition_epoch) == (1, 1, [1, 3], 1)
    # p1: the same leader, the ISR shrunk, epoch + 1
    assert (lai1[1].leader, lai1[1].leader_epoch, lai1[1].isr, lai1[1].partition_epoch) == (1, 1, [1, 3], 1)
    await idle(c)
    expected = {0: ({"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1, "isr": [1, 3]}, 1),
                1: ({"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1, "isr": [1, 3]}, 1),
                2: ({"controller_epoch": 1, "leader": 3, "version": 1, "leader_epoch": 0, "isr": [3, 1]}, 0),
                # RF 1: no one to elect; the leader goes (-1), the last ISR member stays
                3: ({"controller_epoch": 1, "leader": -1, "version": 1, "leader_epoch": 1, "isr": [2]}, 1)}
    for p, want in expected.items():
        assert await env.znode_json(f"/brokers/topics/t/partitions/{p}/state") == want
    for i in (1, 3):
        def um(b: RecordingBroker, i: int = i) -> dict[int, Any]:
            return {s.partition_index: (s.leader, s.isr, s.offline_replicas)
                    for _, s in partition_states(b, UPDATE_METADATA, "t", marks[i])}
        await brokers[i].wait_for(lambda b, um=um: {p: um(b).get(p) for p in (0, 1, 3)} == {
            0: (1, [1, 3], [2]), 1: (1, [1, 3], [2]), 3: (-1, [2], [2])})
        live = [r.request for r in brokers[i].requests[marks[i]:] if r.api_key == UPDATE_METADATA][-1].live_brokers
        assert sorted(x.id for x in live) == [1, 3]
    assert set(c.controller_channel_manager.broker_state_info) == {1, 3}
    assert c.controller_context.partition_states.state(("t", 3)).name == "OfflinePartition"

    # the broker comes back (a new process: new port, new session, new epoch)
    back = await RecordingBroker(2).start()
    env.brokers[2] = back
    epoch = await back.register(env.connect)
    assert epoch > brokers[2].epoch
    def latest(b: RecordingBroker) -> dict[int, Any]:
        return {s.partition_index: s for _, s in partition_states(b, LEADER_AND_ISR, "t")}

    # told the current state of its replicas, then p3 (no leader) is elected again
    lai = await back.wait_for(lambda b: (m := latest(b)).keys() >= {0, 1, 3} and m[3].leader == 2 and m)
    first = back.requests[0]
    assert first.api_key == UPDATE_METADATA and {s.partition_index for t in first.request.topic_states
                                                 for s in t.partition_states} == {0, 1, 2, 3}
    assert all(r.request.broker_epoch == epoch for r in back.requests)
    assert (lai[0].leader, lai[0].isr) == (1, [1, 3]) and (lai[1].leader, lai[1].isr) == (1, [1, 3])
    # p3 is led by its only replica again
    assert (lai[3].leader, lai[3].leader_epoch, lai[3].isr) == (2, 2, [2])
    await idle(c)
    assert (await env.znode_json("/brokers/topics/t/partitions/3/state"))[0] == {
        "controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 2, "isr": [2]}


async def test_topic_deletion_stops_and_deletes_replicas_then_removes_the_znodes(env):
    brokers, c = await cluster(env)
    admin = await env.admin()
    assignment = {0: [1, 2], 1: [2, 3]}
    await admin.create_topic_assignment("doomed", uuid.uuid4(), assignment)
    await admin.set_or_create_entity_configs("topics", "doomed", {"retention.ms": "1000"}, controller_check=False)
    for b in brokers.values():
        await b.wait_for(lambda b: len(partition_states(b, UPDATE_METADATA, "doomed")) == 2)
    await idle(c)
    marks = {i: len(b.requests) for i, b in brokers.items()}
    gone = asyncio.Event()

    class Watch:
        path = "/admin/delete_topics/doomed"

        def handle_creation(self) -> None: ...

        def handle_deletion(self) -> None:
            gone.set()

        def handle_data_change(self) -> None: ...

    admin.zk.register_znode_change_handler(Watch())
    await admin.create_delete_topic_path("doomed")
    await admin.zk.exists(Watch.path, watch=True)
    await asyncio.wait_for(gone.wait(), WAIT)
    await idle(c)
    for path in ("/brokers/topics/doomed", "/config/topics/doomed", "/admin/delete_topics/doomed"):
        assert not await admin.path_exists(path), path
    for i, b in brokers.items():
        mine = {p for p, r in assignment.items() if i in r}
        stops = [(r.request, t, s) for r in b.requests[marks[i]:] if r.api_key == STOP_REPLICA
                 for t in r.request.topic_states for s in t.partition_states]
        assert all(r.version == 4 for r in b.requests if r.api_key == STOP_REPLICA)
        deleted = {s.partition_index for _, t, s in stops if s.delete_partition}
        assert deleted == mine, (i, stops)
        assert all(s.leader_epoch == -2 and t.topic_name == "doomed" for _, t, s in stops)
        assert all(req.broker_epoch == b.epoch and req.controller_epoch == 1 for req, _, _ in stops)
        # the brokers were told the topic is being deleted (leader -2) before being told to delete
        um = [s for _, s in partition_states(b, UPDATE_METADATA, "doomed", marks[i])]
        assert um and all(s.leader == -2 for s in um)
    assert "doomed" not in c.controller_context.all_topics
    assert c.controller_context.topics_to_be_deleted == set()
    # a topic of the same name can be created again
    await admin.create_topic_assignment("doomed", uuid.uuid4(), {0: [3]})
    await brokers[3].wait_for(lambda b: any(s.is_new for _, s in partition_states(b, LEADER_AND_ISR, "doomed", marks[3])))


async def test_unclean_election_only_for_topics_that_enable_it(env):
    """Both topics' ISR is only broker 1 when it dies: the topic with
    unclean.leader.election.enable=true gets broker 2 as leader (ISR [2], RECOVERING, as Kafka
    writes it); the other stays offline, its last ISR member kept."""
    brokers, c = await cluster(env)
    admin = await env.admin()
    ids = {t: uuid.uuid4() for t in ("clean", "unclean")}
    await admin.set_or_create_entity_configs("topics", "unclean", {"unclean.leader.election.enable": "true"},
                                             controller_check=False)
    for t, topic_id in ids.items():
        await admin.create_topic_assignment(t, topic_id, {0: [1, 2]})
    await brokers[2].wait_for(lambda b: all(partition_states(b, UPDATE_METADATA, t) for t in ids))
    # the leader shrinks each ISR to itself (broker 2 fell behind)
    for topic_id in ids.values():
        fut = asyncio.get_running_loop().create_future()
        c.alter_partitions(AlterPartitionRequest(broker_id=1, broker_epoch=brokers[1].epoch, topics=[TopicData(
            topic_id=topic_id, partitions=[PartitionData(partition_index=0, leader_epoch=0, partition_epoch=0,
                                                         new_isr_with_epochs=[BrokerState(broker_id=1)])])]),
            3, fut.set_result)
        assert (await asyncio.wait_for(fut, WAIT)).topics[0].partitions[0].error_code == 0
    await idle(c)
    await brokers[1].kill()
    s = await brokers[2].wait_for(lambda b: next((s for _, s in partition_states(b, LEADER_AND_ISR, "unclean")
                                                  if s.leader == 2), None))
    assert (s.isr, s.leader_epoch, s.leader_recovery_state) == ([2], 1, 1)
    await idle(c)
    assert (await env.znode_json("/brokers/topics/unclean/partitions/0/state"))[0] == {
        "controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 1, "isr": [2], "leader_recovery_state": 1}
    assert (await env.znode_json("/brokers/topics/clean/partitions/0/state"))[0] == {
        "controller_epoch": 1, "leader": -1, "version": 1, "leader_epoch": 1, "isr": [1]}
    assert c.partition_state_machine.unclean_leader_elections == 1


async def test_a_changed_registration_is_sent_to_every_broker(env):
    brokers, c = await cluster(env)
    b2 = brokers[2]
    moved = BrokerInfo(Broker(2, (EndPoint("127.0.0.1", b2.port, "PLAINTEXT", "PLAINTEXT"),
                                  EndPoint("127.0.0.1", 19093, "EXTERNAL", "SSL")), None))
    await KafkaZkClient(b2.zk).update_broker_info(moved)

    def endpoints(b: RecordingBroker) -> Any:
        for r in reversed(b.of(UPDATE_METADATA)):
            two = next(x for x in r.live_brokers if x.id == 2)
            if len(two.endpoints) == 2:
                return [(e.listener, e.port, e.security_protocol) for e in two.endpoints]
        return None

    for b in brokers.values():
        assert await b.wait_for(endpoints) == [("PLAINTEXT", b2.port, 0), ("EXTERNAL", 19093, 1)]
    assert c.controller_context.live_brokers[2].endpoint("EXTERNAL") is not None


async def test_a_log_dir_event_takes_the_brokers_failed_replicas_offline_at_once(env):
    """Kafka's LogDirEventNotification: broker 2 lost the log dir of its replicas of p0 (which
    it leads) and p1; the controller sends it LeaderAndIsr for all its replicas, and the
    KAFKA_STORAGE_ERROR answers take those two offline at once -- p0 gets a new leader, both
    ISRs lose 2 (no wait for its session or replica.lag.time.max.ms) -- while p2 on broker 2 is
    left alone; the notification is deleted. One left from before a failover is deleted by the
    new controller (its startup asks every broker anyway)."""
    admin = await env.admin()
    stale = await admin.propagate_log_dir_event(3)
    assert stale.startswith("/log_dir_event_notification/log_dir_event_")
    brokers, c = await cluster(env)
    assert await admin.get_children("/log_dir_event_notification") == []
    assignment = {0: [2, 1, 3], 1: [1, 2, 3], 2: [3, 2]}
    await admin.create_topic_assignment("t", uuid.uuid4(), assignment)
    for b in brokers.values():
        await b.wait_for(lambda b: len(partition_states(b, UPDATE_METADATA, "t")) == 3)
    await idle(c)
    mark = len(brokers[2].requests)
    brokers[2].offline = {("t", 0), ("t", 1)}
    path = await admin.propagate_log_dir_event(2)
    assert await env.znode_json(path) == ({"version": 1, "broker": 2, "event": 1}, 0)
    asked = await brokers[2].wait_for(
        lambda b: {s.partition_index for _, s in partition_states(b, LEADER_AND_ISR, "t", mark)} == {0, 1, 2})
    assert asked
    await idle(c)
    assert await admin.get_children("/log_dir_event_notification") == []
    states = {p: (await env.znode_json(f"/brokers/topics/t/partitions/{p}/state"))[0] for p in assignment}
    assert (states[0]["leader"], states[0]["isr"]) == (1, [1, 3])
    assert (states[1]["leader"], states[1]["isr"]) == (1, [1, 3])
    assert (states[2]["leader"], states[2]["isr"]) == (3, [3, 2])  # its dir did not fail
    um = await brokers[1].wait_for(lambda b: (m := {s.partition_index: s.offline_replicas
                                                    for _, s in partition_states(b, UPDATE_METADATA, "t")})
                                   and m[0] == [2] and m)
    assert (um[0], um[1], um[2]) == ([2], [2], [])
