"""Delayed operations and the purgatory that parks them (Kafka's `DelayedOperation` and
`DelayedOperationPurgatory`), on the event loop.

Why a purgatory: a request that cannot be answered yet (produce with acks=all waiting for the
ISR, fetch waiting for min_bytes, join waiting for the group, a member's session deadline)
must neither block the connection nor poll. It becomes a `DelayedOperation` that is *watched*
under the keys whose changes might complete it (e.g. ("produce", topic, partition)) and *timed*
in a `SystemTimer`. Whoever changes the state behind a key calls `check_and_complete(key)`;
the timer expires whatever is left. Either way `on_complete` runs exactly once.

Threading: none. Every method here runs on the event loop thread (STYLE #9: state has one
owner), so Kafka's per-operation locks, sharded watcher maps and atomics are gone; "exactly
once" is a plain flag checked and set with no await in between. The one thing that remains of
Kafka's concurrency story is re-entrancy: `on_complete` may call back into a purgatory
(complete another operation, watch a new one under the same key), so watcher lists are
iterated over a snapshot and purges are deferred until the outermost purgatory call returns.

Completed operations linger in the watcher lists of their other keys until a purge sweeps
them. As in Kafka, a purge runs once `purge_interval` watched operations have completed since
the last one; unlike Kafka (which counts on its reaper thread and `estimated - delayed`) each
operation tells its purgatory when it completes, so the count is exact, does not depend on the
timer being unshared, and a purge also happens when completions come from the timer alone.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

import structlog

from broker.timer import SystemTimer, TimerTask

log = structlog.get_logger("odradek.purgatory")
# the same logger's stdlib side, for a cheap level check (structlog builds an event to drop it)
_stdlib_log = logging.getLogger("odradek.purgatory")

R = TypeVar("R")


class DelayedOperation(TimerTask):
    """An operation that completes when `try_complete()` says so, or after `delay_ms`.

    Subclasses implement `try_complete()` (check, and if done call `force_complete()` and
    return its result) and `on_complete()` (answer the request: called exactly once, whether
    completed by a watched key, by expiry or by a direct `force_complete()`), and may implement
    `on_expiration()` (bookkeeping after a timeout; it runs after `on_complete()`, as in Kafka,
    and `is_expired` is already True inside `on_complete()`).

    Not thread-safe and needs no lock: used on the event loop only.
    """

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self._expired = False
        self._completion_listener: Callable[[], None] | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def is_expired(self) -> bool:
        """True iff the operation completed (or is completing) because its delay ran out."""
        return self._expired

    def force_complete(self) -> bool:
        """Complete now unless already completed: cancel the timeout, run `on_complete()`.

        True iff this call completed the operation; every later call returns False. The flag
        is set before `on_complete()` so a re-entrant call from inside it is a no-op.
        """
        if self._completed:
            return False
        self._completed = True
        self.cancel()
        listener, self._completion_listener = self._completion_listener, None
        if listener is not None:
            listener()
        self.on_complete()
        return True

    @abstractmethod
    def try_complete(self) -> bool:
        """If the operation can complete now, call `force_complete()` and return its result;
        otherwise return False."""

    def try_complete_for(self, key: Hashable) -> bool:
        """`try_complete()` after the state behind watch key `key` changed (check_and_complete):
        an operation that can tell what changed from the key (a DelayedFetch re-reads that one
        partition) overrides it."""
        return self.try_complete()

    @abstractmethod
    def on_complete(self) -> None:
        """Answer the request. Called exactly once."""

    def on_expiration(self) -> None:
        """Called after `on_complete()` when the operation timed out (metrics, cleanup)."""

    def safe_try_complete(self) -> bool:
        """`try_complete()` unless already completed. Kafka takes the operation's lock here;
        on the event loop the completed check alone makes it safe."""
        if self._completed:
            return False
        return self.try_complete()

    def run(self) -> None:
        """The timer fired: complete as expired, then `on_expiration()`."""
        if self._completed:
            return
        self._expired = True
        if self.force_complete():
            self.on_expiration()


class InlineFuture(asyncio.Future[R]):
    """The future of a DelayedFuture, which its waiter may ask to be resumed *inline*.

    A connection goes on with a Produce or Fetch it started in its read callback without a
    task (broker.network's _Driven): it sets `resume` on the InlineFuture the handling waits
    for, and the operation's completion calls it right after resolving the future -- inside the
    purgatory call that completed it, as Kafka's DelayedProduce / DelayedFetch call their
    response callbacks inside tryCompleteElseWatch / checkAndComplete -- instead of a loop
    iteration later behind whatever else is ready then. So the follower's fetch response goes out
    within the leader's append, and the produce response within the follower fetch that moved
    the high watermark (issue #20 §5). A cancelled future does not call it."""

    resume: Callable[[], None] | None = None


class DelayedFuture(DelayedOperation, Generic[R]):
    """A DelayedOperation whose completion resolves `self.future`, for handlers to await.

        op = DelayedProduce(timeout_ms, ...)       # a DelayedFuture subclass
        if not purgatory.try_complete_else_watch(op, keys):
            ...                                     # parked; nothing else to do here
        response = await op.future

    On completion (by key or by expiry) the future gets `complete_value()`'s result, or its
    exception. If the awaiting side cancels the future (the connection went away), the
    operation is completed quietly so the timer and watchers drop it.

    Not to be confused with Kafka's DelayedFuture (which waits for a list of futures).
    """

    def __init__(self, delay_ms: int, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(delay_ms)
        self.future: InlineFuture[R] = InlineFuture(loop=loop or asyncio.get_running_loop())
        self.future.add_done_callback(self._on_future_done)

    @abstractmethod
    def complete_value(self) -> R:
        """The result to resolve the future with; `is_expired` says whether it timed out."""

    def on_complete(self) -> None:
        future = self.future
        if future.done():
            return
        try:
            value = self.complete_value()
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(value)
        resume = future.resume
        if resume is not None:
            future.resume = None
            try:
                resume()
            except Exception:  # the waiter's bug must not break whoever completed the operation
                log.exception("resuming the waiter of a completed operation failed", operation=type(self).__name__)

    def _on_future_done(self, future: asyncio.Future[R]) -> None:
        if future.cancelled() and not self._completed:
            self.force_complete()


T = TypeVar("T", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[T]):
    """Watches delayed operations by key and times them out; see the module docstring.

    Keys are any hashable values, e.g. ("produce", topic, partition) or ("join", group_id).
    The purgatory owns its timer (one per purgatory, as in Kafka; a fresh `SystemTimer(name)`
    when none is given): `start()` starts its reaper on the running loop and `shutdown()`
    stops it.
    """

    def __init__(
        self,
        name: str,
        timer: SystemTimer | None = None,
        purge_interval: int = 1000,
    ) -> None:
        self.name = name
        self.timer = timer if timer is not None else SystemTimer(name)
        self.purge_interval = purge_interval
        self._watchers: dict[Hashable, list[T]] = {}
        self._watched = 0  # entries in all watcher lists, completed ones included
        self._completed_since_purge = 0  # watched operations completed since the last purge
        self._depth = 0  # nesting of purgatory calls on the stack; purges wait for 0

    # -- parking and completing ------------------------------------------------------------

    def try_complete_else_watch(self, operation: T, watch_keys: Iterable[Hashable]) -> bool:
        """Complete `operation` now if it can be, else watch it under every key and time it.

        True iff the operation was completed by this call. Kafka's order: try once (the cheap
        common case); otherwise watch all keys, try again, and only then start the timeout.
        In Kafka the second try catches a state change made by another thread between the
        first try and the watch; on the event loop nothing can run in between (there is no
        await), so it is kept for fidelity with Kafka's subclasses at the cost of one extra
        check. If the operation completes while its keys are being watched it is not added
        to the remaining keys; stale watcher entries are purged later.
        """
        keys = list(watch_keys)
        if not keys:
            raise ValueError("the watch key list can't be empty")
        self._depth += 1
        try:
            if operation.try_complete():
                return True
            watching = False
            for key in keys:
                if operation.is_completed:
                    return False
                if not watching:
                    watching = True
                    if operation._completion_listener not in (None, self._on_watched_completed):
                        raise ValueError(f"{operation!r} is already watched by another purgatory")
                    operation._completion_listener = self._on_watched_completed
                self._watchers.setdefault(key, []).append(operation)
                self._watched += 1
            if operation.try_complete():
                return True
            if not operation.is_completed:
                self.timer.add(operation)
                if operation.is_completed:
                    operation.cancel()  # completed from inside add (delay <= 0)
            return False
        finally:
            self._leave()

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched under `key`; the number this call completed.

        Call it after changing the state behind `key` (an append, a high-watermark move, a
        member joining). Completed operations leave this key's list at once.
        """
        ops = self._watchers.get(key)
        if ops is None:
            return 0
        self._depth += 1
        try:
            completed = 0
            # Snapshot: on_complete may re-enter and watch new operations under this key.
            for op in tuple(ops):
                if not op.is_completed and op.try_complete_for(key):
                    completed += 1
            current = self._watchers.get(key)
            if current is not None:
                self._drop_completed(key, current)
            if completed and _stdlib_log.isEnabledFor(logging.DEBUG):
                log.debug("key unblocked operations", purgatory=self.name, key=key, count=completed)
            return completed
        finally:
            self._leave()

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching `key` and cancel the timeouts of its operations, without completing
        them (e.g. the partition moved away); returns them so the caller can answer them."""
        ops = self._watchers.pop(key, None)
        if ops is None:
            return []
        self._watched -= len(ops)
        for op in ops:
            op.cancel()
        return ops

    # -- counts ----------------------------------------------------------------------------

    @property
    def watched(self) -> int:
        """Entries in all watch lists (Kafka's PurgatorySize): an operation counts once per
        key, and completed operations count until purged."""
        return self._watched

    @property
    def delayed(self) -> int:
        """Operations waiting in the timer (Kafka's NumDelayedOperations)."""
        return self.timer.size

    def watched_keys(self) -> list[Hashable]:
        return list(self._watchers)

    def watched_for_key(self, key: Hashable) -> int:
        ops = self._watchers.get(key)
        return 0 if ops is None else len(ops)

    # -- purging ---------------------------------------------------------------------------

    def _on_watched_completed(self) -> None:
        self._completed_since_purge += 1
        if self._depth == 0:
            self._maybe_purge()

    def _leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._maybe_purge()

    def _maybe_purge(self) -> None:
        if self._completed_since_purge > self.purge_interval:
            self.purge_completed()

    def purge_completed(self) -> int:
        """Drop completed operations from every watch list; the number of entries dropped."""
        self._completed_since_purge = 0
        purged = 0
        for key, ops in list(self._watchers.items()):
            purged += self._drop_completed(key, ops)
        if purged:
            log.debug("purged watch lists", purgatory=self.name, purged=purged)
        return purged

    def _drop_completed(self, key: Hashable, ops: list[T]) -> int:
        live = [op for op in ops if not op.is_completed]
        dropped = len(ops) - len(live)
        if dropped:
            ops[:] = live
            self._watched -= dropped
        if not ops and self._watchers.get(key) is ops:
            del self._watchers[key]
        return dropped

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the timer's reaper on the running loop (idempotent)."""
        self.timer.start()

    async def shutdown(self) -> None:
        """Stop expiring operations (Kafka closes the purgatory's timer too). Operations still
        pending are neither completed nor expired: shut purgatories down after draining."""
        await self.timer.shutdown()
