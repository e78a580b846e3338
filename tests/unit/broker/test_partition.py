"""Partition's ISR changes as a state machine (Kafka's CommittedPartitionState / PendingExpandIsr /
PendingShrinkIsr), on a real log, no server: the high watermark counts the maximal ISR while a
change is pending, and each answer of the controller ends the pending state by Kafka's rules.

The first test is the race issue #20 names: with the ISR expansion in flight, the old Partition
moved the high watermark past the joining replica's log end (it counted the committed ISR only),
so acks=all acknowledged records the controller's new ISR member did not have."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.alter_partition_manager import IsrChange
from broker.partition import Partition, PendingIsrChange, alter_partition_retriable
from controller.image import PartitionState, TopicState
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log

LEADER, F1, F2 = 0, 1, 2
EPOCH = 3
NOW = 1_700_000_000_000


def batch(n: int) -> bytearray:
    return bytearray(build_batch([Record(0, i, i, None, b"v", []) for i in range(n)], base_timestamp=NOW))


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[Partition]:
    """Led here at EPOCH, replicas 0, 1, 2, ISR 0, 1 (replica 2 is catching up), min ISR 2."""
    log_ = Log.open(tmp_path / "t-0", LogConfig(min_insync_replicas=2))
    state = PartitionState(0, [LEADER, F1, F2], LEADER, EPOCH, [LEADER, F1], partition_epoch=7)
    p = Partition(TopicState("t", uuid.uuid4(), {0: state}), state, log_, LEADER)
    log_.maybe_assign_epoch_start_offset(EPOCH, 0)
    p.reset_followers(NOW)
    yield p
    log_.close()


def expand_to_f2(p: Partition) -> PendingIsrChange:
    """Replica 2 fetches at the high watermark (0): its expansion into the ISR is proposed."""
    p.update_follower_fetch_state(F2, 0, NOW)
    pending = p.prepare_isr_expand(F2)
    assert pending is not None
    return pending


def append(p: Partition, n: int) -> int:
    """Append n records with acks=all; the offset an acks=all produce of them waits for."""
    info = p.append_records_to_leader(batch(n), -1, NOW)
    return info.last_offset + 1


def test_a_pending_expansion_holds_the_high_watermark_at_the_joining_replica(partition: Partition) -> None:
    p = partition
    append(p, 10)
    p.update_follower_fetch_state(F1, 10, NOW)
    p.update_follower_fetch_state(F2, 10, NOW)  # replica 2 caught up: it may join
    assert p.high_watermark == 10
    pending = p.prepare_isr_expand(F2)
    assert pending is not None and pending.isr == (0, 1, 2) and list(p.maximal_isr) == [0, 1, 2]
    assert p.isr == [LEADER, F1]  # committed: what min.insync.replicas is checked against

    required = append(p, 5)
    p.update_follower_fetch_state(F1, 15, NOW)
    # the controller may already list replica 2 in the ISR: records it lacks are not committed
    assert p.high_watermark == 10 < required
    assert p.prepare_isr_expand(F2) is None and p.prepare_isr_shrink(NOW + 10**6, 1) is None  # one at a time

    assert not p.complete_isr_change(pending, IsrChange(EPOCH, [0, 1, 2], 8))
    assert p.pending_isr is None and p.isr == [0, 1, 2] and p.state.partition_epoch == 8
    assert p.update_follower_fetch_state(F2, 15, NOW)  # now replica 2 has them: acknowledged
    assert p.high_watermark == 15


def test_a_pending_shrink_keeps_counting_the_leaving_replica_until_the_controller_answers(
        partition: Partition) -> None:
    p = partition
    append(p, 4)
    p.update_follower_fetch_state(F1, 4, NOW)
    assert p.high_watermark == 4
    append(p, 4)  # replica 1 stops fetching
    proposal = p.prepare_isr_shrink(NOW + 30_001, 30_000)
    assert proposal is not None
    pending, out = proposal
    assert out == [F1] and pending.isr == (LEADER,) and list(p.maximal_isr) == [LEADER, F1]
    assert not p.maybe_increment_high_watermark() and p.high_watermark == 4  # the shrink may not be applied
    assert p.complete_isr_change(pending, IsrChange(EPOCH, [LEADER], 8))  # it is: the HW moves
    assert p.high_watermark == 8 and p.isr == [LEADER]


@pytest.mark.parametrize("code", [ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA])
def test_a_refusal_that_applied_nothing_returns_to_the_committed_isr(partition: Partition, code: int) -> None:
    p = partition
    pending = expand_to_f2(p)
    assert not alter_partition_retriable(code)
    assert not p.complete_isr_change(pending, code)
    assert p.pending_isr is None and list(p.maximal_isr) == [LEADER, F1]
    assert p.prepare_isr_expand(F2) is not None  # may propose again


@pytest.mark.parametrize("code", [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
def test_a_stale_state_stays_pending_until_the_controllers_leader_and_isr(partition: Partition, code: int) -> None:
    p = partition
    pending = expand_to_f2(p)
    assert not alter_partition_retriable(code)
    assert not p.complete_isr_change(pending, code)
    assert p.pending_isr is pending and list(p.maximal_isr) == [0, 1, 2]  # the controller may have it
    p.set_state(PartitionState(0, [LEADER, F1, F2], LEADER, EPOCH + 1, [LEADER, F1, F2], 9))  # LeaderAndIsr
    assert p.pending_isr is None and p.isr == [LEADER, F1, F2]


@pytest.mark.parametrize("code", [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER,
                                  ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.STALE_BROKER_EPOCH])
def test_unexpected_errors_are_retried(code: int) -> None:
    assert alter_partition_retriable(code)


def test_an_answer_to_a_superseded_proposal_is_ignored(partition: Partition) -> None:
    p = partition
    pending = expand_to_f2(p)
    p.set_state(PartitionState(0, [LEADER, F1, F2], LEADER, EPOCH + 1, [LEADER], 9))  # a new leadership
    assert not p.complete_isr_change(pending, IsrChange(EPOCH, [0, 1, 2], 8))
    assert p.isr == [LEADER] and p.state.partition_epoch == 9 and p.pending_isr is None


def test_an_answer_at_another_leader_epoch_or_an_older_partition_epoch_is_ignored(partition: Partition) -> None:
    p = partition
    pending = expand_to_f2(p)
    assert not p.complete_isr_change(pending, IsrChange(EPOCH + 1, [0, 1, 2], 8))
    assert not p.complete_isr_change(pending, IsrChange(EPOCH, [0, 1, 2], 6))
    assert p.pending_isr is pending and p.isr == [LEADER, F1]


def test_acks_all_checks_min_insync_replicas_against_the_committed_isr(partition: Partition) -> None:
    p = partition
    p.set_state(PartitionState(0, [LEADER, F1, F2], LEADER, EPOCH, [LEADER], 8))
    p.update_follower_fetch_state(F1, 0, NOW)
    assert p.prepare_isr_expand(F1) is not None  # pending: not yet in the ISR the append checks
    with pytest.raises(Exception, match="insufficient"):
        append(p, 1)


def test_a_follower_fetch_at_another_leader_epoch_is_not_counted(partition: Partition) -> None:
    """Issue #20: the Fetch handler recorded a follower's fetch offset before checking its
    leader epoch, so a fenced follower's log end (of a log that may have diverged under another
    leader) could move the high watermark. Kafka checks the epoch first (Partition.fetchRecords)."""
    p = partition
    append(p, 10)
    assert p.follower_fetch(F1, 10, EPOCH - 1, EPOCH - 1, True, NOW) == (False, False, None)  # fenced
    assert p.follower_fetch(F1, 10, EPOCH + 1, EPOCH, True, NOW) == (False, False, None)  # ahead of us
    assert p.high_watermark == 0 and p.followers[F1].log_end_offset == -1
    assert p.follower_fetch(F1, 10, EPOCH, EPOCH, True, NOW) == (True, True, None)
    assert p.high_watermark == 10
    assert p.follower_fetch(F1, 10, -1, EPOCH, True, NOW) == (True, False, None)  # no epoch named: counted


def test_a_follower_whose_log_diverged_is_told_where_and_not_counted(partition: Partition) -> None:
    p = partition
    append(p, 10)
    # it claims epoch EPOCH - 1 up to 12: ours starts at 0 with EPOCH (no such epoch here)
    recorded, moved, diverging = p.follower_fetch(F1, 12, EPOCH, EPOCH - 1, True, NOW)
    assert (recorded, moved) == (False, False) and diverging is not None
    assert p.high_watermark == 0
    assert p.follower_fetch(F1, 12, EPOCH, EPOCH - 1, False, NOW)[0]  # before Fetch v12: no such check


async def test_a_state_older_than_an_isr_change_accepted_meanwhile_is_skipped(partition: Partition) -> None:
    """A LeaderAndIsr that waited for the partition (a roll or truncation in flight) while the
    controller accepted an ISR change must not bring the old ISR back (tests/sim seed 1036: the
    ISR never filled again)."""
    p = partition
    pending = expand_to_f2(p)
    assert not p.complete_isr_change(pending, IsrChange(EPOCH, [0, 1, 2], 8))
    stale = PartitionState(0, [LEADER, F1, F2], LEADER, EPOCH, [LEADER, F1], 7)
    assert await p.make_leader(stale, NOW) is None and p.isr == [0, 1, 2] and p.state.partition_epoch == 8
    assert await p.make_follower(stale) is None and p.is_leader
    newer = PartitionState(0, [LEADER, F1, F2], F1, EPOCH + 1, [LEADER, F1], 9)
    assert await p.make_follower(newer) == (p.log.log_end_offset, EPOCH) and not p.is_leader


async def test_a_follower_append_or_truncation_for_an_epoch_no_longer_followed_is_dropped(
        partition: Partition) -> None:
    """The fetcher's data is for the epoch it fetched at: once the partition leads (or follows
    another leader at a newer epoch) it is not written."""
    p = partition
    assert not await p.append_as_follower(batch(1), NOW, EPOCH)  # we lead at EPOCH
    await p.make_follower(PartitionState(0, [LEADER, F1, F2], F1, EPOCH + 1, [F1], 9))
    assert not await p.append_as_follower(batch(1), NOW, EPOCH)  # fetched under the old epoch
    assert not await p.truncate_to(0, EPOCH)
    assert p.log.log_end_offset == 0


async def test_active_producers_are_read_behind_the_serialisation_point(partition: Partition) -> None:
    """DescribeProducers' read of the producer state (Partition.active_producers) waits behind
    executor work holding the partition (a truncation here) and sees its result, rather than a
    producer state the executor is changing."""
    p = partition
    txn = build_batch([Record(0, 0, 0, None, b"v", [])], base_timestamp=NOW, producer_id=5, producer_epoch=0,
                      base_sequence=0, is_transactional=True)
    p.append_records_to_leader(bytearray(txn), 1, NOW)
    assert [(s.producer_id, s.current_txn_first_offset) for s in await p.active_producers()] == [(5, 0)]
    release = threading.Event()

    def truncate() -> None:
        assert release.wait(10)
        p.log.truncate_to(0)

    work = asyncio.ensure_future(p.run_exclusive(truncate))
    deadline = time.monotonic() + 5
    while not p._executor_busy:  # the truncation holds the partition
        assert time.monotonic() < deadline
        await asyncio.sleep(0.001)
    reader = asyncio.ensure_future(p.active_producers())
    done, _ = await asyncio.wait({reader}, timeout=0.2)
    assert not done  # queued behind the truncation
    release.set()
    await work
    assert await reader == []
