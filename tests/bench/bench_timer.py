"""Timer insert/cancel rates: our hierarchical TimingWheel (through SystemTimer, the API the
purgatories use) against the usual Python timer, a heapq of (deadline, seq, task) with a
lazy-cancel flag.

Workloads, 1 M timeouts each, delays uniform in 1..30,000 ms (request timeouts), clock frozen
so only the data structures are measured:

* insert: 1 M adds;
* cancel: cancel all of them, in random order (requests completing before their timeout);
* drain: move the clock past every deadline (the heap pops 1 M tombstones, the wheel pops
  only its few dozen empty buckets);
* steady: 1 M requests with 10,000 in flight: each adds a timeout and cancels the oldest one,
  the clock advancing 1 ms per 100 requests (the purgatory's life: nearly everything is
  cancelled before it fires). The heap keeps every tombstone until its deadline.

    python -m tests.bench.bench_timer [--n 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import collections
import gc
import heapq
import math
import platform
import random
import sys
import time
from collections.abc import Callable

from broker.timer import CallbackTimerTask, SystemTimer


class FakeClock:
    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> float:
        return self.now


def _noop() -> None:
    pass


class HeapTask:
    __slots__ = ("callback", "cancelled", "delay_ms")

    def __init__(self, delay_ms: int, callback: Callable[[], None]) -> None:
        self.delay_ms = delay_ms
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class HeapTimer:
    """The baseline: O(log n) push, O(1) cancel by flag, tombstones popped at their deadline."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, HeapTask]] = []
        self._seq = 0

    def add(self, task: HeapTask) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (math.floor(self._clock()) + task.delay_ms, self._seq, task))

    def advance_to(self, now: int) -> bool:
        heap = self._heap
        fired = False
        while heap and heap[0][0] <= now:
            task = heapq.heappop(heap)[2]
            if not task.cancelled:
                task.callback()
                fired = True
        return fired

    def __len__(self) -> int:
        return len(self._heap)


def _timed(fn: Callable[[], None]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def run_batch(kind: str, delays: list[int], order: list[int]) -> dict[str, float]:
    clock = FakeClock()
    timer: SystemTimer | HeapTimer
    if kind == "wheel":
        timer = SystemTimer("bench", clock=clock)
        tasks: list = [CallbackTimerTask(d, _noop) for d in delays]
    else:
        timer = HeapTimer(clock)
        tasks = [HeapTask(d, _noop) for d in delays]
    add = timer.add

    def insert() -> None:
        for task in tasks:
            add(task)

    def cancel() -> None:
        for i in order:
            tasks[i].cancel()

    def drain() -> None:
        clock.now = 40_000
        timer.advance_to(40_000)

    return {"insert": _timed(insert), "cancel": _timed(cancel), "drain": _timed(drain)}


def run_steady(kind: str, delays: list[int], in_flight: int) -> tuple[float, int]:
    """Seconds for len(delays) add+cancel pairs, and the peak size of the time structure."""
    clock = FakeClock()
    if kind == "wheel":
        timer: SystemTimer | HeapTimer = SystemTimer("bench", clock=clock)
        make: Callable[[int], object] = lambda d: CallbackTimerTask(d, _noop)  # noqa: E731
        size = lambda: timer.size + len(timer.delay_queue)  # type: ignore[union-attr]  # noqa: E731
    else:
        timer = HeapTimer(clock)
        make = lambda d: HeapTask(d, _noop)  # noqa: E731
        size = lambda: len(timer)  # type: ignore[arg-type]  # noqa: E731
    tasks = [make(d) for d in delays]
    peak = 0

    def steady() -> None:
        nonlocal peak
        window: collections.deque = collections.deque()
        add = timer.add
        advance = timer.advance_to
        for i, task in enumerate(tasks):
            add(task)  # type: ignore[arg-type]
            window.append(task)
            if len(window) > in_flight:
                window.popleft().cancel()
            if i % 100 == 99:
                clock.now += 1
                advance(clock.now)
            if i % 100_000 == 0:
                peak = max(peak, size())
        peak = max(peak, size())

    return _timed(steady), peak


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=10_000)
    args = parser.parse_args(argv)

    rng = random.Random(42)
    delays = [rng.randint(1, 30_000) for _ in range(args.n)]
    order = list(range(args.n))
    rng.shuffle(order)

    best: dict[str, dict[str, float]] = {}
    peaks: dict[str, int] = {}
    for kind in ("wheel", "heap"):
        for _ in range(args.repeat):
            result = run_batch(kind, delays, order)
            steady, peak = run_steady(kind, delays, args.in_flight)
            result["steady"] = steady
            peaks[kind] = peak
            if kind not in best:
                best[kind] = result
            else:
                best[kind] = {k: min(best[kind][k], v) for k, v in result.items()}

    n = args.n
    print(
        f"Timer benchmark: n={n:,}, best of {args.repeat}, Python {platform.python_version()} "
        f"({sys.implementation.name}), {platform.machine()}\n"
    )
    print("| workload | TimingWheel ops/s | heapq + lazy cancel ops/s | wheel / heap |")
    print("|---|---:|---:|---:|")
    rows = [
        ("insert 1 timeout", n / best["wheel"]["insert"], n / best["heap"]["insert"]),
        ("cancel 1 timeout", n / best["wheel"]["cancel"], n / best["heap"]["cancel"]),
        (
            f"insert + cancel ({n:,} each)",
            2 * n / (best["wheel"]["insert"] + best["wheel"]["cancel"]),
            2 * n / (best["heap"]["insert"] + best["heap"]["cancel"]),
        ),
        (
            f"steady add+cancel pair ({args.in_flight:,} in flight)",
            n / best["wheel"]["steady"],
            n / best["heap"]["steady"],
        ),
    ]
    for label, w, h in rows:
        print(f"| {label} | {w:,.0f} | {h:,.0f} | {w / h:.2f}x |")
    print(
        f"\nDrain after cancelling all {n:,}: wheel {best['wheel']['drain'] * 1e3:.3f} ms, "
        f"heap {best['heap']['drain'] * 1e3:.1f} ms (pops every tombstone)."
    )
    print(
        f"Peak size of the time structure in the steady run: wheel {peaks['wheel']:,} "
        f"(linked entries + heap items), heap {peaks['heap']:,} (items, tombstones included)."
    )


if __name__ == "__main__":
    main()
