"""Transactional offset commits on three brokers: `__consumer_offsets` (one partition, RF 3)
holds a group's committed, aborted and still-open transactional offsets; after the group
coordinator's broker is killed, the broker elected leader of that partition loads them from its
replica (the runtime's load on election replays the transactional batches and their markers)
and answers what the old coordinator answered: the committed offsets, UNSTABLE_OFFSET_COMMIT for
the open transaction under require_stable, and the open transaction's COMMIT marker, written to
the new leader, makes its offset committed there."""

from __future__ import annotations

import asyncio
import time

from protocol.errors import ErrorCode
from protocol.messages import FindCoordinatorRequest, OffsetCommitRequest, OffsetFetchRequest
from protocol.messages import offset_commit_request as ocr
from tests.cluster.processes import IDS, PROMISE_S, WAIT, Cluster, cluster_fixture
from tests.raw_client import RawConnection
from tests.txn_raw import (
    NO_VERIFICATION,
    fetch_offsets,
    init_producer_id,
    txn_offset_commit,
    write_markers,
)

cluster = cluster_fixture("offsets.topic.num.partitions=1", "offsets.topic.replication.factor=3",
                          "replica.lag.time.max.ms=2000", NO_VERIFICATION)

GROUP = "cg"
OFFSETS_TP = ("__consumer_offsets", 0)
T0, T1 = ("rf3", 0), ("rf3", 1)
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


async def coordinator(conns: dict[int, RawConnection], asking: int, not_: int | None = None) -> int:
    """The group's coordinator as `asking` finds it, once it answers OffsetFetch (loaded):
    polled, bounded."""
    deadline = time.monotonic() + PROMISE_S + WAIT
    while True:
        found = conns[asking].call(10, 3, FindCoordinatorRequest(key=GROUP, key_type=0))
        node = found.node_id
        if found.error_code == 0 and node != not_ and node in conns:
            loaded = conns[node].call(9, 7, OffsetFetchRequest(group_id=GROUP, topics=[]))
            if loaded.error_code == 0:
                return node
        assert time.monotonic() < deadline, f"no coordinator for {GROUP}: {found}"
        await asyncio.sleep(0.05)


async def test_transactional_offsets_move_with_the_coordinator(cluster: Cluster) -> None:
    await cluster.open()
    conns = {i: RawConnection(cluster.ports[i], "txn-offsets-cluster") for i in IDS}
    try:
        old = await coordinator(conns, IDS[0])
        at_old = conns[old]
        plain = at_old.call(8, 8, OffsetCommitRequest(
            group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[ocr.OffsetCommitRequestTopic(name="rf3", partitions=[
                ocr.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata="")])]))
        assert plain.topics[0].partitions[0].error_code == 0
        a, b, c = (init_producer_id(at_old) for _ in range(3))
        assert txn_offset_commit(at_old, GROUP, a, 0, {T0: 10, T1: 20}) == {T0: 0, T1: 0}
        assert write_markers(at_old, a, 0, True, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
        assert txn_offset_commit(at_old, GROUP, b, 0, {T0: 40}) == {T0: 0}
        assert write_markers(at_old, b, 0, False, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
        assert txn_offset_commit(at_old, GROUP, c, 0, {T1: 30}) == {T1: 0}  # left open
        before = fetch_offsets(at_old, GROUP, [T0, T1], require_stable=True)
        assert before == {T0: (10, 0), T1: (-1, UNSTABLE)}

        # acks=all: every replica has the batches and markers; the coordinator's broker dies
        cluster.brokers[old].kill()
        other = next(i for i in IDS if i != old)
        del conns[old]
        at_old.close()
        new = await coordinator(conns, other, not_=old)
        at_new = conns[new]
        assert fetch_offsets(at_new, GROUP, [T0, T1]) == {T0: (10, 0), T1: (20, 0)}
        assert fetch_offsets(at_new, GROUP, [T0, T1], require_stable=True) == before
        assert write_markers(at_new, c, 0, True, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
        assert fetch_offsets(at_new, GROUP, [T0, T1], require_stable=True) == {T0: (10, 0), T1: (30, 0)}
    finally:
        for conn in conns.values():
            conn.close()
