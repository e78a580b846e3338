"""HandlerTime counts the time a handler's coroutine runs, not the time it waits, and passes
results, exceptions and cancellations through (broker.quota.request_time)."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.quota.request_time import HandlerTime, exempt


async def handler(run_s: float, wait_s: float) -> str:
    end = time.perf_counter() + run_s
    while time.perf_counter() < end:  # the handler's own work
        pass
    await asyncio.sleep(wait_s)  # waiting (a purgatory, the executor): not counted
    return "done"


def test_running_time_is_counted_and_waiting_is_not() -> None:
    async def main() -> tuple[str, int]:
        timed = HandlerTime(handler(0.02, 0.2))
        return await timed, timed.ns
    result, ns = asyncio.run(main())
    assert result == "done"
    assert 0.02e9 <= ns < 0.15e9


def test_exceptions_and_cancellation_pass_through() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("x")

    async def main() -> None:
        with pytest.raises(ValueError):
            await HandlerTime(failing())
        task = asyncio.ensure_future(_wrap())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def _wrap() -> str:
        return await HandlerTime(handler(0, 10))
    asyncio.run(main())


def test_exempt_requests() -> None:
    class Fetch:
        replica_id = 2
    assert exempt(4, None) and exempt(1, Fetch()) and not exempt(3, None) and not exempt(0, None)
