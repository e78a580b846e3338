"""Coordinator steps that run to their end whatever became of the request that started them.

A request's handler is cancelled when its client's connection closes (broker/network.py). A
coordinator step that changed state before an await (claimed a pending transit, recorded
pending offsets, waited for the group's assignment write) must finish what it started after
that await: adopt or drop the pending state, update the cache the written record stands for,
hand the assignment to the other members. Kafka's append callbacks run whatever became of the
client; here the step runs in a task of its own that the request's cancellation does not
reach. Cancelled in the middle instead, an EndTxn left its transactional id PrepareCommit-pending
for good (a hanging transaction, found by the Jepsen transactional workload), and an
OffsetCommit left its offsets pending with the record written but the cache never updated."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


async def run_to_the_end(step: Coroutine[Any, Any, T], what: str) -> T:
    """Run `step` in a task the caller's cancellation cannot cancel. The caller still gets the
    answer when it waits; when it is cancelled, the step finishes alone and a failure is logged
    (naming `what`), since nobody is left to see it."""
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(lambda t: _log_failure(t, what))
        raise


def runs_to_the_end(what: str) -> Callable[[Callable[P, Coroutine[Any, Any, T]]],
                                             Callable[P, Coroutine[Any, Any, T]]]:
    """A coordinator handler whose every call runs to its end (`run_to_the_end`), for handlers
    whose whole body is the step."""
    def decorate(handler: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(handler)
        async def step(*args: P.args, **kwargs: P.kwargs) -> T:
            return await run_to_the_end(handler(*args, **kwargs), what)
        return step
    return decorate


def _log_failure(task: asyncio.Future[Any], what: str) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error(f"A {what} step failed after its request was gone", exc_info=task.exception())
