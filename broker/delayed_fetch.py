"""DelayedFetch: a fetch waiting for min_bytes, parked in the fetch purgatory.

Why bytes are counted per partition: a fetch parks because its partitions together had less than
min_bytes; an append (or a high-watermark move) to one of them wakes it with that partition's
key, and only that partition can have changed. So the operation keeps each partition's available
bytes from the first read, re-reads only the woken partition (an index lookup returning a file
slice: no record bytes are touched), and keeps a running total -- a wake-up costs one partition,
not every partition of the fetch (a follower's fetch names every partition it follows from that
leader). When the total reaches min_bytes, an error shows, or max_wait passes, the fetch is read
once more in full, with the response's byte budget shared in order, and that read answers (Kafka's
DelayedFetch.tryComplete counts positions the same way and reads at onComplete) -- except when the
fetch has one partition and the wake-up's own read completes it: that read already is the full
read (a follower's fetch of its one partition, woken by the append it waits for, is on the
replication round's critical path; reading it twice cost the leader a second index lookup and
header scan per follower per round).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from broker.purgatory import DelayedFuture


class DelayedFetch(DelayedFuture[Any]):
    def __init__(self, delay_ms: int, min_bytes: int, first: dict[Any, Any],
                 read_one: Callable[[Any], Any], read_all: Callable[[], Any]) -> None:
        """`first`: the partitions' results of the read that parked the fetch (each with
        `records_size` and `error`); `read_one(key)`: one partition again, read as `read_all`
        reads it when it is the fetch's only partition; `read_all()`: the whole fetch, the
        answer."""
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.sizes = {key: r.records_size for key, r in first.items()}
        self.total = sum(self.sizes.values())
        self.failed = any(r.error for r in first.values())
        self.read_one = read_one
        self.read_all = read_all
        self._fresh: tuple[Any, Any] | None = None  # (key, read) completing a one-partition fetch

    def try_complete(self) -> bool:
        if self.failed or self.total >= self.min_bytes:
            return self.force_complete()
        return False

    def try_complete_for(self, key: Hashable) -> bool:
        old = self.sizes.get(key)
        if old is None:
            return self.try_complete()
        r = self.read_one(key)
        self.sizes[key] = r.records_size
        self.total += r.records_size - old
        self.failed = self.failed or bool(r.error)
        if len(self.sizes) == 1:
            self._fresh = (key, r)  # nothing runs between this read and the completion below
        try:
            return self.try_complete()
        finally:
            self._fresh = None

    def complete_value(self) -> Any:
        fresh = self._fresh
        if fresh is not None:
            return {fresh[0]: fresh[1]}
        return self.read_all()
