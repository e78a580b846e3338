"""broker.timer: the hierarchical timing wheel and SystemTimer, driven by a fake clock.

Properties checked (Kafka's TimerTest / TimingWheel semantics): every task fires exactly once,
never before its expiration and at the first clock step at or after it, in non-decreasing
expiration order; cancelled tasks never fire; overflow wheels appear on demand with ticks
1 -> 20 -> 400 -> 8000 ms. O(1) is shown by counting, not timing: heap pushes per insert
(buckets, not tasks, enter the queue) and next/prev link accesses per insert and cancel.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.timer import (
    CallbackTimerTask,
    DelayQueue,
    SystemTimer,
    TaskCounter,
    TimerTask,
    TimerTaskEntry,
    TimerTaskList,
    TimingWheel,
)
from broker.timer import timing_wheel as tw


class FakeClock:
    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Recorder:
    """Tasks that log (fire time, expiration, id) when they run."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.fired: list[tuple[int, int, int]] = []

    def task(self, delay: int, ident: int) -> CallbackTimerTask:
        expiration = self.clock.now + delay
        return CallbackTimerTask(
            delay, lambda: self.fired.append((self.clock.now, expiration, ident))
        )


def make_timer(start: int = 0) -> tuple[FakeClock, SystemTimer, Recorder]:
    clock = FakeClock(start)
    timer = SystemTimer("test", clock=clock)
    return clock, timer, Recorder(clock)


def assert_fired_in_order(fired: list[tuple[int, int, int]]) -> None:
    for fire_time, expiration, _ in fired:
        assert fire_time >= expiration, "fired before its time"
    expirations = [e for _, e, _ in fired]
    assert expirations == sorted(expirations), "fired out of expiration order"


# -- ordering -----------------------------------------------------------------------------


@pytest.mark.parametrize("start", [0, 7, 1_000_003])
def test_random_delays_fire_once_in_order_never_early(start: int) -> None:
    rng = random.Random(start)
    clock, timer, rec = make_timer(start)
    delays = [rng.randint(1, 100_000) for _ in range(20_000)]
    expirations = {}
    for i, delay in enumerate(delays):
        timer.add(rec.task(delay, i))
        expirations[i] = start + delay
    assert timer.size == len(delays)

    while timer.size:
        step = rng.randint(1, 700)
        before = len(rec.fired)
        clock.now += step
        timer.advance_to(clock.now)
        # Not late either: after a step to `now`, nothing due by `now` is still pending.
        for fire_time, expiration, _ in rec.fired[before:]:
            assert fire_time == clock.now and expiration > clock.now - step
        assert timer.size == len(delays) - len(rec.fired)

    assert sorted(i for _, _, i in rec.fired) == list(range(len(delays)))
    assert_fired_in_order(rec.fired)
    assert all(expirations[i] == e for _, e, i in rec.fired)


def test_bucket_expires_exactly_at_its_time() -> None:
    clock, timer, rec = make_timer(0)
    for delay in (1, 19, 20, 21, 399, 400, 401, 8_000, 99_999):
        timer.add(rec.task(delay, delay))
    for t in range(1, 100_001):
        clock.now = t
        timer.advance_to(t)
    assert [(f, e) for f, e, _ in rec.fired] == [
        (d, d) for d in (1, 19, 20, 21, 399, 400, 401, 8_000, 99_999)
    ]


@pytest.mark.parametrize("delay", [0, -1, -5_000])
def test_zero_or_negative_delay_runs_inside_add(delay: int) -> None:
    clock, timer, rec = make_timer(1_000)
    timer.add(rec.task(50, 1))
    clock.now = 1_030  # the wheel lags the clock: the task must still run now, not at a tick
    timer.add(rec.task(delay, 2))
    assert [i for _, _, i in rec.fired] == [2]
    assert timer.size == 1


def test_fractional_clock_never_fires_early() -> None:
    clock = FakeClock(0)
    timer = SystemTimer("frac", clock=clock)
    fired: list[float] = []
    clock.now = 100.7  # type: ignore[assignment]
    timer.add(CallbackTimerTask(5, lambda: fired.append(clock.now)))
    clock.now = 105.99  # type: ignore[assignment]
    timer.advance_to(timer._now())
    assert fired == []
    clock.now = 106.0  # type: ignore[assignment]
    timer.advance_to(timer._now())
    assert fired == [106.0]


# One random scenario: interleaved adds (any delay), cancels and clock steps.
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-10, 100_000)),
        st.tuples(st.just("cancel"), st.integers(0, 10_000)),
        st.tuples(st.just("advance"), st.integers(0, 30_000)),
    ),
    max_size=120,
)


@settings(max_examples=200, deadline=None)
@given(start=st.integers(0, 10**12), ops=_ops)
def test_interleaved_adds_cancels_and_steps(start: int, ops: list[tuple[str, int]]) -> None:
    clock, timer, rec = make_timer(start)
    tasks: list[tuple[CallbackTimerTask, int, int]] = []  # task, expiration, delay
    cancelled: set[int] = set()
    for op, arg in [*ops, ("advance", 200_000)]:
        if op == "add":
            ident = len(tasks)
            task = rec.task(arg, ident)
            tasks.append((task, clock.now + arg, arg))
            fired_before = len(rec.fired)
            timer.add(task)
            if arg <= 0:  # delay <= 0 runs immediately
                assert [i for _, _, i in rec.fired[fired_before:]] == [ident]
        elif op == "cancel" and tasks:
            ident = arg % len(tasks)
            tasks[ident][0].cancel()
            if ident not in {i for _, _, i in rec.fired}:
                cancelled.add(ident)
        elif op == "advance":
            clock.now += arg
            timer.advance_to(clock.now)
            fired = {i for _, _, i in rec.fired}
            for ident, (_, expiration, _) in enumerate(tasks):
                if ident not in fired and ident not in cancelled:
                    assert expiration > clock.now, "a due task was left pending"
        assert timer.size == len(tasks) - len(rec.fired) - len(cancelled)

    fired_ids = [i for _, _, i in rec.fired]
    assert len(fired_ids) == len(set(fired_ids)), "a task fired twice"
    assert set(fired_ids) == set(range(len(tasks))) - cancelled
    # Positive-delay tasks fire in expiration order and never early; immediate ones (delay
    # <= 0) run at add time by definition.
    delayed = [f for f in rec.fired if tasks[f[2]][2] > 0]
    assert_fired_in_order(delayed)


def test_task_exception_is_logged_and_timer_goes_on() -> None:
    clock, timer, rec = make_timer(0)

    def boom() -> None:
        raise RuntimeError("boom")

    timer.add(CallbackTimerTask(5, boom))
    timer.add(rec.task(5, 1))
    timer.add(rec.task(6, 2))
    clock.now = 10
    assert timer.advance_to(10) is True
    assert [i for _, _, i in rec.fired] == [1, 2]
    assert timer.size == 0


def test_task_added_from_inside_a_firing_task_is_scheduled() -> None:
    clock, timer, rec = make_timer(0)

    def chain() -> None:
        timer.add(rec.task(30, 2))
        timer.add(rec.task(0, 3))  # immediate, even mid-flush

    timer.add(CallbackTimerTask(25, chain))
    timer.add(rec.task(26, 1))
    clock.now = 40
    timer.advance_to(40)
    assert [i for _, _, i in rec.fired] == [3, 1]
    clock.now = 69
    timer.advance_to(69)
    assert [i for _, _, i in rec.fired] == [3, 1]
    clock.now = 70
    timer.advance_to(70)
    assert [i for _, _, i in rec.fired] == [3, 1, 2]


def test_readding_a_task_replaces_its_entry() -> None:
    clock, timer, rec = make_timer(0)
    task = rec.task(100, 1)
    timer.add(task)
    first = task.timer_task_entry
    clock.now = 50
    timer.add(task)  # re-arm: fires at 150, once
    assert first is not None and first.list is None and first.cancelled()
    assert timer.size == 1
    for t in (100, 149, 150, 1_000):
        clock.now = t
        timer.advance_to(t)
    assert [f for f, _, _ in rec.fired] == [150]


# -- cancellation -------------------------------------------------------------------------


def test_cancelled_tasks_never_run_and_leave_their_bucket() -> None:
    rng = random.Random(1)
    clock, timer, rec = make_timer(0)
    tasks = [rec.task(rng.randint(1, 50_000), i) for i in range(5_000)]
    for task in tasks:
        timer.add(task)
    doomed = set(rng.sample(range(len(tasks)), 2_500))
    for i in doomed:
        entry = tasks[i].timer_task_entry
        assert entry is not None
        bucket = entry.list
        assert bucket is not None
        size, pending = len(bucket), timer.size
        tasks[i].cancel()
        assert len(bucket) == size - 1  # unlinked from its bucket, nothing left behind
        assert entry.list is None and entry.next is None and entry.prev is None
        assert tasks[i].timer_task_entry is None
        assert timer.size == pending - 1
        tasks[i].cancel()  # idempotent
        assert timer.size == pending - 1
    clock.now = 60_000
    timer.advance_to(clock.now)
    assert {i for _, _, i in rec.fired} == set(range(len(tasks))) - doomed
    assert timer.size == 0


def test_cancel_from_a_task_running_in_the_same_bucket() -> None:
    clock, timer, rec = make_timer(0)
    victim = rec.task(10, 2)
    timer.add(CallbackTimerTask(10, victim.cancel))
    timer.add(victim)
    timer.add(rec.task(10, 3))
    clock.now = 10
    timer.advance_to(10)
    assert [i for _, _, i in rec.fired] == [3]


def test_wheel_add_refuses_expired_and_cancelled_entries() -> None:
    queue = DelayQueue()
    wheel = TimingWheel(1, 20, 100, TaskCounter(), queue)
    task = CallbackTimerTask(0, lambda: None)
    assert wheel.add(TimerTaskEntry(task, 100)) is False  # within the current tick
    assert wheel.add(TimerTaskEntry(task, 50)) is False
    live = TimerTaskEntry(task, 101)
    assert wheel.add(live) is True
    stale = TimerTaskEntry(CallbackTimerTask(0, lambda: None), 105)
    assert stale.timer_task is not None
    stale.timer_task.cancel()  # the task no longer points at this entry
    assert wheel.add(stale) is False


# -- overflow wheels ----------------------------------------------------------------------


def test_overflow_wheels_are_created_on_demand() -> None:
    queue = DelayQueue()
    counter = TaskCounter()
    wheel = TimingWheel(1, 20, 0, counter, queue)

    def add(expiration: int) -> None:
        assert wheel.add(TimerTaskEntry(CallbackTimerTask(0, lambda: None), expiration))

    add(19)
    assert wheel.overflow_wheel is None
    add(20)
    level1 = wheel.overflow_wheel
    assert level1 is not None and (level1.tick_ms, level1.interval) == (20, 400)
    assert level1.overflow_wheel is None
    add(399)
    assert level1.overflow_wheel is None
    add(1_000)
    level2 = level1.overflow_wheel
    assert level2 is not None and (level2.tick_ms, level2.interval) == (400, 8_000)
    add(100_000)
    assert [w.tick_ms for w in wheel.levels()] == [1, 20, 400, 8_000]
    assert counter.value == 5


def test_overflow_wheel_via_system_timer_then_cascade() -> None:
    clock, timer, rec = make_timer(0)
    timer.add(rec.task(100_000, 1))
    assert [w.tick_ms for w in timer.timing_wheel.levels()] == [1, 20, 400, 8_000]
    # The task sits in the 8 s wheel's bucket [96000, 104000) and cascades down on expiry.
    bucket = timer.timing_wheel.levels()[3].buckets[100_000 // 8_000 % 20]
    assert (bucket.expiration, len(bucket)) == (96_000, 1)
    for t in (96_000, 99_600, 99_980, 99_999):
        clock.now = t
        timer.advance_to(t)
        assert rec.fired == []
    clock.now = 100_000
    timer.advance_to(100_000)
    assert rec.fired == [(100_000, 100_000, 1)]


# -- O(1) by counting ---------------------------------------------------------------------


def test_only_buckets_enter_the_delay_queue() -> None:
    rng = random.Random(7)
    _, timer, _ = make_timer(0)
    n = 100_000
    for _ in range(n):
        timer.add(CallbackTimerTask(rng.randint(1, 100_000), lambda: None))
    levels = timer.timing_wheel.levels()
    bucket_count = sum(w.wheel_size for w in levels)
    queue = timer.delay_queue
    assert timer.size == n
    assert len(levels) == 4
    assert queue.pushes <= bucket_count == 80
    assert len(queue) <= bucket_count

    # Cancelling everything pushes nothing and leaves no task behind in the queue.
    pushes = queue.pushes
    for level in levels:
        for bucket in level.buckets:
            for entry in list(bucket):
                assert entry.timer_task is not None
                entry.timer_task.cancel()
    assert timer.size == 0 and queue.pushes == pushes


@pytest.fixture
def counting_links(monkeypatch: pytest.MonkeyPatch) -> type[TimerTaskEntry]:
    """Entries (bucket roots included) that count every read and write of next/prev."""
    base_next = TimerTaskEntry.next  # the slot descriptors
    base_prev = TimerTaskEntry.prev

    class CountingEntry(TimerTaskEntry):
        __slots__ = ()
        touches = 0

        def _get_next(self) -> TimerTaskEntry | None:
            CountingEntry.touches += 1
            return base_next.__get__(self, TimerTaskEntry)  # type: ignore[attr-defined]

        def _set_next(self, value: TimerTaskEntry | None) -> None:
            CountingEntry.touches += 1
            base_next.__set__(self, value)  # type: ignore[attr-defined]

        def _get_prev(self) -> TimerTaskEntry | None:
            CountingEntry.touches += 1
            return base_prev.__get__(self, TimerTaskEntry)  # type: ignore[attr-defined]

        def _set_prev(self, value: TimerTaskEntry | None) -> None:
            CountingEntry.touches += 1
            base_prev.__set__(self, value)  # type: ignore[attr-defined]

        next = property(_get_next, _set_next)  # type: ignore[assignment]
        prev = property(_get_prev, _set_prev)  # type: ignore[assignment]

    monkeypatch.setattr(tw, "TimerTaskEntry", CountingEntry)
    return CountingEntry


def test_insert_and_cancel_touch_a_constant_number_of_links(
    counting_links: type[TimerTaskEntry],
) -> None:
    counting = counting_links
    wheel = TimingWheel(1, 20, 0, TaskCounter(), DelayQueue())

    def insert(expiration: int) -> tuple[TimerTask, int]:
        task = CallbackTimerTask(0, lambda: None)
        entry = counting(task, expiration)
        before = counting.touches  # type: ignore[attr-defined]
        assert wheel.add(entry)
        return task, counting.touches - before  # type: ignore[attr-defined]

    def cancel(task: TimerTask) -> int:
        before = counting.touches  # type: ignore[attr-defined]
        task.cancel()
        return counting.touches - before  # type: ignore[attr-defined]

    per_size: dict[int, tuple[int, int]] = {}
    for crowd in (0, 10, 10_000):
        for _ in range(crowd):  # fill the bucket at 5 ms
            insert(5)
        task, insert_cost = insert(5)
        middle_task, _ = insert(5)
        insert(5)
        per_size[crowd] = (insert_cost, cancel(middle_task))
        cancel(task)
    assert per_size[0] == per_size[10] == per_size[10_000]
    insert_cost, cancel_cost = per_size[0]
    assert insert_cost <= 6 and cancel_cost <= 6

    # Across every level and random positions the cost per op stays bounded by a constant.
    # (Creating an overflow wheel links 20 empty roots once; do that before measuring.)
    insert(150_000)
    assert [w.tick_ms for w in wheel.levels()] == [1, 20, 400, 8_000]
    rng = random.Random(3)
    tasks = []
    costs = []
    for _ in range(20_000):
        task, cost = insert(rng.randint(1, 150_000))
        tasks.append(task)
        costs.append(cost)
    rng.shuffle(tasks)
    costs += [cancel(t) for t in tasks]
    assert max(costs) <= 6


def test_flush_reinserts_everything_and_resets_expiration() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    tasks = [CallbackTimerTask(0, lambda: None) for _ in range(5)]
    entries = [TimerTaskEntry(t, 10) for t in tasks]
    for e in entries:
        bucket.add(e)
    assert bucket.set_expiration(10) is True
    assert bucket.set_expiration(10) is False  # same round: not re-queued
    seen: list[TimerTaskEntry] = []
    bucket.flush(seen.append)
    assert seen == entries and len(bucket) == 0 and counter.value == 0
    assert bucket.expiration == -1
    assert all(e.list is None for e in entries)


def test_delay_queue_skips_stale_bucket_items() -> None:
    queue = DelayQueue()
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    a.set_expiration(10)
    queue.offer(a)
    b.set_expiration(20)
    queue.offer(b)
    a.set_expiration(30)  # re-timed: its first heap item is now stale
    queue.offer(a)
    assert queue.peek_expiration() == 20
    assert queue.poll(25) is b
    assert queue.poll(29) is None
    assert queue.poll(30) is a
    assert queue.poll(10**9) is None and queue.peek_expiration() is None


# -- asyncio driving ----------------------------------------------------------------------


async def test_advance_clock_returns_without_sleeping_on_a_fake_clock() -> None:
    clock, timer, rec = make_timer(0)
    timer.add(rec.task(10, 1))
    assert await timer.advance_clock(0) is False
    clock.now = 10
    assert await timer.advance_clock(1_000) is True
    assert [i for _, _, i in rec.fired] == [1]


async def test_background_reaper_real_time() -> None:
    """The one real-time test: the reaper sleeps until the earliest bucket, is woken early
    when an earlier one is queued, and runs tasks on the loop in order."""
    loop = asyncio.get_running_loop()
    timer = SystemTimer("rt")
    timer.start()
    timer.start()  # idempotent
    order: list[str] = []
    done = {name: loop.create_future() for name in ("far", "a", "b", "c")}

    def fire(name: str) -> Callable[[], None]:
        def run() -> None:
            order.append(name)
            done[name].set_result(loop.time())

        return run

    timer.add(CallbackTimerTask(60_000, fire("far")))  # the reaper now sleeps for a minute
    await asyncio.sleep(0)
    started = loop.time()
    timer.add(CallbackTimerTask(30, fire("c")))
    timer.add(CallbackTimerTask(5, fire("a")))  # earlier bucket: must wake the reaper early
    timer.add(CallbackTimerTask(15, fire("b")))
    await asyncio.wait_for(asyncio.gather(done["a"], done["b"], done["c"]), timeout=2.0)
    assert order == ["a", "b", "c"]
    assert done["a"].result() - started >= 0.0049  # never early
    assert done["c"].result() - started >= 0.0299
    assert timer.running and timer.size == 1
    await timer.shutdown()
    assert not timer.running and not done["far"].done()
    await timer.shutdown()  # idempotent
