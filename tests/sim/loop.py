"""A deterministic asyncio event loop on a virtual clock, for the replication simulation.

Why: the races issue #20 names live at `await` points (a fetcher awaiting a truncation while a
LeaderAndIsr arrives, an executor holding a log while the loop appends). Running the brokers'
real asyncio code on this loop makes every interleaving a function of the seed:

* time is virtual: the selector never blocks, it advances the clock to the next timer, so a
  30 s scenario runs in milliseconds and `asyncio.sleep` / `wait_for` / timers keep their order;
* `run_in_executor` runs the function on the loop thread after a seeded delay (the work happens
  at once when it completes: between submission and completion the loop goes on, as it would
  while a thread does the work), so executor work interleaves with the loop deterministically;
* `time.time`, `time.time_ns` and `time.monotonic` read the virtual clock while the loop runs
  (the broker's code stamps appends, fetch states and ISR checks with them).

There is no I/O: the simulated network (tests/sim/network.py) moves requests with timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import selectors
import time
from collections.abc import Callable, Iterator
from typing import Any

# the virtual clock's wall-clock origin: the broker stamps records with time.time()
WALL_ORIGIN_S = 1_800_000_000.0


class SimulationStuck(RuntimeError):
    """Nothing is ready and no timer is set: the scenario can never progress."""


class _VirtualSelector(selectors.BaseSelector):
    """Registrations are kept (the loop registers its self-pipe) but never ready; `select`
    advances the loop's clock by the timeout instead of waiting."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        self._loop = loop
        self._keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, fileobj if isinstance(fileobj, int) else fileobj.fileno(), events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        self._keys.pop(fileobj, None)
        return self.register(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise SimulationStuck("no callback ready and no timer set")
        self._loop.advance(timeout)
        return []

    def get_map(self) -> Any:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class SimLock:
    """A lock of the code under test (a Log's), watched: executor work that takes it holds it
    until that work completes, and the event loop taking it meanwhile is reported -- in a real
    broker the loop would block on disk work there (issue #20: the loop-blocking audit cannot
    see lock waits)."""

    def __init__(self, inner: Any, name: str, loop: VirtualClockLoop) -> None:
        self.inner = inner
        self.name = name
        self.loop = loop
        self.held_until = -1.0
        self.held_by = ""

    def _check(self) -> None:
        loop = self.loop
        if loop.running_job is not None:
            loop.job_locks.append(self)
        elif self.held_until > loop.time() + 1e-6 and loop.on_lock_wait is not None:  # (float time)
            loop.on_lock_wait(self)

    def __enter__(self) -> Any:
        self._check()
        return self.inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.inner.__exit__(*exc)

    def acquire(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        return self.inner.acquire(*args, **kwargs)

    def release(self) -> None:
        self.inner.release()


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self, rng: random.Random, executor_delay_ms: Callable[[random.Random], float]) -> None:
        self._now = 0.0
        self.rng = rng
        self.executor_delay_ms = executor_delay_ms
        self.running_job: str | None = None  # the executor work running now (on this thread)
        self.job_locks: list[SimLock] = []  # the watched locks it took
        self.on_lock_wait: Callable[[SimLock], None] | None = None
        self.job_alive: Callable[[], Callable[[], bool]] = lambda: (lambda: True)
        super().__init__(selector=_VirtualSelector(self))
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """The work runs either at once or when it completes (a seeded choice: a thread may do
        it at any point in between); run at once, the watched locks it took stay held until it
        completes. Work of a node that crashed meanwhile never runs (its threads died)."""
        fut = self.create_future()
        delay = self.executor_delay_ms(self.rng) / 1000
        early = self.rng.random() < 0.5
        alive = self.job_alive()
        outcome: list[Any] = []

        def work() -> None:
            self.running_job, self.job_locks = getattr(func, "__qualname__", repr(func)), []
            try:
                outcome.append((True, func(*args)))
            except BaseException as e:
                outcome.append((False, e))
            finally:
                for lock in self.job_locks:
                    lock.held_until = max(lock.held_until, self.time() + (delay if early else 0.0))
                    lock.held_by = self.running_job or ""
                self.running_job, self.job_locks = None, []

        def complete() -> None:
            if fut.cancelled():
                return
            if not alive():  # the node died: its thread with it (whoever waits stops waiting)
                fut.cancel()
                return
            if not outcome:
                work()
            ok, value = outcome[0]
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

        if early:
            self.call_soon(lambda: alive() and not fut.cancelled() and work())
        self.call_later(delay, complete)
        return fut


@contextlib.contextmanager
def virtual_time(loop: VirtualClockLoop) -> Iterator[None]:
    """time.time / time.time_ns / time.monotonic read `loop`'s clock inside the block."""
    saved = time.time, time.time_ns, time.monotonic
    time.time = lambda: WALL_ORIGIN_S + loop.time()  # type: ignore[assignment]
    time.time_ns = lambda: int((WALL_ORIGIN_S + loop.time()) * 1e9)  # type: ignore[assignment]
    time.monotonic = loop.time  # type: ignore[assignment]
    try:
        yield
    finally:
        time.time, time.time_ns, time.monotonic = saved  # type: ignore[assignment]
