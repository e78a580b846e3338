"""LoopBusy measures the loop thread's CPU over wall time: a loop that spins for an interval
reads busy (its share of a CPU, which the machine's load lowers), one that sleeps reads idle."""

from __future__ import annotations

import asyncio
import time

from broker.metrics.loop_busy import LoopBusy


async def test_busy_loop_reads_busy_and_sleeping_loop_idle() -> None:
    busy = LoopBusy()
    cpu0, wall0 = time.thread_time(), time.monotonic()
    # spin until the loop thread has had 0.2 s of CPU (bounded in wall time): on a loaded machine
    # that takes longer, and the ratio is the share of a CPU the thread got, not 1
    while time.thread_time() - cpu0 < 0.2 and time.monotonic() - wall0 < 5:
        pass
    await busy.sample()
    share = (time.thread_time() - cpu0) / (time.monotonic() - wall0)
    spinning = busy.ratio
    assert spinning > 0.04  # at most 5 s for 0.2 s of CPU
    assert spinning >= 0.8 * share  # the thread's own CPU, not the process's or nothing
    await asyncio.sleep(0.3)
    await busy.sample()
    assert busy.ratio < min(0.1, spinning / 2)
