"""DelayedFetch: a fetch waiting for min_bytes, parked in the fetch purgatory.

Why a re-read instead of Kafka's byte arithmetic on log positions: a read here only looks up
index positions and returns file slices (no record bytes are touched until the response is
built), so re-reading the watched partitions when an append wakes us is cheap and exact, and the
completing read is the one that answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.purgatory import DelayedFuture


class DelayedFetch(DelayedFuture[Any]):
    def __init__(self, delay_ms: int, reader: Callable[[], Any], enough: Callable[[Any], bool]) -> None:
        super().__init__(delay_ms)
        self.reader = reader
        self.enough = enough
        self.results: Any = None

    def try_complete(self) -> bool:
        results = self.reader()
        if self.enough(results):
            self.results = results
            return self.force_complete()
        return False

    def complete_value(self) -> Any:
        if self.results is None:  # expired: answer with whatever is there now
            self.results = self.reader()
        return self.results
