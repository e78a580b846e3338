"""The memory pool for partly received requests (Kafka's `queued.max.request.bytes`).

Why: a connection that declares a frame of `socket.request.max.bytes` and then sends it slowly
makes the broker hold a buffer growing toward that size; a handful of such connections costs
hundreds of megabytes. As Kafka's SocketServer does with its MemoryPool, a connection reserves the
declared size of a request it has not fully received; when the pool cannot give it, the connection
is muted (not read) until earlier reservations are released, so the bytes buffered across all
connections stay near the pool's capacity whatever clients declare.

Kafka's pool lets the first reservation exceed the capacity (a single request of
`socket.request.max.bytes` must always be receivable); ours does the same when nothing is reserved,
and otherwise grants only what fits. A capacity <= 0 means unbounded (Kafka's -1).

Who may call: the event loop only (no locking).
"""

from __future__ import annotations

import collections
from collections.abc import Callable

__all__ = ["MemoryPool"]


class MemoryPool:
    """Bytes reserved by partly received requests, and the connections waiting for room."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.reserved = 0
        self._waiters: collections.OrderedDict[int, Callable[[], bool]] = collections.OrderedDict()

    @property
    def bounded(self) -> bool:
        return self.capacity > 0

    def try_allocate(self, size: int) -> bool:
        """Reserve `size` bytes if they fit (or nothing else is reserved)."""
        if not self.bounded or self.reserved == 0 or self.reserved + size <= self.capacity:
            self.reserved += size
            return True
        return False

    def release(self, size: int) -> None:
        """Give back a reservation and let waiting connections retry, oldest first."""
        self.reserved = max(0, self.reserved - size)
        while self._waiters:
            key, retry = next(iter(self._waiters.items()))
            if not retry():
                return  # it still does not fit: later waiters wait behind it (no starvation)
            self._waiters.pop(key, None)

    def wait(self, key: int, retry: Callable[[], bool]) -> None:
        """Call `retry()` when memory is released; it returns True once it got its reservation."""
        self._waiters[key] = retry

    def forget(self, key: int) -> None:
        """A waiting connection went away."""
        self._waiters.pop(key, None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)
