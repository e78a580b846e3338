"""KIP-392's replica selection as Kafka 3.9 makes it (broker.replica_selector), pure logic: the
RackAwareReplicaSelector's choice, which replicas a leader offers it (Partition.read_replica_candidates:
in-sync followers holding the fetch offset) and that a response never names the leader or a
replica without an endpoint on the client's listener."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.partition import Partition
from broker.replica_selector import (
    NO_NODE,
    RACK_AWARE_REPLICA_SELECTOR,
    ClientMetadata,
    PartitionView,
    RackAwareReplicaSelector,
    ReplicaView,
    preferred_read_replica,
    replica_selector,
)
from controller.image import PartitionState, TopicState
from storage.config import LogConfig
from storage.log import Log

TP = ("t", 0)
RACKS = {1: "r1", 2: "r2", 3: "r3", 4: "r3"}


def client(rack: str) -> ClientMetadata:
    return ClientMetadata(rack_id=rack, client_id="c", client_address="127.0.0.1:5000", listener_name="PLAINTEXT")


def pick(rack: str, candidates: list[tuple[int, int, int]], leader: int = 1, leader_leo: int = 100,
         racks: dict[int, str | None] | None = None) -> int | None:
    return preferred_read_replica(RackAwareReplicaSelector(), TP, client(rack), leader, leader_leo, candidates,
                                  RACKS if racks is None else racks)


def test_a_follower_in_the_clients_rack_is_preferred() -> None:
    assert pick("r2", [(2, 100, 0), (3, 100, 0)]) == 2
    assert pick("r3", [(2, 100, 0), (3, 100, 0)]) == 3


def test_the_leader_when_it_shares_the_rack_the_client_has_none_or_no_replica_has_it() -> None:
    assert pick("r1", [(2, 100, 0), (3, 100, 0)]) is None  # the leader is in r1
    assert pick("", [(2, 100, 0), (3, 100, 0)]) is None  # no client.rack
    assert pick("r9", [(2, 100, 0), (3, 100, 0)]) is None  # nobody in r9
    assert pick("r2", [(3, 100, 0)]) is None  # replica 2 not offered (out of the ISR, or behind the offset)


def test_the_most_caught_up_of_several_in_the_rack() -> None:
    """Kafka's ReplicaView.comparator: log end offset, then time since caught up (shorter wins),
    then broker id (higher wins)."""
    assert pick("r3", [(3, 90, 0), (4, 95, 5000)]) == 4  # further log end
    assert pick("r3", [(3, 95, 100), (4, 95, 5000)]) == 3  # caught up more recently
    assert pick("r3", [(3, 95, 100), (4, 95, 100)]) == 4  # a tie: the higher id


def test_a_replica_without_an_endpoint_on_the_clients_listener_is_never_sent() -> None:
    """Kafka's Node.noNode(): no rack, so never the client's; and never in a response."""
    assert pick("r2", [(2, 100, 0)], racks={1: "r1", 3: "r3"}) is None
    view = ReplicaView(NO_NODE, None, 100, 0)
    leader = ReplicaView(1, "r1", 100, 0)

    class Anything:
        def select(self, tp: object, c: object, partition: PartitionView) -> ReplicaView | None:
            return view

    assert preferred_read_replica(Anything(), TP, client("r2"), 1, 100, [(5, 100, 0)], RACKS) is None
    assert RackAwareReplicaSelector().select(TP, client(""), PartitionView([view, leader], leader)) == leader


def test_the_selector_is_chosen_by_kafkas_class_name() -> None:
    assert replica_selector(None) is None
    assert isinstance(replica_selector(RACK_AWARE_REPLICA_SELECTOR), RackAwareReplicaSelector)
    with pytest.raises(ValueError):
        replica_selector("com.example.MySelector")


# -- what a leader offers the selector -----------------------------------------------------------

NOW = 1_700_000_000_000


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[Partition]:
    """Led by broker 1 at epoch 3, replicas 1, 2, 3, 4, ISR 1, 2, 3; an empty log."""
    log_ = Log.open(tmp_path / "t-0", LogConfig())
    state = PartitionState(0, [1, 2, 3, 4], 1, 3, [1, 2, 3], partition_epoch=5)
    p = Partition(TopicState("t", uuid.uuid4(), {0: state}), state, log_, 1)
    p.reset_followers(NOW - 1000)
    yield p
    log_.close()


def test_candidates_are_in_sync_followers_that_hold_the_fetch_offset(partition: Partition) -> None:
    partition.followers[2].log_end_offset, partition.followers[2].log_start_offset = 10, 0
    partition.followers[3].log_end_offset, partition.followers[3].log_start_offset = 6, 0
    partition.followers[4].log_end_offset, partition.followers[4].log_start_offset = 10, 0  # not in the ISR
    assert partition.read_replica_candidates(5, NOW) == [(2, 10, 1000), (3, 6, 1000)]
    assert partition.read_replica_candidates(8, NOW) == [(2, 10, 1000)]  # replica 3's log ends at 6
    partition.followers[2].log_start_offset = 9  # retention removed offset 8 there
    assert partition.read_replica_candidates(8, NOW) == []


def test_a_follower_that_has_not_fetched_under_this_leadership_is_no_candidate(partition: Partition) -> None:
    assert partition.read_replica_candidates(0, NOW) == []  # log ends unknown (-1)
    partition.update_follower_fetch_state(2, 0, NOW, log_start_offset=0)
    assert partition.read_replica_candidates(0, NOW) == [(2, 0, 0)]  # it asked for our log end: caught up now


def test_a_follower_offers_nothing(partition: Partition) -> None:
    partition.followers[2].log_end_offset, partition.followers[2].log_start_offset = 10, 0
    partition.set_state(PartitionState(0, [1, 2, 3, 4], 2, 4, [1, 2, 3], partition_epoch=6))
    assert partition.read_replica_candidates(5, NOW) == []
