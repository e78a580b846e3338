"""Hierarchical timing wheels (Kafka's `TimingWheel`, `TimerTaskList`, `TimerTaskEntry`,
`TimerTask`), for request timeouts that are mostly cancelled before they fire.

Why a wheel and not a heap: a broker parks thousands of operations (produce waiting for acks,
fetch waiting for bytes, join/heartbeat deadlines) and nearly all of them complete early and
cancel their timeout. A heap costs O(log n) per insert and either O(n) per cancel or leaves a
tombstone behind until the deadline passes. Here a timeout is an entry in a bucket, a circular
doubly linked list with a sentinel root, so insert is O(m) for m wheel levels (m is about 5 for
a day) and cancel unlinks the entry in O(1) without any search.

Why buckets, not tasks, enter the queue: the time queue (`DelayQueue`, a heapq) only orders
*buckets*, keyed by the bucket's expiration. A wheel of 20 slots has at most 20 live buckets, so
100,000 timeouts cost at most about 20 heap pushes per level and the heap never holds a
cancelled task. A bucket is pushed only when its expiration changes (`set_expiration` returns
True, Kafka's getAndSet), i.e. when a slot is reused for a later round.

Levels: level 0 has `tick_ms` resolution and spans `tick_ms * wheel_size`; an overflow wheel with
tick = the lower wheel's interval is created on demand for anything further out (1 ms x 20 ->
20 ms, 400 ms, 8 s, 160 s, 53 min, ...). When an overflow bucket expires its entries are
re-added and fall into finer wheels, or run if due.

Timestamps are integer milliseconds; `SystemTimer` rounds delays up so nothing fires early.

Threading: none. Everything here is called on the event loop thread only (STYLE #9), so none of
Kafka's locks or atomics are needed; `TimingWheel.add` must not be called while a bucket of
the same wheel is being flushed except by `SystemTimer`, which guarantees the slot being
flushed is never a target (see `SystemTimer.advance_to`).
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator


class TimerTask(ABC):
    """Something to run once `delay_ms` from when it is added to a timer.

    A task knows its current `TimerTaskEntry`, so `cancel()` is O(1): it unlinks that entry
    from its bucket, no search. Adding the same task again replaces (and unlinks) the old entry.
    """

    __slots__ = ("_timer_task_entry", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._timer_task_entry: TimerTaskEntry | None = None

    @abstractmethod
    def run(self) -> None:
        """Called once, on the event loop, when the delay has passed."""

    def cancel(self) -> None:
        entry = self._timer_task_entry
        if entry is not None:
            bucket = entry.list
            if bucket is not None:
                bucket.remove(entry)
            self._timer_task_entry = None

    @property
    def timer_task_entry(self) -> TimerTaskEntry | None:
        return self._timer_task_entry

    def _set_timer_task_entry(self, entry: TimerTaskEntry) -> None:
        old = self._timer_task_entry
        if old is not None and old is not entry:
            old.remove()
        self._timer_task_entry = entry


class CallbackTimerTask(TimerTask):
    """A TimerTask that calls a plain function: for timeouts that need no subclass."""

    __slots__ = ("_callback",)

    def __init__(self, delay_ms: int, callback: Callable[[], object]) -> None:
        super().__init__(delay_ms)
        self._callback = callback

    def run(self) -> None:
        self._callback()


class TimerTaskEntry:
    """A task's place in a bucket. `list` is the bucket it is linked into, or None.

    The entry, not the task, is linked so that a task re-added to a timer gets a fresh entry
    and the stale one reads as `cancelled()` wherever it still is (Kafka's trick: a task
    points at exactly one live entry).
    """

    __slots__ = ("expiration_ms", "list", "next", "prev", "timer_task")

    def __init__(self, timer_task: TimerTask | None, expiration_ms: int) -> None:
        self.timer_task = timer_task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry | None = None
        self.prev: TimerTaskEntry | None = None
        if timer_task is not None:
            # Inlined TimerTask._set_timer_task_entry (hot path).
            old = timer_task._timer_task_entry
            if old is not None and old.list is not None:
                old.list.remove(old)
            timer_task._timer_task_entry = self

    def cancelled(self) -> bool:
        task = self.timer_task
        return task is None or task._timer_task_entry is not self

    def remove(self) -> None:
        bucket = self.list
        if bucket is not None:
            bucket.remove(self)


class TaskCounter:
    """The number of entries linked into any bucket of one timer: shared by all its buckets
    (Kafka's AtomicInteger; a plain int box here, single-threaded)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def __int__(self) -> int:
        return self.value


class TimerTaskList:
    """A bucket: a circular doubly linked list of entries with a sentinel root.

    The sentinel makes add and remove branch-free O(1) pointer swaps: root.next is the head,
    root.prev the tail, and an empty list is root pointing at itself. `expiration` is the
    start of the time slot this bucket currently stands for (-1 when unused); the queue holds
    the bucket under that value.
    """

    __slots__ = ("_root", "_size", "_task_counter", "expiration")

    def __init__(self, task_counter: TaskCounter) -> None:
        self._task_counter = task_counter
        self.expiration = -1
        root = TimerTaskEntry(None, -1)
        root.next = root
        root.prev = root
        self._root = root
        self._size = 0

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the slot time; True iff it changed, i.e. the bucket must be (re)queued.

        Kafka's getAndSet: every add within one round of the wheel passes the same value, so a
        bucket is queued once per round however many entries it receives.
        """
        changed = self.expiration != expiration_ms
        self.expiration = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        if entry.list is not None:
            entry.list.remove(entry)
        root = self._root
        tail = root.prev
        assert tail is not None
        entry.next = root
        entry.prev = tail
        entry.list = self
        tail.next = entry
        root.prev = entry
        self._size += 1
        self._task_counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        if entry.list is not self:
            return
        nxt = entry.next
        prv = entry.prev
        assert nxt is not None and prv is not None
        nxt.prev = prv
        prv.next = nxt
        entry.next = None
        entry.prev = None
        entry.list = None
        self._size -= 1
        self._task_counter.value -= 1

    def flush(self, fn: Callable[[TimerTaskEntry], object]) -> None:
        """Unlink every entry and hand it to `fn` (which re-adds it to the timer, where it
        either lands in a finer wheel or runs), then mark the bucket unused.

        The head is re-read after each call because `fn` may run a task that cancels other
        entries of this very bucket.
        """
        root = self._root
        head = root.next
        while head is not root:
            assert head is not None
            self.remove(head)
            fn(head)
            head = root.next
        self.expiration = -1

    def foreach(self, fn: Callable[[TimerTask], object]) -> None:
        for entry in self:
            if not entry.cancelled() and entry.timer_task is not None:
                fn(entry.timer_task)

    def __iter__(self) -> Iterator[TimerTaskEntry]:
        root = self._root
        entry = root.next
        while entry is not root:
            assert entry is not None
            nxt = entry.next
            yield entry
            entry = nxt

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration={self.expiration}, size={self._size})"


class DelayQueue:
    """The time queue of buckets: a heapq of (expiration, seq, bucket).

    Only buckets enter it, so its size is bounded by the number of buckets, not tasks. A heap
    item is valid while the bucket still carries the expiration it was pushed with; items
    left behind when a bucket is flushed (-1) or re-timed are skipped when they reach the top
    (lazy invalidation: no O(n) heap removal). `seq` breaks ties so buckets are never compared.

    `pushes` counts heap pushes (cheap, and lets tests show buckets-not-tasks). `listener`, if
    set, is called with the new earliest expiration whenever a push becomes the head: the
    SystemTimer uses it to wake its sleeping reaper early.
    """

    __slots__ = ("_heap", "_seq", "listener", "pushes")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = 0
        self.pushes = 0
        self.listener: Callable[[int], object] | None = None

    def offer(self, bucket: TimerTaskList) -> None:
        self._seq += 1
        self.pushes += 1
        item = (bucket.expiration, self._seq, bucket)
        heap = self._heap
        heapq.heappush(heap, item)
        if heap[0] is item and self.listener is not None:
            self.listener(item[0])

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and heap[0][2].expiration != heap[0][0]:
            heapq.heappop(heap)

    def peek_expiration(self) -> int | None:
        """The earliest live bucket expiration, or None when nothing is queued."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def poll(self, now_ms: int) -> TimerTaskList | None:
        """Pop the earliest bucket if it has expired by `now_ms` (Kafka's DelayQueue.poll())."""
        self._drop_stale()
        heap = self._heap
        if heap and heap[0][0] <= now_ms:
            return heapq.heappop(heap)[2]
        return None

    def __len__(self) -> int:
        """Heap items, stale ones included."""
        return len(self._heap)


class TimingWheel:
    """One level of the hierarchy; see the module docstring for why.

    `add` returns False when the entry is cancelled or already due (its expiration is before
    the end of the current tick); the caller (SystemTimer) then runs it. `advance_clock` only
    moves the wheel's notion of now, rounded down to the tick; expiring buckets is the
    queue's job.
    """

    __slots__ = (
        "_queue",
        "_task_counter",
        "buckets",
        "current_time_ms",
        "interval",
        "overflow_wheel",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        task_counter: TaskCounter,
        queue: DelayQueue,
    ) -> None:
        if tick_ms <= 0 or wheel_size <= 1:
            raise ValueError("tick_ms must be > 0 and wheel_size > 1")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self._task_counter = task_counter
        self._queue = queue
        self.buckets = [TimerTaskList(task_counter) for _ in range(wheel_size)]
        self.current_time_ms = start_ms - (start_ms % tick_ms)
        self.overflow_wheel: TimingWheel | None = None

    def _add_overflow_wheel(self) -> TimingWheel:
        wheel = self.overflow_wheel
        if wheel is None:
            wheel = TimingWheel(
                self.interval,
                self.wheel_size,
                self.current_time_ms,
                self._task_counter,
                self._queue,
            )
            self.overflow_wheel = wheel
        return wheel

    def add(self, entry: TimerTaskEntry) -> bool:
        expiration = entry.expiration_ms
        task = entry.timer_task
        if task is None or task._timer_task_entry is not entry:  # entry.cancelled(), inlined
            return False
        current = self.current_time_ms
        tick = self.tick_ms
        if expiration < current + tick:
            return False
        if expiration < current + self.interval:
            virtual_id = expiration // tick
            bucket = self.buckets[virtual_id % self.wheel_size]
            bucket.add(entry)
            # Queue the bucket only when it starts a new round; later adds in the same round
            # pass the same expiration and return False, so a bucket is queued once.
            # (bucket.set_expiration(), inlined.)
            bucket_expiration = virtual_id * tick
            if bucket.expiration != bucket_expiration:
                bucket.expiration = bucket_expiration
                self._queue.offer(bucket)
            return True
        wheel = self.overflow_wheel
        if wheel is None:
            wheel = self._add_overflow_wheel()
        return wheel.add(entry)

    def advance_clock(self, time_ms: int) -> None:
        if time_ms >= self.current_time_ms + self.tick_ms:
            self.current_time_ms = time_ms - (time_ms % self.tick_ms)
            if self.overflow_wheel is not None:
                self.overflow_wheel.advance_clock(self.current_time_ms)

    def levels(self) -> list[TimingWheel]:
        """This wheel and its overflow wheels, finest first."""
        out: list[TimingWheel] = []
        wheel: TimingWheel | None = self
        while wheel is not None:
            out.append(wheel)
            wheel = wheel.overflow_wheel
        return out
