"""Deleting many topics at once (issue #21 §8), against a real ZooKeeper and RecordingBrokers:
the controller batches the deletion as Kafka's TopicDeletionManager does -- one StopReplica
(delete=false) and one StopReplica (delete=true) per broker for a batch of topics (at most
DELETION_BATCH_SIZE per controller event), one TopicDeletionStopReplicaResponseReceived event per
broker answer -- so a topic created meanwhile is published after a handful of controller events,
not behind one event per deleted replica nor behind the whole deletion."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

from controller.zk.client import CreateOp
from controller.zk.data import DeleteTopicsTopicZNode
from controller.zk.event_manager import (
    ControllerEvent,
    TopicChange,
    TopicDeletionResume,
    TopicDeletionStopReplicaResponseReceived,
)
from controller.zk.topic_deletion_manager import DELETION_BATCH_SIZE
from tests.cluster.controller_env import WAIT, ControllerEnv, idle
from tests.cluster.recording_broker import LEADER_AND_ISR, STOP_REPLICA

TOPICS = 200


class EventLog:
    """Wraps the controller's event processor to record every event it processes, in order."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.events: list[ControllerEvent] = []

    async def process(self, event: ControllerEvent) -> None:
        self.events.append(event)
        await self.processor.process(event)

    def preempt(self, event: ControllerEvent) -> None:
        self.processor.preempt(event)


def topics_in(requests: Iterable[Any]) -> set[str]:
    return {t.topic_name for r in requests for t in r.topic_states}


async def test_many_deletions_are_batched_and_do_not_hold_back_a_new_topic(env: ControllerEnv) -> None:
    brokers = {i: await env.broker(i) for i in (1, 2, 3)}
    c = await env.controller(1)
    await c.wait_until(lambda c: c.is_active, WAIT)
    await idle(c)
    admin = await env.admin()
    names = [f"doomed-{i:03d}" for i in range(TOPICS)]
    await asyncio.gather(*(admin.create_topic_assignment(t, uuid.uuid4(), {0: [1 + (i + k) % 3 for k in range(3)]})
                           for i, t in enumerate(names)))
    # half the topics have a config znode, as topics created by Kafka's tools do: theirs go in one
    # multi each; the others' multi fails on the missing config and they go znode by znode
    await asyncio.gather(*(admin.set_or_create_entity_configs("topics", t, {"retention.ms": "1000"},
                                                              controller_check=False) for t in names[::2]))
    for b in brokers.values():
        await b.wait_for(lambda b: topics_in(b.of(LEADER_AND_ISR)) >= set(names), WAIT * 2)
    await idle(c, timeout=WAIT * 2)
    marks = {i: len(b.requests) for i, b in brokers.items()}
    log = EventLog(c.event_manager.processor)
    c.event_manager.processor = log

    # broker 3 answers StopReplica only once the new topic is published: the deletions stay pending
    release = brokers[3].hold[STOP_REPLICA] = asyncio.Event()

    # Kafka's DeleteTopics writes one /admin/delete_topics/<t> per topic; one multi makes the
    # controller see all 200 in one TopicDeletion event, as a fast admin client would
    await admin.zk.multi([CreateOp(DeleteTopicsTopicZNode.path(t), None) for t in names])
    await brokers[3].wait_for(lambda b: any(r.api_key == STOP_REPLICA for r in b.requests[marks[3]:]), WAIT * 2)
    await admin.create_topic_assignment("fresh", uuid.uuid4(), {0: [1, 2, 3]})
    await brokers[1].wait_for(lambda b: "fresh" in topics_in(b.of(LEADER_AND_ISR)), WAIT * 2)
    release.set()
    for _ in range(int(WAIT * 4 / 0.1)):
        if not await admin.get_topic_deletions():
            break
        await asyncio.sleep(0.1)
    await idle(c, timeout=WAIT * 2)

    # every deleted topic is gone from ZooKeeper and from the controller; the new one lives
    assert await admin.get_topic_deletions() == []
    assert await admin.get_all_topics_in_cluster() == {"fresh"}
    assert not set(await admin.get_children("/config/topics")) & set(names)
    assert c.controller_context.all_topics == {"fresh"}
    assert c.controller_context.topics_to_be_deleted == set()
    # Kafka's batching: one StopReplica(delete=false) and one StopReplica(delete=true) per broker
    # for each batch of DELETION_BATCH_SIZE topics the controller starts in one event
    batches = -(-TOPICS // DELETION_BATCH_SIZE)
    assert batches == 2  # the test's point: more than one batch, none of one topic
    for i, b in brokers.items():
        stops = [r.request for r in b.requests[marks[i]:] if r.api_key == STOP_REPLICA]
        assert len(stops) == 2 * batches, (i, len(stops))
        assert [len(topics_in([s])) for s in stops] == [DELETION_BATCH_SIZE] * (2 * batches)
        assert topics_in(stops) == set(names)
    # one response event per broker and batch, and the new topic waited behind at most those of
    # the two brokers that answer (broker 3 held its answers until the topic was published)
    responses = [e for e in log.events if isinstance(e, TopicDeletionStopReplicaResponseReceived)]
    assert len(responses) == 3 * batches, len(responses)
    first_change = next(n for n, e in enumerate(log.events) if isinstance(e, TopicChange))
    before = log.events[:first_change]
    assert len([e for e in before if isinstance(e, TopicDeletionStopReplicaResponseReceived)]) <= 2 * batches
    # the batches after the first are started by TopicDeletionResume events (or by answers)
    assert any(isinstance(e, TopicDeletionResume) for e in log.events)


async def test_a_broker_down_during_the_deletion_finishes_it_when_it_returns(env: ControllerEnv) -> None:
    """Kafka's halt: the dead broker's replicas are ReplicaDeletionIneligible and its topics wait,
    every znode kept, until it registers again and is told to delete them; a topic of the same name
    created afterwards is new and stays."""
    brokers = {i: await env.broker(i) for i in (1, 2, 3)}
    c = await env.controller(1)
    await c.wait_until(lambda c: c.is_active, WAIT)
    admin = await env.admin()
    names = [f"gone-{i:02d}" for i in range(20)]
    await asyncio.gather(*(admin.create_topic_assignment(t, uuid.uuid4(), {0: [1, 2, 3], 1: [3, 1, 2]})
                           for t in names))
    await brokers[3].wait_for(lambda b: topics_in(b.of(LEADER_AND_ISR)) >= set(names), WAIT)
    await idle(c)
    await brokers[3].kill()
    for _ in range(int(WAIT / 0.05)):
        if 3 not in c.controller_context.live_or_shutting_down_broker_ids:
            break
        await asyncio.sleep(0.05)
    await idle(c)
    assert 3 not in c.controller_context.live_or_shutting_down_broker_ids
    marks = {i: len(brokers[i].requests) for i in (1, 2)}
    await admin.zk.multi([CreateOp(DeleteTopicsTopicZNode.path(t), None) for t in names])

    def deleted(b: Any, since: int) -> set[tuple[str, int]]:
        return {(t.topic_name, s.partition_index) for r in b.requests[since:] if r.api_key == STOP_REPLICA
                for t in r.request.topic_states for s in t.partition_states if s.delete_partition}

    every = {(t, p) for t in names for p in (0, 1)}
    for i in (1, 2):
        await brokers[i].wait_for(lambda b, i=i: deleted(b, marks[i]) == every, WAIT)
    await idle(c)
    # halted: nothing of the topics is gone while broker 3 holds replicas of them
    assert set(await admin.get_topic_deletions()) == set(names)
    assert await admin.get_all_topics_in_cluster() >= set(names)
    assert c.controller_context.topics_ineligible_for_deletion == set(names)

    back = await env.broker(3)
    await back.wait_for(lambda b: deleted(b, 0) == every, WAIT)
    for _ in range(int(WAIT / 0.1)):
        if not await admin.get_topic_deletions():
            break
        await asyncio.sleep(0.1)
    await idle(c)
    assert await admin.get_topic_deletions() == []
    assert not await admin.get_all_topics_in_cluster() & set(names)
    assert c.controller_context.topics_to_be_deleted == set()
    # the same name again is a new topic, which the finished deletion leaves alone
    mark = len(brokers[1].requests)
    await admin.create_topic_assignment(names[0], uuid.uuid4(), {0: [1, 2, 3]})
    await brokers[1].wait_for(lambda b: names[0] in topics_in(r.request for r in b.requests[mark:]
                                                              if r.api_key == LEADER_AND_ISR), WAIT)
    await idle(c)
    assert names[0] in await admin.get_all_topics_in_cluster()
    assert await admin.path_exists(f"/brokers/topics/{names[0]}/partitions/0/state")
    assert not c.controller_context.is_topic_queued_up_for_deletion(names[0])
