"""The classic group state machine's bookkeeping (Kafka's GroupMetadataTest, in spirit)."""

from __future__ import annotations

import pytest

from broker.group.metadata import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    parse_subscription_topics,
)

PENDING = object()  # stands for a parked JoinGroup


def member(mid: str, protocols: list[str]) -> MemberMetadata:
    return MemberMetadata(mid, None, "c", "/h", 300000, 10000, "consumer", [(p, p.encode()) for p in protocols])


def test_valid_transitions() -> None:
    g = GroupMetadata("g")
    assert g.is_(GroupState.EMPTY) and g.can_rebalance()
    g.transition_to(GroupState.PREPARING_REBALANCE)
    g.transition_to(GroupState.COMPLETING_REBALANCE)
    g.transition_to(GroupState.STABLE)
    g.transition_to(GroupState.PREPARING_REBALANCE)
    g.transition_to(GroupState.EMPTY)
    g.transition_to(GroupState.DEAD)
    assert not g.can_rebalance()


@pytest.mark.parametrize(
    ("start", "target"),
    [
        (GroupState.EMPTY, GroupState.STABLE),
        (GroupState.EMPTY, GroupState.COMPLETING_REBALANCE),
        (GroupState.STABLE, GroupState.EMPTY),
        (GroupState.DEAD, GroupState.PREPARING_REBALANCE),
    ],
)
def test_invalid_transitions(start: GroupState, target: GroupState) -> None:
    g = GroupMetadata("g", state=start)
    with pytest.raises(ValueError):
        g.transition_to(target)


def test_first_member_is_leader_and_leader_moves_on_removal() -> None:
    g = GroupMetadata("g")
    g.add(member("a", ["range"]), PENDING)
    g.add(member("b", ["range"]), PENDING)
    assert g.leader_id == "a" and g.protocol_type == "consumer"
    assert g.num_members_awaiting_join == 2 and g.has_all_members_joined()
    g.remove("a")
    assert g.leader_id == "b" and g.num_members_awaiting_join == 1
    g.remove("b")
    assert g.leader_id is None and g.supported_protocols == {}


def test_pending_members_block_join_completion() -> None:
    g = GroupMetadata("g")
    g.add(member("a", ["range"]), PENDING)
    g.pending_members.add("b")
    assert not g.has_all_members_joined()
    g.add(member("b", ["range"]), PENDING)
    assert g.has_all_members_joined() and not g.pending_members


def test_protocol_vote_among_protocols_every_member_supports() -> None:
    g = GroupMetadata("g")
    g.add(member("a", ["roundrobin", "range"]), PENDING)
    g.add(member("b", ["range", "roundrobin"]), PENDING)
    g.add(member("c", ["range", "sticky"]), PENDING)
    assert g.select_protocol() == "range"  # roundrobin is not supported by c
    g.transition_to(GroupState.PREPARING_REBALANCE)
    assert g.supports_protocols("consumer", ["range"])
    assert not g.supports_protocols("consumer", ["sticky"])
    assert not g.supports_protocols("connect", ["range"])
    g.remove("c")
    assert g.select_protocol() in ("range", "roundrobin")


def test_empty_group_accepts_any_non_empty_protocol() -> None:
    g = GroupMetadata("g")
    assert g.supports_protocols("consumer", ["x"])
    assert not g.supports_protocols("", ["x"])
    assert not g.supports_protocols("consumer", [])


def test_init_next_generation() -> None:
    g = GroupMetadata("g")
    g.transition_to(GroupState.PREPARING_REBALANCE)
    g.add(member("a", ["range"]), PENDING)
    g.init_next_generation()
    assert (g.generation_id, g.protocol_name, g.state) == (1, "range", GroupState.COMPLETING_REBALANCE)
    assert g.current_member_metadata() == [("a", None, b"range")]
    g.transition_to(GroupState.PREPARING_REBALANCE)
    g.remove("a")
    g.init_next_generation()
    assert (g.generation_id, g.protocol_name, g.state) == (2, None, GroupState.EMPTY)


def test_leader_reelected_among_rejoined_members() -> None:
    g = GroupMetadata("g")
    a, b = member("a", ["range"]), member("b", ["range"])
    g.add(a)
    g.add(b)
    assert not g.maybe_elect_new_joined_leader()  # nobody rejoined
    g.update_member(b, b.protocols, PENDING)
    assert g.maybe_elect_new_joined_leader() and g.leader_id == "b"
    assert [m.member_id for m in g.not_yet_rejoined_members()] == ["a"]
    assert g.take_join_future(b) is PENDING and g.num_members_awaiting_join == 0


def test_heartbeat_satisfaction() -> None:
    m = member("a", ["range"])
    m.is_new = True
    assert not m.has_satisfied_heartbeat()
    m.is_new = False
    m.join_future = PENDING
    assert m.has_satisfied_heartbeat()  # a parked join keeps the session alive
    m.join_future = None
    assert not m.has_satisfied_heartbeat()
    m.heartbeat_satisfied = True
    assert m.has_satisfied_heartbeat()


def test_parse_consumer_subscription() -> None:
    sub = b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\xff\xff\xff\xff"
    assert parse_subscription_topics(sub) == {"a", "bc"}
