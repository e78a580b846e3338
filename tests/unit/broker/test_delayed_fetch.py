"""DelayedFetch in a real DelayedOperationPurgatory: a wake-up re-reads only the partition it is
for and keeps a running byte count; min_bytes reached, an error, or max_wait answers with one
full read."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.delayed_fetch import DelayedFetch
from broker.purgatory import DelayedOperationPurgatory

KEYS = [("t", p) for p in range(100)]


def result(size: int = 0, error: int = 0) -> SimpleNamespace:
    return SimpleNamespace(records_size=size, error=error)


async def test_a_wake_up_reads_one_partition_and_min_bytes_completes() -> None:
    purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory("Fetch")
    purgatory.start()
    try:
        available = dict.fromkeys(KEYS, 0)
        reads: list[object] = []

        def read_one(key: tuple[str, int]) -> SimpleNamespace:
            reads.append(key)
            return result(available[key])

        def read_all() -> str:
            reads.append("all")
            return "answer"

        op = DelayedFetch(10_000, 1000, {k: result() for k in KEYS}, read_one, read_all)
        assert not purgatory.try_complete_else_watch(op, KEYS)
        assert reads == []  # parking reads nothing again: the first read's sizes are kept
        available[KEYS[7]] = 600
        purgatory.check_and_complete(KEYS[7])
        assert reads == [KEYS[7]] and not op.is_completed and op.total == 600
        available[KEYS[7]] = 700  # the same partition grew: counted once, at its new size
        purgatory.check_and_complete(KEYS[7])
        assert op.total == 700 and not op.is_completed
        available[KEYS[42]] = 300
        purgatory.check_and_complete(KEYS[42])
        assert op.is_completed and reads == [KEYS[7], KEYS[7], KEYS[42], "all"]
        assert await asyncio.wait_for(op.future, 1) == "answer"
    finally:
        await purgatory.shutdown()


async def test_an_error_completes_at_once_and_max_wait_answers_with_a_full_read() -> None:
    purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory("Fetch")
    purgatory.start()
    try:
        op = DelayedFetch(10_000, 1000, {k: result() for k in KEYS}, lambda key: result(error=6), lambda: "moved")
        purgatory.try_complete_else_watch(op, KEYS)
        purgatory.check_and_complete(KEYS[3])  # NOT_LEADER_OR_FOLLOWER: the client must hear it now
        assert await asyncio.wait_for(op.future, 1) == "moved"
        expiring = DelayedFetch(50, 1000, {k: result() for k in KEYS}, lambda key: result(), lambda: "what there is")
        purgatory.try_complete_else_watch(expiring, KEYS)
        assert await asyncio.wait_for(expiring.future, 5) == "what there is"
    finally:
        await purgatory.shutdown()


async def test_a_one_partition_fetch_answers_with_the_read_of_its_wake_up() -> None:
    """A follower's fetch names one partition: when the append it waits for wakes it, that
    partition's read is the whole fetch's read and answers without a second one (the replication
    round's critical path). Completed any other way -- max_wait -- it reads in full as before."""
    purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory("Fetch")
    purgatory.start()
    try:
        key = KEYS[0]
        reads: list[object] = []
        woken = result(170)

        def read_one(k: tuple[str, int]) -> SimpleNamespace:
            reads.append(k)
            return woken

        def read_all() -> str:
            reads.append("all")
            return "full read"

        op = DelayedFetch(10_000, 1, {key: result()}, read_one, read_all)
        assert not purgatory.try_complete_else_watch(op, [key])
        purgatory.check_and_complete(key)
        assert reads == [key]
        assert await asyncio.wait_for(op.future, 1) == {key: woken}

        woken = result(0)  # woken, still nothing: parked on, then max_wait answers with a full read
        reads.clear()
        expiring = DelayedFetch(50, 1, {key: result()}, read_one, read_all)
        purgatory.try_complete_else_watch(expiring, [key])
        purgatory.check_and_complete(key)
        assert not expiring.is_completed
        assert await asyncio.wait_for(expiring.future, 5) == "full read"
        assert reads == [key, "all"]
    finally:
        await purgatory.shutdown()
