"""Bounded waits inside a test's event loop: a condition that never comes true fails the test
naming what it waited for, instead of spinning until CI's time limit or relying on how many
loop iterations a step takes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Yield to the loop until `cond()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)
