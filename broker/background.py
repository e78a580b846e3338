"""The broker's background tasks (Kafka's KafkaScheduler and its daemon threads): periodic
storage work, the ISR checks, coordinator writes, AlterPartition sends.

Why a class of its own: a task started with asyncio.ensure_future and never awaited loses its
exception ("Task exception was never retrieved" at garbage collection, if ever). Every task here
is logged once, with its traceback, when it fails; shutdown cancels them all and waits for them.
A task that owns state catches what it expects and leaves that state known itself; this is the
net under it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

log = structlog.get_logger("odradek.background")


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` until it ends or :meth:`cancel_all`; a failure is logged once."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            coro = task.get_coro()
            log.error("background task failed", task=getattr(coro, "__qualname__", task.get_name()), exc_info=exc)

    async def every(self, interval_ms: int, fn: Callable[[], Any], what: str) -> None:
        """Run blocking storage work ``fn`` every ``interval_ms`` in an executor (Kafka's
        KafkaScheduler) -- or, a coroutine function, awaited on the loop (it sends its blocking
        parts to an executor itself). An OSError (a full or failing disk) is one line, the next
        run retries; anything else is logged with its traceback and the task goes on."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await _run_logged(fn, what)

    async def rescheduled(self, fn: Callable[[], int], what: str, fallback_ms: Callable[[], int]) -> None:
        """Run blocking storage work ``fn`` in an executor again and again, each time after the
        milliseconds its previous run returned (Kafka's task that schedules its own next run, as
        kafka-delete-logs). A failure is logged as in :meth:`every` and the next run comes
        ``fallback_ms()`` later."""
        while True:
            delay_ms = await _run_logged(fn, what)
            if delay_ms is _FAILED:
                delay_ms = fallback_ms()
            await asyncio.sleep(max(delay_ms, 1) / 1000)

    async def cancel_all(self) -> None:
        """Cancel every task and wait until each has ended."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


_FAILED: Any = object()  # what _run_logged returns when the run failed


async def _run_logged(fn: Callable[[], Any], what: str) -> Any:
    """One run of a periodic task: a coroutine function awaited on the loop, anything else in an
    executor; its result, or _FAILED after logging the failure -- an OSError (a full or failing
    disk) as one line, anything else with its traceback."""
    try:
        if asyncio.iscoroutinefunction(fn):
            return await fn()
        return await asyncio.get_running_loop().run_in_executor(None, fn)
    except OSError as e:
        log.error("periodic task failed", task=what, error=str(e))
    except Exception:
        log.exception("periodic task failed", task=what)
    return _FAILED
