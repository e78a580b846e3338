"""SystemTimer: a hierarchical timing wheel driven by one asyncio task (Kafka's `SystemTimer`
plus its `ExpirationReaper` thread, on the event loop instead of threads).

Why this shape: Kafka's reaper blocks in `DelayQueue.poll(200 ms)` and a task executor runs
what expires. On asyncio the reaper is a task that sleeps until the earliest *bucket* expiry (one
loop timer, not one per timeout), is woken early when a bucket that expires sooner is queued,
then pops every due bucket and runs the due tasks right there on the loop. No locks: adds,
cancels and expiry all happen on the event loop thread (STYLE #9), which is also what makes
running tasks inline safe.

Testing without sleeping: the clock is injectable (`clock=` returns milliseconds) and
`advance_to(now_ms)` does one reaper pass synchronously, so unit tests step a fake clock and
watch tasks fire; the background task calls the same method.

Deviations from Kafka, on purpose:
* a task whose delay is <= 0 runs inside `add()` (Kafka hands it to the executor);
* after draining every due bucket the wheel's clock is moved to `now` (Kafka's wheel only ever
  advances to popped bucket expirations, so after an idle spell a new short timeout is first
  filed in a needlessly coarse overflow wheel and cascades down). This is safe because no
  unflushed bucket expires at or before `now` at that point; `add()` does the same catch-up
  when the queue's head is still in the future;
* with a fractional clock, `add()` rounds now and the delay up and expiry rounds now down, so
  a timeout never fires before its delay has really passed (Kafka truncates both).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import structlog

from broker.timer.timing_wheel import (
    DelayQueue,
    TaskCounter,
    TimerTask,
    TimerTaskEntry,
    TimingWheel,
)

log = structlog.get_logger("odradek.timer")

Clock = Callable[[], float]


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class SystemTimer:
    """A timer for `TimerTask`s; one per purgatory, as in Kafka.

    `add(task)` files the task `task.delay_ms` after now: O(levels) insert, O(1) cancel via
    `task.cancel()`. Expired tasks run on the event loop, in expiration order, never before
    their time; an exception from a task is logged and does not stop the timer.

    Lifecycle: `start()` (needs a running loop) spawns the reaper task; `await shutdown()`
    stops it. Tasks still pending at shutdown never run. Only one coroutine may drive the
    timer at a time: the reaper, or a test calling `advance_clock` / `advance_to`.
    """

    def __init__(
        self,
        name: str = "timer",
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int | None = None,
        clock: Clock = monotonic_ms,
    ) -> None:
        self.name = name
        self._clock = clock
        self._task_counter = TaskCounter()
        self._queue = DelayQueue()
        self._queue.listener = self._on_new_earliest
        start = self._now() if start_ms is None else start_ms
        self._timing_wheel = TimingWheel(
            tick_ms, wheel_size, start, self._task_counter, self._queue
        )
        self._advancing = False
        self._reaper: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._wake_at: float = math.inf

    # -- time ------------------------------------------------------------------------------

    def _now(self) -> int:
        now = self._clock()
        return now if now.__class__ is int else math.floor(now)  # type: ignore[return-value]

    @property
    def timing_wheel(self) -> TimingWheel:
        """The finest wheel (tests inspect its overflow wheels)."""
        return self._timing_wheel

    @property
    def delay_queue(self) -> DelayQueue:
        return self._queue

    @property
    def size(self) -> int:
        """Pending tasks: entries linked into some bucket (cancelled ones are unlinked)."""
        return self._task_counter.value

    # -- adding ----------------------------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        # Round the start and the delay up, and the clock down when expiring (advance_to): a
        # timeout never fires before `delay_ms` has really passed, at most ~1 ms after.
        now = self._clock()
        if now.__class__ is not int:
            now = math.ceil(now)
        delay = task.delay_ms
        if delay.__class__ is not int:
            delay = math.ceil(delay)
        entry = TimerTaskEntry(task, now + delay)  # type: ignore[operator]
        if delay <= 0:
            self._run_expired(entry)
            return
        wheel = self._timing_wheel
        if now >= wheel.current_time_ms + wheel.tick_ms and not self._advancing:
            # Catch the wheel up to now when nothing is due yet (see the module docstring).
            head = self._queue.peek_expiration()
            if head is None or head > now:
                wheel.advance_clock(now)
        if not wheel.add(entry) and not entry.cancelled():  # _add_timer_task_entry, inlined
            self._run_expired(entry)

    def _add_timer_task_entry(self, entry: TimerTaskEntry) -> None:
        if not self._timing_wheel.add(entry) and not entry.cancelled():
            self._run_expired(entry)

    def _run_expired(self, entry: TimerTaskEntry) -> None:
        # The entry is in no bucket any more; detach it so the task holds no stale entry and a
        # cancel() from inside run() is a no-op.
        task = entry.timer_task
        assert task is not None
        task._timer_task_entry = None
        try:
            task.run()
        except Exception as exc:
            log.error("timer task failed", timer=self.name, task=repr(task), exc_info=exc)

    # -- expiring --------------------------------------------------------------------------

    def advance_to(self, now_ms: int) -> bool:
        """Pop every bucket that has expired by `now_ms` and run the due tasks; True iff a
        bucket expired. Synchronous: the reaper's body, and the unit tests' clock step.

        While a bucket of wheel W is flushed, W's clock equals that bucket's expiration, so
        every re-added or newly added entry maps to another slot of W: flushing never feeds
        itself. The catch-up to `now_ms` happens only after draining, for that reason.
        """
        if self._advancing:
            return False  # a task called us from inside a flush; the outer pass continues
        self._advancing = True
        expired = False
        try:
            wheel = self._timing_wheel
            queue = self._queue
            while (bucket := queue.poll(now_ms)) is not None:
                expired = True
                wheel.advance_clock(bucket.expiration)
                bucket.flush(self._add_timer_task_entry)
            wheel.advance_clock(now_ms)
        finally:
            self._advancing = False
        return expired

    async def advance_clock(self, timeout_ms: float | None) -> bool:
        """Kafka's `advanceClock(timeoutMs)` on asyncio: expire due buckets, or wait up to
        `timeout_ms` (None: indefinitely) for the earliest bucket to come due. True iff some
        bucket expired."""
        loop = asyncio.get_running_loop()
        deadline = math.inf if timeout_ms is None else self._now() + timeout_ms
        while True:
            now = self._now()
            if self.advance_to(now):
                return True
            if now >= deadline:
                return False
            head = self._queue.peek_expiration()
            wake_at = min(deadline, math.inf if head is None else head)
            await self._sleep_until(loop, now, wake_at)

    async def _sleep_until(self, loop: asyncio.AbstractEventLoop, now: int, wake_at: float) -> None:
        if self._waiter is not None:
            raise RuntimeError(f"timer {self.name!r} is already being driven")
        waiter: asyncio.Future[None] = loop.create_future()
        handle = None
        if wake_at != math.inf:
            handle = loop.call_later(max(0.0, (wake_at - now) / 1000.0), _wake, waiter)
        self._waiter = waiter
        self._wake_at = wake_at
        try:
            await waiter
        finally:
            if handle is not None:
                handle.cancel()
            self._waiter = None
            self._wake_at = math.inf

    def _on_new_earliest(self, expiration_ms: int) -> None:
        # A bucket due sooner than the reaper's alarm was queued: wake it to re-arm.
        waiter = self._waiter
        if waiter is not None and expiration_ms < self._wake_at:
            _wake(waiter)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._reaper is not None and not self._reaper.done()

    def start(self) -> None:
        """Start the reaper task on the running loop (idempotent)."""
        if self.running:
            return
        loop = asyncio.get_running_loop()
        self._reaper = loop.create_task(self._reap(), name=f"timer-reaper-{self.name}")
        self._reaper.add_done_callback(self._reaper_done)

    def _reaper_done(self, reaper: asyncio.Task[None]) -> None:
        if not reaper.cancelled() and reaper.exception() is not None:
            log.error("timer reaper died", timer=self.name, exc_info=reaper.exception())

    async def _reap(self) -> None:
        while True:
            await self.advance_clock(None)

    async def shutdown(self) -> None:
        """Stop the reaper; pending tasks are dropped (as Kafka's timer close)."""
        reaper, self._reaper = self._reaper, None
        if reaper is None:
            return
        reaper.cancel()
        await asyncio.wait({reaper})
