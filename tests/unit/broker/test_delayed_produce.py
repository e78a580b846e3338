from __future__ import annotations

import asyncio

from broker.delayed_produce import DelayedProduce
from broker.purgatory import DelayedOperationPurgatory
from broker.replica_manager import ProduceResult


async def test_completes_when_every_partition_hw_reaches_its_offset() -> None:
    hw = {("t", 0): 5, ("t", 1): 0}
    results = {("t", 0): ProduceResult(base_offset=0), ("t", 1): ProduceResult(base_offset=0)}
    purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory("Produce")
    purgatory.start()
    try:
        op = DelayedProduce(10_000, results, {("t", 0): 5, ("t", 1): 3}, hw.get)
        assert not purgatory.try_complete_else_watch(op, list(results))
        assert purgatory.check_and_complete(("t", 1)) == 0  # still short
        hw[("t", 1)] = 3
        assert purgatory.check_and_complete(("t", 1)) == 1
        done = await asyncio.wait_for(op.future, 1)
        assert all(r.error == 0 for r in done.values())
    finally:
        await purgatory.shutdown()


async def test_expiry_answers_request_timed_out_for_partitions_still_short() -> None:
    hw = {("t", 0): 10, ("t", 1): 0}
    results = {tp: ProduceResult(base_offset=0) for tp in hw}
    purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory("Produce")
    purgatory.start()
    try:
        op = DelayedProduce(20, results, {("t", 0): 10, ("t", 1): 4}, hw.get)
        purgatory.try_complete_else_watch(op, list(results))
        done = await asyncio.wait_for(op.future, 2)
        assert done[("t", 0)].error == 0 and done[("t", 0)].base_offset == 0
        assert done[("t", 1)].error == 7 and done[("t", 1)].base_offset == -1  # REQUEST_TIMED_OUT
    finally:
        await purgatory.shutdown()


async def test_lost_leadership_answers_not_leader() -> None:
    results = {("t", 0): ProduceResult(base_offset=0)}
    op = DelayedProduce(1000, results, {("t", 0): 1}, lambda tp: None)
    assert op.try_complete()
    assert (await op.future)[("t", 0)].error == 6  # NOT_LEADER_OR_FOLLOWER


async def test_replicated_while_the_isr_is_below_min_insync_replicas_answers_not_enough_after_append() -> None:
    results = {("t", 0): ProduceResult(base_offset=0), ("t", 1): ProduceResult(base_offset=0)}
    op = DelayedProduce(1000, results, {("t", 0): 1, ("t", 1): 1}, lambda tp: 1, lambda tp: tp != ("t", 1))
    assert op.try_complete()
    done = await op.future
    assert done[("t", 0)].error == 0
    assert done[("t", 1)].error == 20  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
