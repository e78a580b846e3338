"""The event loop's busy ratio: our RequestHandlerAvgIdlePercent. Kafka's request handler
threads are idle while they wait for work; our one handler is the event loop, idle while it
waits in the selector. The loop thread's CPU time (time.thread_time(), read on the loop) over
wall-clock time, sampled once a second, is how busy it was; a loop that blocks in a syscall
(which it must not: broker/loop_audit.py) would count as idle here."""

from __future__ import annotations

import time


class LoopBusy:
    """Sampled by a background task on the loop every `interval_ms` (BackgroundTasks.every)."""

    def __init__(self) -> None:
        self._cpu = time.thread_time()
        self._wall = time.monotonic()
        self.ratio = 0.0  # busy fraction over the last interval
        self.busy_seconds = 0.0  # loop thread CPU seconds since the sampling started

    async def sample(self) -> None:
        """A coroutine function so BackgroundTasks.every runs it on the loop (a plain function
        would run in an executor thread and measure that thread)."""
        cpu, wall = time.thread_time(), time.monotonic()
        if wall > self._wall:
            self.ratio = min(1.0, (cpu - self._cpu) / (wall - self._wall))
        self.busy_seconds += cpu - self._cpu
        self._cpu, self._wall = cpu, wall
