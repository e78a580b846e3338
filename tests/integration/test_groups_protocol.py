"""Consumer-group coordinator behaviour through raw protocol connections against a real broker:
pending-member expiry (KIP-394), batched FindCoordinator (v4) and OffsetFetch (v8), and the
initial rebalance delay of a new group (Kafka's InitialDelayedJoin). Waits are on responses
and broker log lines, each bounded."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import (
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from protocol.messages import offset_commit_request as ocr
from protocol.messages import offset_fetch_request as ofr
from tests.broker_process import BrokerProcess
from tests.integration.test_groups import join, join_with_id, sync
from tests.raw_client import RawConnection

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

EXTEND_LINE = "new members joined: delaying the initial rebalance"


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    p = ThreadPoolExecutor(4)
    yield p
    p.shutdown(wait=True)


def connect(broker: BrokerProcess, n: int) -> list[RawConnection]:
    return [RawConnection(broker.port, f"raw-{i}") for i in range(n)]


def describe(c: RawConnection, group: str) -> Any:
    [g] = c.call(15, 5, DescribeGroupsRequest(groups=[group])).groups
    return g


def lines_with(broker: BrokerProcess, text: str, group: str, after: int = 0) -> list[str]:
    return [line for line in broker.lines[after:] if text in line and f"group='{group}'" in line]


# -- 1. pending members (KIP-394) -------------------------------------------------------------------

def test_pending_member_that_never_rejoins_expires_and_the_rebalance_goes_on_without_it(
    gbroker: BrokerProcess, pool: ThreadPoolExecutor,
) -> None:
    """A JoinGroup with an empty member id gets MEMBER_ID_REQUIRED and makes the id *pending*;
    a rebalance waits for pending members too. One that never comes back with its id is removed
    after its session timeout (not the rebalance timeout), and the rebalance completes without
    it."""
    a, p = connect(gbroker, 2)
    try:
        a.call(10, 3, FindCoordinatorRequest(key="pend", key_type=0))
        ma = join_with_id(a, "pend", rebalance_ms=60000).member_id
        assert sync(a, "pend", 1, ma, {ma: b"all"}).error_code == 0

        pending = join(p, "pend", session_ms=2000, rebalance_ms=60000)
        assert pending.error_code == ErrorCode.MEMBER_ID_REQUIRED
        mp = pending.member_id
        lines_before = len(gbroker.lines)
        started = time.monotonic()
        # The leader rejoins (a rebalance): it must wait for the pending member, which never
        # rejoins; its session (2 s) expiring ends the wait, far before the 60 s rebalance timeout.
        rejoin = pool.submit(join, a, "pend", ma, rebalance_ms=60000)
        removed = gbroker.wait_for_line(
            f"Pending member {mp} in group pend has been removed after session timeout expiration.", 15,
            after=lines_before)
        r = rejoin.result(15)
        waited = time.monotonic() - started
        assert (r.error_code, r.generation_id, r.leader) == (0, 2, ma)
        assert [m.member_id for m in r.members] == [ma]
        assert waited < 15, waited
        # Removed before (and so not part of) generation 2.
        stabilized = gbroker.wait_for_line("stabilized group", 5, after=lines_before)
        assert gbroker.lines.index(removed, lines_before) < gbroker.lines.index(stabilized, lines_before)

        assert sync(a, "pend", 2, ma, {ma: b"all"}).error_code == 0
        g = describe(a, "pend")
        assert (g.error_code, g.group_state, [m.member_id for m in g.members]) == (0, "Stable", [ma])
        # The expired id is no longer known: coming back with it is refused.
        assert join(p, "pend", member_id=mp).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        a.close()
        p.close()


# -- 2. batched FindCoordinator and OffsetFetch --------------------------------------------------------

def commit_simple(c: RawConnection, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A "simple" commit (no member, generation -1), as an assign()-only consumer makes."""
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(ocr.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata=f"{group}@{offset}"))
    resp = c.call(8, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[ocr.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    assert [p.error_code for t in resp.topics for p in t.partitions] == [0] * len(offsets)


def test_find_coordinator_v4_answers_each_key(gbroker: BrokerProcess) -> None:
    with RawConnection(gbroker.port, "raw-batch") as c:
        resp = c.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g-one", "", "g-two", "g-three"]))
        answers = [(x.key, x.error_code, x.node_id, x.host, x.port) for x in resp.coordinators]
        assert answers == [
            ("g-one", 0, 0, "127.0.0.1", gbroker.port),
            ("", 0, 0, "127.0.0.1", gbroker.port),  # as Kafka: "" is a group (offsets only)
            ("g-two", 0, 0, "127.0.0.1", gbroker.port),
            ("g-three", 0, 0, "127.0.0.1", gbroker.port),
        ]
        assert [x.error_message for x in resp.coordinators] == ["NONE"] * 4
        # Transaction keys: the transaction coordinator (this broker), answered per key as well;
        # the first FindCoordinator creates __transaction_state
        tx = c.call(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-a", "tx-b"]))
        assert [(x.key, x.error_code, x.node_id, x.port) for x in tx.coordinators] == [
            ("tx-a", 0, 0, gbroker.port), ("tx-b", 0, 0, gbroker.port)]


def test_offset_fetch_v8_answers_each_group(gbroker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    try:
        admin.create_topics([NewTopic("t1", 3, 1), NewTopic("t2", 4, 1)])
    finally:
        admin.close()
    with RawConnection(gbroker.port, "raw-batch") as c:
        assert c.call(10, 3, FindCoordinatorRequest(key="x", key_type=0)).error_code == 0
        commit_simple(c, "fa", {("t1", 0): 5, ("t1", 1): 6, ("t2", 0): 7})
        commit_simple(c, "fb", {("t1", 0): 50, ("t2", 3): 70})
        commit_simple(c, "", {("t1", 0): 500})  # Kafka accepts the empty group id for offsets
        # A managed group: generation 1 commit through its member.
        mc = join_with_id(c, "fm").member_id
        assert sync(c, "fm", 1, mc, {mc: b""}).error_code == 0
        resp = c.call(8, 8, OffsetCommitRequest(
            group_id="fm", generation_id_or_member_epoch=1, member_id=mc,
            topics=[ocr.OffsetCommitRequestTopic(name="t2", partitions=[
                ocr.OffsetCommitRequestPartition(partition_index=1, committed_offset=9, committed_metadata="m")])]))
        assert resp.topics[0].partitions[0].error_code == 0

        def group(gid: str, topics: dict[str, list[int]] | None) -> ofr.OffsetFetchRequestGroup:
            return ofr.OffsetFetchRequestGroup(group_id=gid, topics=None if topics is None else [
                ofr.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()])

        resp = c.call(9, 8, OffsetFetchRequest(groups=[
            group("fa", {"t1": [0, 1, 2], "t2": [0]}),
            group("fb", None),  # every committed partition of the group
            group("never", {"t1": [0]}),
            group("", {"t1": [0]}),
            group("fm", {"t2": [1]}),
        ]))

        def flat(g: Any) -> tuple[str, int, dict[tuple[str, int], tuple[int, str, int]]]:
            parts = {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
                     for t in g.topics for p in t.partitions}
            return g.group_id, g.error_code, parts

        assert [flat(g) for g in resp.groups] == [
            ("fa", 0, {("t1", 0): (5, "fa@5", 0), ("t1", 1): (6, "fa@6", 0), ("t1", 2): (-1, "", 0),
                       ("t2", 0): (7, "fa@7", 0)}),
            ("fb", 0, {("t1", 0): (50, "fb@50", 0), ("t2", 3): (70, "fb@70", 0)}),
            ("never", 0, {("t1", 0): (-1, "", 0)}),
            ("", 0, {("t1", 0): (500, "@500", 0)}),
            ("fm", 0, {("t2", 1): (9, "m", 0)}),
        ]


# -- 3. group.initial.rebalance.delay.ms (InitialDelayedJoin) ----------------------------------------

def delayed_broker(tmp_path: Path, delay_ms: int) -> BrokerProcess:
    return BrokerProcess(tmp_path / "data", overrides=[
        "num.partitions=1", f"group.initial.rebalance.delay.ms={delay_ms}", "group.min.session.timeout.ms=200",
    ]).start()


def park_new_member(pool: ThreadPoolExecutor, c: RawConnection, group: str, rebalance_ms: int) -> Any:
    """MEMBER_ID_REQUIRED round trip, then the join that parks in the rebalance."""
    first = join(c, group, rebalance_ms=rebalance_ms)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return first.member_id, pool.submit(join, c, group, first.member_id, rebalance_ms=rebalance_ms)


def test_initial_rebalance_delay_extends_while_new_members_join(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    """Each new member joining during the delay extends it by the configured delay (the
    rebalance timeout is far away): a member arriving after the first delay ran out still makes
    the first generation. Without the extension, generation 1 would close after the first
    delay with two members and the third would cause generation 2."""
    delay = 1500
    b = delayed_broker(tmp_path, delay)
    conns = connect(b, 3)
    try:
        conns[0].call(10, 3, FindCoordinatorRequest(key="ext", key_type=0))
        mark = len(b.lines)
        m0, j0 = park_new_member(pool, conns[0], "ext", 60000)
        b.wait_for_line("preparing to rebalance group", 10, after=mark)
        m1, j1 = park_new_member(pool, conns[1], "ext", 60000)  # during the first delay
        first_extension = b.wait_for_line(EXTEND_LINE, 10, after=mark)  # the first delay ran out
        assert "delay_ms=1500" in first_extension
        m2, j2 = park_new_member(pool, conns[2], "ext", 60000)  # during the extension
        results = [j.result(20) for j in (j0, j1, j2)]
        assert [r.error_code for r in results] == [0, 0, 0]
        assert {r.generation_id for r in results} == {1}
        assert results[0].leader == m0
        assert sorted(m.member_id for m in results[0].members) == sorted([m0, m1, m2])
        # Extended once per window in which somebody new arrived: two windows, then done. The
        # broker logs "stabilized group" before it answers the joins, but its log reaches us
        # through a pipe and a reader thread: wait for the line, then count.
        b.wait_for_line("stabilized group", 10, after=mark)
        assert len(lines_with(b, EXTEND_LINE, "ext", mark)) == 2
        assert len(lines_with(b, "stabilized group", "ext", mark)) == 1
    finally:
        for c in conns:
            c.close()
        b.stop()


def test_initial_rebalance_delay_is_capped_by_the_rebalance_timeout(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    """With members arriving in every window the delay is extended until the rebalance timeout
    of the first member (2.8 s = 1 s + 1 s + 0.8 s) is used up; a member joining in the last,
    shortened window still gets in, but no further extension happens."""
    delay, rebalance_ms = 1000, 2800
    b = delayed_broker(tmp_path, delay)
    conns = connect(b, 4)
    try:
        conns[0].call(10, 3, FindCoordinatorRequest(key="cap", key_type=0))
        mark = len(b.lines)
        m0, j0 = park_new_member(pool, conns[0], "cap", rebalance_ms)
        b.wait_for_line("preparing to rebalance group", 10, after=mark)
        started = time.monotonic()
        ids, joins = [m0], [j0]
        for i, expected in ((1, "delay_ms=1000 remaining_ms=800"), (2, "delay_ms=800 remaining_ms=0")):
            n = len(b.lines)
            m, j = park_new_member(pool, conns[i], "cap", rebalance_ms)
            ids.append(m)
            joins.append(j)
            assert expected in b.wait_for_line(EXTEND_LINE, 10, after=n)
        m3, j3 = park_new_member(pool, conns[3], "cap", rebalance_ms)  # in the last window
        ids.append(m3)
        joins.append(j3)
        results = [j.result(20) for j in joins]
        elapsed = time.monotonic() - started
        assert [r.error_code for r in results] == [0] * 4
        assert {r.generation_id for r in results} == {1}
        assert sorted(m.member_id for m in results[0].members) == sorted(ids)
        # m3's arrival did not buy another window: the rebalance timeout caps the delay.
        assert len(lines_with(b, EXTEND_LINE, "cap", mark)) == 2
        assert elapsed < rebalance_ms / 1000 + 3, elapsed  # generous: bounded, not extended for ever
    finally:
        for c in conns:
            c.close()
        b.stop()
