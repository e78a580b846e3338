"""What only the elected KafkaController answers, against a real ZooKeeper and RecordingBrokers:
AlterPartition (a leader's ISR change, validated on leader epoch and partition epoch, the state
znode compare-and-set), ControlledShutdown (leaderships moved off the broker before it stops),
ElectLeaders (preferred / unclean) and the automatic preferred leader rebalance."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from controller.topic_partition import TopicPartition
from controller.zk.controller import KafkaController, StaleBrokerEpochError
from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionRequest
from protocol.messages.alter_partition_request import BrokerState, PartitionData, TopicData
from tests.cluster.controller_env import WAIT, ControllerEnv, idle
from tests.cluster.recording_broker import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    RecordingBroker,
)


async def ask(put: Callable[[Callable[[Any], None]], None]) -> Any:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    put(fut.set_result)
    return await asyncio.wait_for(fut, WAIT)


async def setup(env: ControllerEnv, assignment: dict[int, list[int]], **config: Any
                ) -> tuple[dict[int, RecordingBroker], KafkaController, uuid.UUID]:
    brokers = {i: await env.broker(i) for i in (1, 2, 3)}
    c = await env.controller(1, **config)
    await c.wait_until(lambda c: c.is_active, WAIT)
    topic_id = uuid.uuid4()
    await (await env.admin()).create_topic_assignment("t", topic_id, assignment)
    for b in brokers.values():
        await b.wait_for(lambda b: sum(len(s.partition_states) for r in b.of(UPDATE_METADATA) for s in r.topic_states
                                       if s.topic_name == "t") >= len(assignment))
    await idle(c)
    return brokers, c, topic_id


def alter(broker: RecordingBroker, topic_id: uuid.UUID, partition: int, leader_epoch: int, isr: list[int],
          partition_epoch: int, broker_epoch: int | None = None) -> AlterPartitionRequest:
    return AlterPartitionRequest(
        broker_id=broker.broker_id, broker_epoch=broker.epoch if broker_epoch is None else broker_epoch,
        topics=[TopicData(topic_id=topic_id, partitions=[PartitionData(
            partition_index=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
            new_isr_with_epochs=[BrokerState(broker_id=b, broker_epoch=-1) for b in isr])])])


def only_partition(response: Any) -> Any:
    assert response.error_code == 0, response
    (topic,) = response.topics
    (p,) = topic.partitions
    return p


async def test_alter_partition_validates_epochs_and_compare_and_sets_the_state(env):
    brokers, c, topic_id = await setup(env, {0: [1, 2, 3]})
    b1 = brokers[1]

    def send(req: AlterPartitionRequest) -> Any:
        return ask(lambda cb: c.alter_partitions(req, 3, cb))

    p = only_partition(await send(alter(b1, topic_id, 0, 0, [1, 2], 0)))
    assert (p.error_code, p.leader_id, p.leader_epoch, p.isr, p.partition_epoch) == (0, 1, 0, [1, 2], 1)
    assert await env.znode_json("/brokers/topics/t/partitions/0/state") == (
        {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2]}, 1)
    for b in brokers.values():  # every broker hears of the new ISR
        await b.wait_for(lambda b: any(s.isr == [1, 2] and s.zk_version == 1 for r in b.of(UPDATE_METADATA)
                                       for t in r.topic_states for s in t.partition_states))
    # the same request again (a retry after a lost answer): already applied, same answer
    p = only_partition(await send(alter(b1, topic_id, 0, 0, [1, 2], 0)))
    assert (p.error_code, p.isr, p.partition_epoch) == (0, [1, 2], 1)
    # a different change from the old partition epoch: refused
    p = only_partition(await send(alter(b1, topic_id, 0, 0, [1], 0)))
    assert p.error_code == ErrorCode.INVALID_UPDATE_VERSION
    # an older leader epoch: fenced; a newer one than the controller knows: not the controller
    assert only_partition(await send(alter(b1, topic_id, 0, -1, [1], 1))).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert only_partition(await send(alter(b1, topic_id, 0, 5, [1], 1))).error_code == ErrorCode.NOT_CONTROLLER
    # a replica that is not a live broker cannot join the ISR (KIP-841)
    assert only_partition(await send(alter(b1, topic_id, 0, 0, [1, 2, 9], 1))).error_code == ErrorCode.INELIGIBLE_REPLICA
    # a request from an old incarnation of the broker
    assert (await send(alter(b1, topic_id, 0, 0, [1], 1, broker_epoch=b1.epoch - 1))).error_code == \
        ErrorCode.STALE_BROKER_EPOCH
    # an unknown topic id
    r = await send(alter(b1, uuid.uuid4(), 0, 0, [1], 1))
    assert r.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    # a broker that is not the controller
    other = await env.controller(2)
    await other.wait_until(lambda o: o.active_controller_id == 1, WAIT)
    assert (await ask(lambda cb: other.alter_partitions(alter(b1, topic_id, 0, 0, [1], 1), 3, cb))).error_code == \
        ErrorCode.NOT_CONTROLLER
    assert (await env.znode_json("/brokers/topics/t/partitions/0/state"))[1] == 1  # nothing else was written


async def test_controlled_shutdown_moves_leaderships_off_the_broker(env):
    brokers, c, _ = await setup(env, {0: [2, 1, 3], 1: [1, 2, 3], 2: [2]})
    b2 = brokers[2]
    mark = len(b2.requests)
    with pytest.raises(StaleBrokerEpochError):
        result = await ask(lambda cb: c.controlled_shutdown(2, b2.epoch - 1, cb))
        raise result
    result = await ask(lambda cb: c.controlled_shutdown(2, b2.epoch, cb))
    # p2 has no other replica: broker 2 still leads it, but that is not "remaining" (Kafka's
    # replicatedPartitionsBrokerLeads): the broker may stop
    assert result == set()
    assert c.controller_context.partition_leadership_info[TopicPartition("t", 2)].leader_and_isr.leader == 2
    await idle(c)
    assert (await env.znode_json("/brokers/topics/t/partitions/0/state"))[0] == {
        "controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1, "isr": [1, 3]}
    assert (await env.znode_json("/brokers/topics/t/partitions/1/state"))[0] == {
        "controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1, "isr": [1, 3]}
    # broker 2 is told it follows p0 now, and to stop its p1 replica (not delete it) -- twice, as
    # Kafka's: doControlledShutdown's own StopReplica, then the OfflineReplica transition's
    def told(b: RecordingBroker, kind: int) -> list[Any]:
        return [s for r in b.requests[mark:] if r.api_key == kind for t in r.request.topic_states
                for s in t.partition_states]
    stops = await b2.wait_for(lambda b: len(told(b, STOP_REPLICA)) >= 2 and told(b, STOP_REPLICA))
    assert [(s.partition_index, s.delete_partition) for s in stops] == [(1, False), (1, False)]
    lai = await b2.wait_for(lambda b: told(b, LEADER_AND_ISR))
    assert [(s.partition_index, s.leader, s.leader_epoch) for s in lai] == [(0, 1, 1)]
    assert 2 in c.controller_context.shutting_down_broker_ids


async def test_elect_leaders_preferred_and_the_automatic_rebalance(env):
    brokers, c, topic_id = await setup(env, {0: [2, 1, 3], 1: [1, 2, 3]}, auto_leader_rebalance_enable=True,
                                       auto_leader_rebalance_initial_delay_s=0.1,
                                       leader_imbalance_check_interval_seconds=0.2)
    await brokers[2].kill()
    await brokers[1].wait_for(lambda b: any(s.partition_index == 0 and s.leader == 1 for r in b.of(LEADER_AND_ISR)
                                            for t in r.topic_states for s in t.partition_states))
    back = await RecordingBroker(2).start()
    env.brokers[2] = back
    await back.register(env.connect)
    await back.wait_for(lambda b: b.of(LEADER_AND_ISR))
    await idle(c)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    # 2 is not in p0's ISR: the preferred replica cannot lead yet
    result = await ask(lambda cb: c.elect_leaders([tp0, tp1, TopicPartition("t", 7)], "PREFERRED", cb))
    assert result == {
        tp0: (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
              "Failed to elect leader for partition t-0 under strategy PreferredReplicaPartitionLeaderElectionStrategy"),
        tp1: (ErrorCode.ELECTION_NOT_NEEDED, None),
        TopicPartition("t", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")}
    # the leader adds 2 back to the ISR; the automatic rebalance then hands p0 back to 2
    state = c.controller_context.leader_and_isr(tp0)
    r = await ask(lambda cb: c.alter_partitions(
        alter(brokers[1], topic_id, 0, state.leader_epoch, [1, 3, 2], state.partition_epoch), 3, cb))
    assert only_partition(r).error_code == 0
    await back.wait_for(lambda b: any(s.partition_index == 0 and s.leader == 2 for r in b.of(LEADER_AND_ISR)
                                      for t in r.topic_states for s in t.partition_states))
    await idle(c)
    state, _ = await env.znode_json("/brokers/topics/t/partitions/0/state")
    assert (state["leader"], state["leader_epoch"], state["isr"]) == (2, 2, [1, 3, 2])
    # now an explicit election is not needed
    assert await ask(lambda cb: c.elect_leaders([tp0], "PREFERRED", cb)) == {tp0: (ErrorCode.ELECTION_NOT_NEEDED, None)}
