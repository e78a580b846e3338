"""Transaction markers on three brokers (RF 3): the leader appends them with acks=all, followers
replicate the control batches with their producer state and aborted-transaction index, and after
the leader's kill -9 the new leader answers the same last stable offset and aborted transactions,
keeps an open transaction open (its marker ends it there) and fences an older coordinator."""

from __future__ import annotations

import asyncio
import time

from protocol.errors import ErrorCode
from storage.txn_index import AbortedTxn
from tests.cluster.processes import IDS, PROMISE_S, RF3, WAIT, Cluster, cluster_fixture, partitions
from tests.raw_client import RawConnection
from tests.txn_raw import (
    NO_VERIFICATION,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TxnProducer,
    confluent_values,
    fetch_committed,
    indexed_aborts,
    init_producer_id,
    list_offset,
    write_markers,
)

cluster = cluster_fixture("replica.lag.time.max.ms=2000", NO_VERIFICATION)


def _state(conn: RawConnection, tp: tuple[str, int]) -> tuple[int, int, list[tuple[int, int]]]:
    """(high watermark, last stable offset, aborted transactions) as a client sees them."""
    lso, aborted = fetch_committed(conn, tp)
    assert list_offset(conn, tp, READ_COMMITTED) == lso
    return list_offset(conn, tp, READ_UNCOMMITTED), lso, aborted


async def test_markers_replicate_and_survive_the_leaders_kill(cluster: Cluster) -> None:
    await cluster.open()
    cid, _ = await cluster.controller()
    victim = next(i for i in IDS if i != cid)
    other = cid
    pa, pb = [("rf3", p) for p, r in RF3.items() if r[0] == victim]  # the victim leads them
    pc = next(("rf3", p) for p, r in RF3.items() if r[0] == other)
    conns = {i: RawConnection(cluster.ports[i], "txn-cluster") for i in IDS}

    async def read_committed(want: int) -> list[str]:  # confluent-kafka, off the test's loop
        return await asyncio.to_thread(confluent_values, cluster.brokers[other].bootstrap, [pa, pb, pc], want)

    try:
        at_victim = conns[victim]
        a = TxnProducer(at_victim, init_producer_id(at_victim))
        b = TxnProducer(at_victim, init_producer_id(at_victim))
        c = TxnProducer(at_victim, init_producer_id(at_victim))
        assert a.send(pa, ["a1", "a2"]) == (0, 0)
        assert a.send(pb, ["a3"]) == (0, 0)
        assert a.send(pc, ["a4"], conns[other]) == (0, 0)
        assert b.send(pa, ["b1"]) == (0, 2)
        assert b.send(pb, ["b2"]) == (0, 1)
        # the coordinator writes each leader its own partitions; a follower refuses them
        assert write_markers(at_victim, a.producer_id, 0, True, 3, [pc]) == {pc: ErrorCode.NOT_LEADER_OR_FOLLOWER}
        assert write_markers(at_victim, a.producer_id, 0, True, 3, [pa, pb]) == {pa: 0, pb: 0}
        assert write_markers(conns[other], a.producer_id, 0, True, 3, [pc]) == {pc: 0}
        assert write_markers(at_victim, b.producer_id, 0, False, 3, [pa, pb]) == {pa: 0, pb: 0}
        assert c.send(pa, ["c1"]) == (0, 5)  # left open
        before = {tp: _state(at_victim, tp) for tp in (pa, pb)}
        assert before == {pa: (6, 5, [(b.producer_id, 2)]), pb: (4, 4, [(b.producer_id, 1)])}
        # acks=all: every replica had B's ABORT when it was answered, indexed as the leader did
        aborts = {i: [indexed_aborts(cluster.brokers[i].log_dir, tp) for tp in (pa, pb)] for i in IDS}
        assert aborts[victim] == [[AbortedTxn(b.producer_id, 2, 4, 5)], [AbortedTxn(b.producer_id, 1, 3, 4)]]
        assert all(a == aborts[victim] for a in aborts.values()), aborts
        assert await read_committed(4) == ["a1", "a2", "a3", "a4"]

        # acks=all: the followers had the markers when they were answered; the leader dies
        cluster.brokers[victim].kill()
        view = await cluster.until_all_agree(
            lambda m: all(s[0] == 0 and s[1] not in (victim, -1) for s in partitions(m, "rf3").values()),
            "new leaders for the victim's partitions", timeout=PROMISE_S + WAIT)
        leaders = {tp: partitions(view, "rf3")[tp[1]][1] for tp in (pa, pb)}

        # the new leaders' high watermarks move once their followers fetch: poll, bounded
        deadline = time.monotonic() + WAIT
        after = {}
        while time.monotonic() < deadline:
            after = {tp: _state(conns[leaders[tp]], tp) for tp in (pa, pb)}
            if after == before:
                break
            await asyncio.sleep(0.05)
        assert after == before
        assert await read_committed(4) == ["a1", "a2", "a3", "a4"]

        # the new leader knows B's last coordinator epoch (3) and C's open transaction
        new_a = conns[leaders[pa]]
        assert write_markers(new_a, b.producer_id, 0, True, 2, [pa]) == {pa: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert write_markers(new_a, c.producer_id, 0, True, 4, [pa]) == {pa: 0}
        assert _state(new_a, pa) == (7, 7, [(b.producer_id, 2)])
        assert await read_committed(5) == ["a1", "a2", "a3", "a4", "c1"]
    finally:
        for conn in conns.values():
            conn.close()
