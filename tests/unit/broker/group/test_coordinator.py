"""GroupCoordinator driven directly on the event loop over a real (socket-less) broker stack:
logs in a temp dir, the embedded controller, the ReplicaManager and `__consumer_offsets`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from broker.group import GroupCoordinator, GroupState
from broker.group.metadata import OffsetAndMetadata
from broker.server import BrokerServer
from protocol.errors import ErrorCode
from tests.loop_waits import until

RANGE = [("range", b"r")]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    cfg = KafkaConfig({
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "50",
    })
    s = BrokerServer(cfg)
    await s.start_components()
    assert s.group_coordinator is not None and s.group_coordinator.ensure_offsets_topic()
    await s.controller.committed()  # its logs are created in an executor
    try:
        yield s
    finally:
        await s.shutdown()


def gc_of(server: BrokerServer) -> GroupCoordinator:
    assert server.group_coordinator is not None
    return server.group_coordinator


async def join(gc: GroupCoordinator, group: str, member_id: str = "", session_ms: int = 10000,
               rebalance_ms: int = 10000, instance: str | None = None) -> object:
    return await gc.handle_join_group(group, member_id, instance, True, "client", "/h", rebalance_ms, session_ms,
                                      "consumer", RANGE)


async def test_join_sync_heartbeat_and_session_expiry(server: BrokerServer) -> None:
    gc = gc_of(server)
    first = await join(gc, "g")
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    a = await join(gc, "g", first.member_id)
    group = gc.groups["g"]
    assert (a.error, a.generation_id, a.leader_id, group.state) == (0, 1, a.member_id, GroupState.COMPLETING_REBALANCE)
    assert (await gc.handle_sync_group("g", 1, a.member_id, None, None, {a.member_id: b"x"})).assignment == b"x"
    assert group.state is GroupState.STABLE
    assert gc.handle_heartbeat("g", a.member_id, 1) == 0

    # B joins with a short session; A's rejoin parks until B's session expires and B is dropped.
    b_id = (await join(gc, "g", session_ms=100)).member_id
    b = asyncio.ensure_future(join(gc, "g", b_id, session_ms=100))
    await until(lambda: group.state is GroupState.PREPARING_REBALANCE, "B's join at the coordinator")
    assert gc.handle_heartbeat("g", a.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    a2 = await join(gc, "g", a.member_id)
    b2 = await b
    assert a2.generation_id == b2.generation_id == 2 and sorted(m for m, _, _ in a2.members) == sorted([a.member_id, b_id])
    # B never syncs nor heartbeats: its session (100 ms) expires; A's rejoin completes without it.
    assert (await gc.handle_sync_group("g", 2, a.member_id, None, None, {})).error == 0
    a3 = await asyncio.wait_for(join(gc, "g", a.member_id), 10)
    assert (a3.generation_id, [m for m, _, _ in a3.members]) == (3, [a.member_id])
    assert gc.handle_heartbeat("g", b_id, 2) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_commits_are_checked_persisted_and_reloaded(server: BrokerServer) -> None:
    gc = gc_of(server)
    server.controller.create_topic("t", 2, 1)
    om = OffsetAndMetadata(5, -1, "meta", 1)
    assert await gc.handle_commit_offsets("simple", "", -1, {("t", 0): om}) == {("t", 0): 0}
    assert await gc.handle_commit_offsets("nope", "m", 3, {("t", 0): om}) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    a_id = (await join(gc, "g")).member_id
    a = await join(gc, "g", a_id)
    assert await gc.handle_commit_offsets("g", a_id, 1, {("t", 1): om}) == {("t", 1): ErrorCode.REBALANCE_IN_PROGRESS}
    await gc.handle_sync_group("g", 1, a_id, None, None, {a_id: b"x"})
    assert await gc.handle_commit_offsets("g", a_id, 0, {("t", 1): om}) == {("t", 1): ErrorCode.ILLEGAL_GENERATION}
    assert await gc.handle_commit_offsets("g", "", -1, {("t", 1): om}) == {("t", 1): ErrorCode.UNKNOWN_MEMBER_ID}
    assert await gc.handle_commit_offsets("g", a_id, a.generation_id, {("t", 1): om}) == {("t", 1): 0}

    # A second coordinator over the same logs (a restart) sees the same state.
    again = GroupCoordinator(server)
    await again.load()
    try:
        assert again.handle_fetch_offsets("simple", None) == (0, {("t", 0): om})
        assert again.handle_fetch_offsets("g", [("t", 1), ("t", 0)]) == (0, {("t", 1): om, ("t", 0): None})
        loaded = again.groups["g"]
        assert (loaded.state, loaded.generation_id, loaded.leader_id, loaded.protocol_name) == (
            GroupState.STABLE, 1, a_id, "range")
        assert loaded.get(a_id).assignment == b"x"
    finally:
        await again.shutdown()


async def test_delete_groups(server: BrokerServer) -> None:
    gc = gc_of(server)
    server.controller.create_topic("t", 1, 1)
    await gc.handle_commit_offsets("empty", "", -1, {("t", 0): OffsetAndMetadata(1)})
    a_id = (await join(gc, "busy")).member_id
    await join(gc, "busy", a_id)
    assert await gc.handle_delete_groups(["empty", "busy", "none"]) == {
        "empty": 0, "busy": ErrorCode.NON_EMPTY_GROUP, "none": ErrorCode.GROUP_ID_NOT_FOUND}
    assert "empty" not in gc.groups
    assert gc.handle_fetch_offsets("empty", None) == (0, {})


async def test_expired_offsets_and_empty_groups_are_removed_and_stay_removed(server: BrokerServer) -> None:
    gc = gc_of(server)
    server.controller.create_topic("t", 2, 1)
    week = 7 * 24 * 3600 * 1000  # offsets.retention.minutes default: 10080
    now = 1_700_000_000_000  # commit timestamps are given explicitly
    await gc.handle_commit_offsets("simple", "", -1, {("t", 0): OffsetAndMetadata(1, -1, "", now)})
    await gc.handle_commit_offsets("simple", "", -1, {("t", 1): OffsetAndMetadata(2, -1, "", now + week)})
    # A live group whose members' subscription is not a consumer-protocol one keeps its offsets.
    a_id = (await join(gc, "live")).member_id
    await join(gc, "live", a_id)
    await gc.handle_sync_group("live", 1, a_id, None, None, {})
    await gc.handle_commit_offsets("live", a_id, 1, {("t", 0): OffsetAndMetadata(3, -1, "", now)})

    assert await gc.cleanup_group_metadata(now + week - 1) == 0
    assert await gc.cleanup_group_metadata(now + week) == 1  # only simple's (t, 0)
    assert gc.handle_fetch_offsets("simple", None) == (0, {("t", 1): OffsetAndMetadata(2, -1, "", now + week)})
    assert await gc.cleanup_group_metadata(now + 2 * week) == 1
    assert "simple" not in gc.groups and "live" in gc.groups
    assert gc.handle_fetch_offsets("live", None)[1].keys() == {("t", 0)}

    again = GroupCoordinator(server)  # the tombstones are in the log: a reload agrees
    await again.load()
    try:
        assert "simple" not in again.groups
        assert again.handle_fetch_offsets("live", None)[1].keys() == {("t", 0)}
    finally:
        await again.shutdown()


async def test_empty_group_offsets_expire_from_when_it_became_empty(server: BrokerServer) -> None:
    gc = gc_of(server)
    server.controller.create_topic("t", 1, 1)
    a_id = (await join(gc, "g")).member_id
    await join(gc, "g", a_id)
    await gc.handle_sync_group("g", 1, a_id, None, None, {})
    await gc.handle_commit_offsets("g", a_id, 1, {("t", 0): OffsetAndMetadata(3, -1, "", 0)})  # an old commit
    gc.handle_leave_group("g", [(a_id, None)])
    group = gc.groups["g"]
    assert group.is_(GroupState.EMPTY) and group.state_timestamp is not None
    retention = gc.offsets_retention_ms
    assert await gc.cleanup_group_metadata(group.state_timestamp + retention - 1) == 0
    assert await gc.cleanup_group_metadata(group.state_timestamp + retention) == 1
    assert "g" not in gc.groups


async def test_group_max_size_turns_away_the_last_to_rejoin(server: BrokerServer) -> None:
    gc = gc_of(server)
    gc.max_group_size = 2  # group.max.size
    a_id = (await join(gc, "g")).member_id
    await join(gc, "g", a_id)
    await gc.handle_sync_group("g", 1, a_id, None, None, {})
    b_id = (await join(gc, "g")).member_id
    b = asyncio.ensure_future(join(gc, "g", b_id))
    c_id = (await join(gc, "g")).member_id
    c = asyncio.ensure_future(join(gc, "g", c_id))
    await until(lambda: gc.groups["g"].num_members_awaiting_join == 2, "both joins parked at the coordinator")
    late = await join(gc, "g", a_id)  # A would be the third: it is removed
    assert (late.error, late.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    rb, rc = await b, await c
    assert rb.generation_id == rc.generation_id == 2
    assert sorted(gc.groups["g"].members) == sorted([b_id, c_id])
    # A stable full group refuses newcomers but not its members.
    await gc.handle_sync_group("g", 2, rb.leader_id, None, None, {})
    assert (await join(gc, "g")).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert gc.handle_heartbeat("g", b_id, 2) == 0


async def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout(server: BrokerServer) -> None:
    gc = gc_of(server)
    b_id = (await join(gc, "g", rebalance_ms=100)).member_id
    await join(gc, "g", b_id, rebalance_ms=100)
    await gc.handle_sync_group("g", 1, b_id, None, None, {})  # B: leader of a Stable group
    a_id = (await join(gc, "g", rebalance_ms=100)).member_id
    a = asyncio.ensure_future(join(gc, "g", a_id, rebalance_ms=100))
    await until(lambda: gc.groups["g"].state is GroupState.PREPARING_REBALANCE, "A's join at the coordinator")
    b2 = await join(gc, "g", b_id, rebalance_ms=100)
    assert (b2.generation_id, b2.leader_id, (await a).generation_id) == (2, b_id, 2)
    # A's SyncGroup waits for the leader, which never sends its own: after the rebalance
    # timeout B is removed and A is told to rejoin.
    synced = await asyncio.wait_for(gc.handle_sync_group("g", 2, a_id, None, None, {}), 10)
    assert synced.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert gc.handle_heartbeat("g", b_id, 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert gc.handle_heartbeat("g", a_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS


# -- a request cancelled by its client's disconnect (broker/network.py) mid-write ----------------
# The write is held at the `__consumer_offsets` partition's serialisation point so that the
# cancellation finds the handler waiting for it, as connection_lost does to a request's handler.

async def held_and_cancelled(server: BrokerServer, gc: GroupCoordinator, group_id: str, request: object,
                             waiting: object, what: str) -> None:
    partition = server.replica_manager.partitions[("__consumer_offsets", gc.partition_for(group_id))]
    async with partition._exclusive():  # the write waits here
        task = asyncio.ensure_future(request)  # type: ignore[arg-type]
        await until(waiting, what)  # type: ignore[arg-type]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_an_offset_commit_whose_client_went_away_is_still_committed(server: BrokerServer) -> None:
    """Its record is written, so the cache must say so: cancelled with the request, the offsets
    stayed pending for good and OffsetFetch answered the older offset until a reload."""
    gc = gc_of(server)
    server.controller.create_topic("t", 1, 1)
    assert await gc.handle_commit_offsets("g", "", -1, {("t", 0): OffsetAndMetadata(1)}) == {("t", 0): 0}
    await held_and_cancelled(server, gc, "g", gc.handle_commit_offsets("g", "", -1, {("t", 0): OffsetAndMetadata(7)}),
                             lambda: ("t", 0) in gc.groups["g"].pending_offset_commits, "the commit pending")
    await until(lambda: not gc.groups["g"].pending_offset_commits, "the commit completed")
    assert gc.handle_fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 7


async def test_a_txn_offset_commit_whose_producer_went_away_is_committed_by_its_marker(server: BrokerServer) -> None:
    """The transaction's offsets must stay pending at the offset they were written at, for the
    COMMIT marker to make them committed: cancelled with the request, they had no append offset
    and the marker dropped them (a consume-transform-produce transaction's input offsets lost)."""
    gc = gc_of(server)
    server.controller.create_topic("t", 1, 1)
    partition = gc.partition_for("g")
    await held_and_cancelled(
        server, gc, "g",
        gc.handle_txn_commit_offsets("g", 4000, 0, "", None, -1, {("t", 0): OffsetAndMetadata(9)}),
        lambda: "g" in gc.groups and gc.groups["g"].has_pending_offset_commits_for(("t", 0)), "the offsets pending")
    await until(lambda: all(om.appended_offset >= 0 for om in gc.groups["g"].pending_txn_offset_commits[4000].values()),
                "the offsets appended")
    gc.on_transaction_completed(4000, [partition], is_commit=True)
    assert gc.handle_fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 9


async def test_a_leader_sync_whose_client_went_away_still_hands_out_the_assignment(server: BrokerServer) -> None:
    """The leader's SyncGroup writes the assignment; the other members wait in theirs for it.
    Cancelled with the leader's request, the group stayed CompletingRebalance and the followers
    got nothing until the rebalance timed out."""
    gc = gc_of(server)
    a_id = (await join(gc, "g")).member_id
    first = await join(gc, "g", a_id)
    await gc.handle_sync_group("g", first.generation_id, a_id, None, None, {a_id: b"alone"})
    b_id = (await join(gc, "g")).member_id
    b = asyncio.ensure_future(join(gc, "g", b_id))
    await until(lambda: gc.groups["g"].state is GroupState.PREPARING_REBALANCE, "B's join at the coordinator")
    ra, rb = await join(gc, "g", a_id), await b
    assert ra.generation_id == first.generation_id + 1 and len(ra.members) == 2
    leader = ra.leader_id
    follower = b_id if leader == a_id else a_id
    follower_sync = asyncio.ensure_future(gc.handle_sync_group("g", ra.generation_id, follower, None, None, {}))
    await until(lambda: gc.groups["g"].get(follower).sync_future is not None, "the follower's SyncGroup parked")
    await held_and_cancelled(
        server, gc, "g", gc.handle_sync_group("g", ra.generation_id, leader, None, None,
                                              {a_id: b"to-a", b_id: b"to-b"}),
        lambda: gc.groups["g"].get(leader).sync_future is not None, "the leader's assignment being written")
    synced = await asyncio.wait_for(follower_sync, 10)
    assert (synced.error, synced.assignment) == (ErrorCode.NONE, b"to-b" if follower == b_id else b"to-a")
    assert gc.groups["g"].state is GroupState.STABLE and rb.generation_id == ra.generation_id
