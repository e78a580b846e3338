"""BackgroundTasks: a failed task is logged once with its traceback (issue #20: `_spawn`'s tasks
never had their exceptions retrieved), a periodic task goes on after a failure, shutdown cancels
and waits for every task."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from broker.background import BackgroundTasks


async def test_a_failed_task_is_logged_once_with_its_exception() -> None:
    tasks = BackgroundTasks()

    async def store_group() -> None:
        raise RuntimeError("boom")

    with capture_logs() as logs:
        task = tasks.spawn(store_group())
        await asyncio.wait([task])
        await asyncio.sleep(0)  # done callbacks run on the loop's next turn
    failed = [e for e in logs if e["event"] == "background task failed"]
    assert len(failed) == 1 and failed[0]["task"].endswith("store_group")
    assert isinstance(failed[0]["exc_info"], RuntimeError) and len(tasks) == 0


async def test_a_periodic_task_goes_on_after_a_failure() -> None:
    tasks = BackgroundTasks()
    calls: list[int] = []
    third = asyncio.get_running_loop().create_future()

    def flush() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        if len(calls) == 2:
            raise ValueError("a bug")
        if not third.done():
            third.get_loop().call_soon_threadsafe(lambda: third.done() or third.set_result(None))

    with capture_logs() as logs:
        tasks.spawn(tasks.every(1, flush, "flush"))
        await asyncio.wait_for(third, 10)
        await tasks.cancel_all()
    failures = [e for e in logs if e["event"] == "periodic task failed"]
    assert failures[0] == {"event": "periodic task failed", "task": "flush", "log_level": "error",
                           "error": "[Errno 28] No space left on device"}  # one line: no traceback
    assert failures[1]["log_level"] == "error" and failures[1].get("exc_info") is True
    assert len(tasks) == 0 and not [e for e in logs if e["event"] == "background task failed"]


async def test_cancel_all_waits_for_every_task() -> None:
    tasks = BackgroundTasks()
    ended: list[str] = []

    async def loop_forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ended.append(name)

    tasks.spawn(loop_forever("a"))
    tasks.spawn(loop_forever("b"))
    await asyncio.sleep(0)
    await tasks.cancel_all()
    assert sorted(ended) == ["a", "b"] and len(tasks) == 0
