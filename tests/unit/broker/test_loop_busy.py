"""LoopBusy measures the loop thread's CPU over wall time: a loop that spins for an interval
reads busy (its share of a CPU, which the machine's load lowers), one that sleeps reads idle."""

from __future__ import annotations

import asyncio
import time

from broker.metrics.loop_busy import LoopBusy


async def test_busy_loop_reads_busy_and_sleeping_loop_idle() -> None:
    busy = LoopBusy()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # CPU on the loop thread
        pass
    await busy.sample()
    spinning = busy.ratio
    assert spinning > 0.25  # the CPU share this thread got (less than 1 on a loaded machine)
    await asyncio.sleep(0.3)
    await busy.sample()
    assert busy.ratio < min(0.1, spinning / 2)
