"""EmbeddedController: adopting topics found on disk, and keeping producer ids above those the
logs already know -- both persisted, so a restart sees them."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from controller.image import BrokerInfo
from controller.metadata import EmbeddedController
from protocol.errors import ErrorCode, KafkaProtocolError

BROKER = BrokerInfo(3, "localhost", 9092)


def test_adopt_topic_keeps_its_id_and_persists(tmp_path: Path) -> None:
    c = EmbeddedController(tmp_path, BROKER)
    tid = uuid.UUID(int=11)
    topic = c.adopt_topic("orders", tid, 3)
    assert (topic.topic_id, sorted(topic.partitions), topic.configs) == (tid, [0, 1, 2], {})
    assert all(p.leader == 3 and p.replicas == p.isr == [3] for p in topic.partitions.values())
    with pytest.raises(KafkaProtocolError) as e:
        c.adopt_topic("orders", uuid.UUID(int=12), 1)
    assert e.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaProtocolError):
        c.adopt_topic("other", tid, 1)  # the id is taken

    again = EmbeddedController(tmp_path, BROKER)
    assert again.image.topics["orders"].topic_id == tid
    assert len(again.image.topics["orders"].partitions) == 3


def test_adopted_partitions_start_a_new_leader_epoch(tmp_path: Path) -> None:
    """Above the latest epoch each log holds; 0 for a log without epochs."""
    c = EmbeddedController(tmp_path, BROKER)
    topic = c.adopt_topic("orders", uuid.UUID(int=11), 3, {0: 4, 2: 0})
    assert [topic.partitions[p].leader_epoch for p in range(3)] == [5, 0, 1]


def test_reserve_producer_ids_through(tmp_path: Path) -> None:
    c = EmbeddedController(tmp_path, BROKER)
    c.reserve_producer_ids_through(-1)  # no producer state: nothing changes
    assert c.allocate_producer_id_now() == 0
    c.reserve_producer_ids_through(4000)
    assert c.allocate_producer_id_now() == 4001
    c.reserve_producer_ids_through(10)  # below what is handed out already: no effect
    assert c.allocate_producer_id_now() == 4002
    assert EmbeddedController(tmp_path, BROKER).allocate_producer_id_now() > 4002
