"""broker.purgatory: DelayedOperation's exactly-once completion and the purgatory's watch /
check / expire / purge cycle (after Kafka's DelayedOperationTest), on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from broker.purgatory import DelayedFuture, DelayedOperation, DelayedOperationPurgatory
from broker.timer import SystemTimer


class FakeClock:
    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class MockOp(DelayedOperation):
    """Completes once `completable` is set; records its callbacks in order."""

    def __init__(self, delay_ms: int, completable: bool = False) -> None:
        super().__init__(delay_ms)
        self.completable = completable
        self.calls: list[str] = []
        self.expired_seen_in_complete: bool | None = None

    def try_complete(self) -> bool:
        self.calls.append("try")
        if self.completable:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.calls.append("complete")
        self.expired_seen_in_complete = self.is_expired

    def on_expiration(self) -> None:
        self.calls.append("expiration")

    def callbacks(self) -> list[str]:
        return [c for c in self.calls if c != "try"]


def make(purge_interval: int = 1000) -> tuple[FakeClock, DelayedOperationPurgatory[MockOp]]:
    clock = FakeClock(0)
    return clock, DelayedOperationPurgatory(
        "test", SystemTimer("test", clock=clock), purge_interval
    )


def tick(clock: FakeClock, purgatory: DelayedOperationPurgatory[MockOp], now: int) -> None:
    clock.now = now
    purgatory.timer.advance_to(now)


def test_completes_immediately_when_possible() -> None:
    _, purgatory = make()
    op = MockOp(100, completable=True)
    assert purgatory.try_complete_else_watch(op, [("produce", "t", 0)]) is True
    assert op.is_completed and op.callbacks() == ["complete"]
    assert purgatory.watched == 0 and purgatory.delayed == 0


def test_empty_keys_are_rejected() -> None:
    _, purgatory = make()
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(MockOp(100), [])


def test_watch_then_complete_on_key() -> None:
    clock, purgatory = make()
    k1, k2 = ("produce", "t", 0), ("produce", "t", 1)
    op = MockOp(100)
    assert purgatory.try_complete_else_watch(op, [k1, k2]) is False
    assert op.calls == ["try", "try"]  # before watching and again after
    assert purgatory.watched == 2 and purgatory.delayed == 1
    assert purgatory.check_and_complete(k1) == 0
    assert purgatory.check_and_complete(("produce", "t", 9)) == 0  # unknown key
    op.completable = True
    assert purgatory.check_and_complete(k1) == 1
    assert op.callbacks() == ["complete"]
    assert purgatory.delayed == 0  # the timeout was cancelled
    assert purgatory.watched == 1  # still listed under k2 until checked or purged
    assert purgatory.check_and_complete(k2) == 0
    assert purgatory.watched == 0 and purgatory.watched_keys() == []
    tick(clock, purgatory, 1_000)
    assert op.callbacks() == ["complete"]  # no expiry after completion


def test_completion_between_watching_and_second_try() -> None:
    _, purgatory = make()

    class SecondTime(MockOp):
        def try_complete(self) -> bool:
            self.calls.append("try")
            return self.calls.count("try") == 2 and self.force_complete()

    op = SecondTime(100)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is True
    assert purgatory.delayed == 0  # never timed


def test_expiry_completes_then_calls_on_expiration_once() -> None:
    clock, purgatory = make()
    op = MockOp(100)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    tick(clock, purgatory, 99)
    assert not op.is_completed
    tick(clock, purgatory, 100)
    # Kafka's order: run() = forceComplete() (on_complete) then on_expiration().
    assert op.callbacks() == ["complete", "expiration"]
    assert op.is_completed and op.is_expired and op.expired_seen_in_complete is True
    assert purgatory.delayed == 0
    op.completable = True
    assert purgatory.check_and_complete("k") == 0
    assert op.force_complete() is False
    op.run()  # a late timer firing is a no-op
    tick(clock, purgatory, 10_000)
    assert op.callbacks() == ["complete", "expiration"]


def test_zero_delay_operation_expires_inside_try_complete_else_watch() -> None:
    _, purgatory = make()
    op = MockOp(0)
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    assert op.callbacks() == ["complete", "expiration"]
    assert purgatory.delayed == 0


def test_force_complete_races_complete_once() -> None:
    clock, purgatory = make()
    op = MockOp(100)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    assert op.force_complete() is True
    assert op.force_complete() is False
    op.completable = True
    assert op.safe_try_complete() is False
    assert purgatory.check_and_complete("k") == 0
    tick(clock, purgatory, 100)
    assert op.callbacks() == ["complete"]  # no expiration after a forced completion
    assert not op.is_expired


def test_force_complete_reentered_from_on_complete() -> None:
    results: list[bool] = []

    class Reentrant(MockOp):
        def on_complete(self) -> None:
            super().on_complete()
            results.append(self.force_complete())

    op = Reentrant(100)
    assert op.force_complete() is True
    assert results == [False] and op.callbacks() == ["complete"]


def test_check_and_complete_counts_only_what_it_completed() -> None:
    _, purgatory = make()
    ops = [MockOp(100) for _ in range(5)]
    for op in ops:
        assert not purgatory.try_complete_else_watch(op, ["k"])
    ops[0].force_complete()
    for op in ops[1:4]:
        op.completable = True
    assert purgatory.check_and_complete("k") == 3
    assert purgatory.watched_for_key("k") == 1
    assert purgatory.delayed == 1


def test_reentrant_watch_on_same_key_is_not_lost() -> None:
    _, purgatory = make()
    follow_up = MockOp(100)

    class Chain(MockOp):
        def on_complete(self) -> None:
            super().on_complete()
            assert not purgatory.try_complete_else_watch(follow_up, ["k"])

    first = Chain(100)
    assert not purgatory.try_complete_else_watch(first, ["k"])
    first.completable = True
    assert purgatory.check_and_complete("k") == 1
    assert purgatory.watched_for_key("k") == 1 and not follow_up.is_completed
    follow_up.completable = True
    assert purgatory.check_and_complete("k") == 1


def test_purging_reduces_watcher_lists() -> None:
    _, purgatory = make(purge_interval=10)
    ops = [MockOp(1_000) for _ in range(50)]
    for i, op in enumerate(ops):
        assert not purgatory.try_complete_else_watch(op, ["shared", i])
    assert purgatory.watched == 100 and purgatory.watched_for_key("shared") == 50

    for i in range(10):
        ops[i].completable = True
        assert purgatory.check_and_complete(i) == 1
    # 10 completions: not over the interval yet, the shared list still holds them.
    assert purgatory.watched_for_key("shared") == 50
    ops[10].completable = True
    assert purgatory.check_and_complete(10) == 1
    assert purgatory.watched_for_key("shared") == 39  # 11 > 10: purged
    assert purgatory.watched == 39 + 39

    for i in range(11, 50):
        ops[i].completable = True
        assert purgatory.check_and_complete(i) == 1
    # Purged again after completions 22, 33 and 44; the last 6 wait for the next purge.
    assert purgatory.watched_for_key("shared") == 6 and purgatory.watched == 6
    assert purgatory.purge_completed() == 6
    assert purgatory.watched == 0 and purgatory.watched_keys() == []


def test_expiries_alone_trigger_a_purge() -> None:
    clock, purgatory = make(purge_interval=5)
    ops = [MockOp(100) for _ in range(8)]
    for op in ops:
        assert not purgatory.try_complete_else_watch(op, ["k"])
    assert purgatory.watched == 8
    tick(clock, purgatory, 100)  # all expire; nobody calls the purgatory
    assert all(op.callbacks() == ["complete", "expiration"] for op in ops)
    # The 6th expiry crossed the interval and purged the 6 completed so far.
    assert purgatory.watched == 2 and purgatory.delayed == 0


def test_cancel_for_key_stops_watching_without_completing() -> None:
    clock, purgatory = make()
    ops = [MockOp(100) for _ in range(3)]
    for op in ops:
        assert not purgatory.try_complete_else_watch(op, ["gone", "other"])
    assert purgatory.delayed == 3
    cancelled = purgatory.cancel_for_key("gone")
    assert cancelled == ops
    assert purgatory.cancel_for_key("gone") == []
    assert purgatory.delayed == 0 and purgatory.watched == 3
    tick(clock, purgatory, 1_000)
    assert all(op.callbacks() == [] and not op.is_completed for op in ops)


class Answer(DelayedFuture[str]):
    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ready = False
        self.fail = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def complete_value(self) -> str:
        if self.fail:
            raise LookupError("no answer")
        return "timed out" if self.is_expired else "done"


async def test_delayed_future_resolves_on_key_and_on_expiry() -> None:
    clock = FakeClock(0)
    purgatory: DelayedOperationPurgatory[Answer] = DelayedOperationPurgatory(
        "fut", SystemTimer("fut", clock=clock)
    )
    by_key, by_timeout = Answer(100), Answer(100)
    assert not purgatory.try_complete_else_watch(by_key, ["k"])
    assert not purgatory.try_complete_else_watch(by_timeout, ["k"])
    by_key.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert await asyncio.wait_for(by_key.future, 1) == "done"
    assert not by_timeout.future.done()
    clock.now = 100
    purgatory.timer.advance_to(100)
    assert await asyncio.wait_for(by_timeout.future, 1) == "timed out"


async def test_delayed_future_carries_complete_value_errors() -> None:
    op = Answer(100)
    op.fail = True
    op.force_complete()
    with pytest.raises(LookupError):
        await asyncio.wait_for(op.future, 1)


async def test_cancelled_future_completes_the_operation_quietly() -> None:
    clock = FakeClock(0)
    purgatory: DelayedOperationPurgatory[Answer] = DelayedOperationPurgatory(
        "fut", SystemTimer("fut", clock=clock)
    )
    op = Answer(100)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    op.future.cancel()  # the handler gave up (connection closed)
    await asyncio.sleep(0)  # done callbacks run on the loop
    assert op.is_completed and purgatory.delayed == 0
    assert purgatory.check_and_complete("k") == 0 and purgatory.watched == 0


async def test_start_and_shutdown_own_the_timer() -> None:
    clock = FakeClock(0)
    purgatory: DelayedOperationPurgatory[MockOp] = DelayedOperationPurgatory(
        "life", SystemTimer("life", clock=clock)
    )
    purgatory.start()
    purgatory.start()  # idempotent
    assert purgatory.timer.running
    op = MockOp(50)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    clock.now = 50  # due before the reaper's first pass
    for _ in range(10):
        await asyncio.sleep(0)
        if op.is_completed:
            break
    assert op.callbacks() == ["complete", "expiration"]
    await purgatory.shutdown()
    assert not purgatory.timer.running


def test_default_timer_is_created_per_purgatory() -> None:
    a: DelayedOperationPurgatory[MockOp] = DelayedOperationPurgatory("a")
    b: DelayedOperationPurgatory[MockOp] = DelayedOperationPurgatory("b")
    assert a.timer is not b.timer and a.timer.name == "a"
