"""The replication simulation in make test (issue #20 §2): a few thousand seeds, every invariant
held; and the harness itself shown to find the races it was built for, by running it with each
fix taken out (a harness that could not fail would prove nothing). make fault runs 100,000
seeds (ODRADEK_FAULT_FULL). A failing seed is printed with `python -m tests.sim --seed N`."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

import broker.replica_fetcher as replica_fetcher
from broker.partition import Partition
from tests.sim.cluster import Scenario
from tests.sim.runner import run_one, run_seeds

SEEDS = int(os.environ.get("ODRADEK_SIM_SEEDS", "100000" if os.environ.get("ODRADEK_FAULT_FULL") else "2200"))


def test_every_invariant_holds_for_every_seed() -> None:
    summary = run_seeds(range(SEEDS))
    print(f"\n{summary.seeds} seeds in {summary.seconds:.1f} s ({summary.seeds_per_second:.1f} seeds/s), "
          f"{summary.acked} records acknowledged")
    assert summary.seeds == SEEDS
    assert summary.acked > 50 * SEEDS  # the scenarios do produce (about 130 acknowledged per seed)
    assert not summary.failures, "\n".join(
        f"{f.failure}\n  reproduce: python -m tests.sim --seed {f.seed}" for f in summary.failures[:10])


def _first_failure(found_within: int, scenario: Scenario | None = None) -> Any:
    summary = run_seeds(range(found_within), stop_at_first=True, scenario=scenario)
    assert summary.failures, f"no seed of {found_within} found the race: the harness cannot see it"
    return summary.failures[0]


def test_the_harness_finds_acks_all_loss_without_the_pending_isr_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race of 0f6b97d: the high watermark counted the committed ISR while an expansion was
    pending, so the controller could list a replica that lacked acknowledged records."""
    monkeypatch.setattr(Partition, "maximal_isr", property(lambda p: p.state.isr))
    failure = _first_failure(1000)
    assert "is not in the log of broker" in (failure.failure or "")
    # and it reproduces exactly, trace and all
    first, again = run_one(failure.seed, trace=True), run_one(failure.seed, trace=True)
    assert first.failure == again.failure == failure.failure
    assert first.trace == again.trace and len(first.trace) > 100


def test_the_harness_finds_the_follower_that_never_catches_up_without_its_own_epoch_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower that led an epoch briefly (one batch written) truncated to the leader's end of
    the diverging epoch only, kept its own batch, diverged again at the next fetch: forever
    (Kafka's getOffsetTruncationState bounds the truncation by the follower's own epoch end)."""
    def leader_end_only(log_: Any, epoch: int, end_offset: int) -> int:
        return min(end_offset if end_offset >= 0 else log_.high_watermark, log_.log_end_offset)

    monkeypatch.setattr(replica_fetcher, "truncation_offset", leader_end_only)
    failure = _first_failure(1500)
    assert "did not fill again" in (failure.failure or "")


def test_the_harness_finds_the_loop_waiting_on_disk_work_when_becoming_leader_is_not_serialised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Becoming leader read the log end offset and assigned the epoch's start on the loop while a
    roll or truncation of the previous leadership held the log's lock in an executor: the loop
    blocked on that disk work (and could record the epoch at a pre-truncation offset)."""
    async def make_leader_unserialised(p: Partition, state: Any, now_ms: int) -> bool:
        p.set_state(state)
        p.reset_followers(now_ms)
        p.log.maybe_assign_epoch_start_offset(state.leader_epoch, p.log.log_end_offset)
        return p.maybe_increment_high_watermark()

    monkeypatch.setattr(Partition, "make_leader", make_leader_unserialised)
    failure = _first_failure(1500)
    assert "waited on the lock of log" in (failure.failure or "")


def test_the_harness_finds_a_cancelled_fetcher_leaving_its_disk_work_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetcher stopped by a LeaderAndIsr while its truncation or roll ran in an executor let go
    of the partition at once; the thread still held the log's lock, and the next append on the
    loop waited for it."""
    async def in_executor_uncancellable_work(p: Partition, fn: Any, *args: Any) -> Any:
        p._executor_busy += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        finally:
            p._executor_busy -= 1

    monkeypatch.setattr(Partition, "_in_executor", in_executor_uncancellable_work)
    rolling = Scenario()  # a roll every dozen records: more disk work for a LeaderAndIsr to meet
    rolling.broker_props["log.segment.bytes"] = 1024
    failure = _first_failure(1500, rolling)
    assert "waited on the lock of log" in (failure.failure or "")


def test_the_harness_finds_a_follower_left_behind_by_retention_without_list_offsets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower whose fetch offset the leader's retention had deleted got OFFSET_OUT_OF_RANGE
    -- whose answer carries no log start offset (-1, as Kafka's) -- and backed off forever: it
    never caught up and the ISR never filled again. The fix asks the leader with ListOffsets."""
    async def back_off(fetcher: Any, tp: Any, st: Any, p: Any) -> None:
        st.delayed_until = asyncio.get_running_loop().time() + fetcher.manager.config.backoff_ms / 1000

    monkeypatch.setattr(replica_fetcher.ReplicaFetcher, "_reset_out_of_range", back_off)
    retention = Scenario(retention_bytes=4096)
    retention.broker_props["log.segment.bytes"] = 1024
    failure = _first_failure(500, retention)
    assert "did not fill again" in (failure.failure or "")
