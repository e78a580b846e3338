"""KafkaController election, failover and fencing against a real ZooKeeper: several controllers in
this process, each on its own session; a session is ended by closing it or cut with a ZkProxy.
Every wait is on an event (a controller's state, a request a RecordingBroker receives), bounded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from controller.zk.event_manager import TopicChange
from tests.cluster.controller_env import WAIT, first_active, idle
from tests.cluster.recording_broker import LEADER_AND_ISR, UPDATE_METADATA, RecordingBroker
from tests.cluster.zk_proxy import ZkProxy
from tests.zookeeper import ZooKeeperServer


@pytest.fixture
async def proxy(zookeeper: ZooKeeperServer) -> AsyncIterator[ZkProxy]:
    """Tests name it before `env`: fixtures are torn down in the reverse order of their set-up,
    so the controllers connected through the proxy shut down while it still forwards. Torn down
    after it, a controller whose event was waiting on ZooKeeper then (in about half the runs)
    waits out its event manager's 30 s shutdown bound, which cancels the event."""
    p = await ZkProxy(zookeeper.port).start()
    yield p
    await p.close()


async def test_one_of_three_is_elected_and_the_epoch_moves_on_failover(env):
    admin = await env.admin()
    contenders = [await env.controller(i, start=False) for i in (1, 2, 3)]
    for c in contenders:
        c.startup()
    winner = await first_active(contenders)
    others = [c for c in contenders if c is not winner]
    for c in others:  # the losers learn who won
        await c.wait_until(lambda c: c.active_controller_id == winner.broker_id, WAIT)
    assert [c.is_active for c in contenders].count(True) == 1
    assert await admin.get_controller_id() == winner.broker_id
    assert (await admin.get_controller_epoch())[0] == 1 == winner.epoch
    # the winner's session ends: one of the others takes over with the next epoch
    await winner.shutdown()
    await winner.zk.close()
    successor = await first_active(others)
    assert successor.epoch == 2
    assert await admin.get_controller_id() == successor.broker_id
    assert (await admin.get_controller_epoch())[0] == 2
    last = next(c for c in others if c is not successor)
    await last.wait_until(lambda c: c.active_controller_id == successor.broker_id, WAIT)
    assert not last.is_active


async def test_an_expired_controller_resigns_and_the_other_takes_over(proxy, env, caplog):
    caplog.set_level(logging.INFO)
    await env.broker(1)
    await env.broker(2)
    first = await env.controller(1, connect=proxy.connect_string("/odradek"), session_timeout_ms=1000)
    await first.wait_until(lambda c: c.is_active, WAIT)
    await idle(first)
    assert set(first.controller_channel_manager.broker_state_info) == {1, 2}
    second = await env.controller(2)
    await second.wait_until(lambda c: c.active_controller_id == 1, WAIT)
    proxy.block()  # the server expires the first controller's silent session
    await second.wait_until(lambda c: c.is_active, WAIT)
    assert second.epoch == 2
    # every broker hears the new controller's epoch
    for b in env.brokers.values():
        await b.wait_for(lambda b: any(r.controller_epoch == 2 for r in b.of(UPDATE_METADATA)))
    proxy.unblock()
    # the old one finds its session expired: it resigns, re-registers and sees the new controller
    await first.wait_until(lambda c: c.active_controller_id == 2, WAIT)
    await idle(first)
    assert not first.is_active
    assert first.controller_channel_manager.broker_state_info == {}
    assert first.controller_context.all_topics == set()
    assert "[Controller id=1] Resigned" in caplog.messages


async def test_a_zombie_controllers_writes_are_refused_by_the_epoch_check(proxy, env, caplog):
    """Controller 1 is cut off from ZooKeeper (its session survives); an operator deletes
    /controller, so controller 2 is elected with epoch 2. Controller 1 still believes it leads and
    handles a topic change: its state znode write carries the old /controller_epoch version, is
    refused (ControllerMovedError), and it resigns. The partitions are controller 2's."""
    caplog.set_level(logging.INFO)
    for i in (1, 2, 3):
        await env.broker(i)
    admin = await env.admin()
    zombie = await env.controller(1, connect=proxy.connect_string("/odradek"), session_timeout_ms=10_000)
    await zombie.wait_until(lambda c: c.is_active, WAIT)
    await idle(zombie)
    successor = await env.controller(2)
    await successor.wait_until(lambda c: c.active_controller_id == 1, WAIT)
    proxy.block()
    await admin.zk.delete("/controller")
    await successor.wait_until(lambda c: c.is_active, WAIT)
    assert successor.epoch == 2 and zombie.is_active and zombie.epoch == 1
    await admin.create_topic_assignment("t", None, {0: [1, 2, 3]})
    zombie.event_manager.put(TopicChange())  # what its topic watch would have queued
    await asyncio.sleep(0)
    proxy.unblock()
    await zombie.wait_until(lambda c: not c.is_active, WAIT)
    await idle(zombie, successor)
    assert any("Controller moved to another broker when processing TopicChange" in m for m in caplog.messages)
    state, version = await env.znode_json("/brokers/topics/t/partitions/0/state")
    assert state == {"controller_epoch": 2, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]}
    assert version == 0
    for b in env.brokers.values():
        lais = await b.wait_for(lambda b: [r for r in b.of(LEADER_AND_ISR) if r.topic_states])
        assert {r.controller_epoch for r in lais} == {2}  # nothing from the zombie about t


async def test_startup_tells_every_broker_the_live_brokers_then_the_partition_states(env):
    admin = await env.admin()
    brokers = {i: await env.broker(i) for i in (1, 2, 3)}
    # a topic left by an earlier controller: p0 led by 2 (epoch 4), p1 never initialised, p2 led by
    # broker 4 which is not registered (its ISR still has 1)
    await admin.create_topic_assignment("pre", None, {0: [1, 2, 3], 1: [2, 3, 1], 2: [4, 1]})
    from controller.election import LeaderAndIsr, LeaderIsrAndControllerEpoch

    await admin.create_topic_partition_states({
        ("pre", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 4, (2, 3, 1)), 0),
        ("pre", 2): LeaderIsrAndControllerEpoch(LeaderAndIsr(4, 2, (4, 1)), 0)})
    c = await env.controller(1)
    await c.wait_until(lambda c: c.is_active, WAIT)
    await idle(c)
    topic_id = c.controller_context.topic_ids["pre"]
    # the topic had no id: the controller gave it one, in the topic znode
    assert (await env.znode_json("/brokers/topics/pre"))[0]["topic_id"] is not None

    def seen(b: RecordingBroker) -> dict[int, tuple[int, int, list[int]]]:
        """The partition states of the UpdateMetadata requests a broker received, latest wins."""
        out = {}
        for um in b.of(UPDATE_METADATA):
            for t in um.topic_states:
                for p in t.partition_states:
                    out[p.partition_index] = (p.leader, p.leader_epoch, p.offline_replicas)
        return out

    final = {0: (2, 4, []), 1: (2, 0, []), 2: (1, 4, [4])}
    for b in brokers.values():  # requests travel after the controller is done: wait for the last
        await b.wait_for(lambda b: seen(b) == final)
    for b in brokers.values():
        first = b.requests[0]
        assert first.api_key == UPDATE_METADATA and first.version == 8
        um = first.request
        assert (um.controller_id, um.controller_epoch, um.broker_epoch) == (1, 1, b.epoch)
        assert um.topic_states == []
        assert sorted(x.id for x in um.live_brokers) == [1, 2, 3]
        endpoint = next(x for x in um.live_brokers if x.id == b.broker_id).endpoints[0]
        assert (endpoint.host, endpoint.port, endpoint.listener, endpoint.security_protocol) == (
            "127.0.0.1", b.port, "PLAINTEXT", 0)
    lai = {i: [(s, r) for r in brokers[i].of(LEADER_AND_ISR) for t in r.topic_states for s in t.partition_states]
           for i in brokers}
    assert all(r.broker_epoch == brokers[i].epoch and r.controller_epoch == 1 for i in lai for _, r in lai[i])
    # p0: the existing leader and epoch, to every replica
    for i in (1, 2, 3):
        s = next(s for s, _ in lai[i] if s.partition_index == 0)
        assert (s.leader, s.leader_epoch, s.isr, s.replicas, s.is_new) == (2, 4, [2, 3, 1], [1, 2, 3], False)
    # p1: initialised: the first live replica leads, the live replicas are the ISR, epochs 0
    for i in (1, 2, 3):
        s = next(s for s, _ in lai[i] if s.partition_index == 1)
        assert (s.leader, s.leader_epoch, s.isr, s.partition_epoch, s.is_new) == (2, 0, [2, 3, 1], 0, True)
    # p2: broker 4 leaves the ISR, then 1 is elected from it
    state, version = await env.znode_json("/brokers/topics/pre/partitions/2/state")
    assert state == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 4, "isr": [1]}
    last = [s for s, _ in lai[1] if s.partition_index == 2][-1]
    assert (last.leader, last.leader_epoch, last.isr, last.partition_epoch) == (1, 4, [1], version)
    assert all(t.topic_id == topic_id for r in brokers[2].of(LEADER_AND_ISR) for t in r.topic_states)
