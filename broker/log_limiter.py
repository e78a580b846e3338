"""Limits for log lines that clients can trigger at will: a rate limit (RateLimitedLog) and a
line per change of a per-key value (RecentValues).

Why: every malformed frame, oversized request or stalled request closes one connection and is
logged; a fuzzer or an attacker opening connections in a loop produced 104,197 warning lines in
60 s, drowning everything else and filling disks. At most `max_lines` such lines are written per
`interval_s`; the rest are counted, and one summary line (`suppressed=K`) follows when the interval
ends, so an operator still sees that it goes on and how much.

Who may call: the event loop (the summary is scheduled with `loop.call_later` when a loop runs).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["RateLimitedLog", "RecentValues"]


class RateLimitedLog:
    """Write at most `max_lines` warnings per `interval_s` through `logger`; summarise the rest."""

    def __init__(
        self,
        logger: Any,
        max_lines: int = 10,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        about: str = "client input",
    ) -> None:
        self.logger = logger
        self.about = about
        self.max_lines = max_lines
        self.interval_s = interval_s
        self.clock = clock
        self.window_start = -float("inf")
        self.lines = 0
        self.suppressed = 0
        self._summary_scheduled = False

    def warning(self, event: str, **details: Any) -> bool:
        """Log `event` at warning level unless this interval's quota is spent; True when written."""
        return self.log("warning", event, **details)

    def error(self, event: str, **details: Any) -> bool:
        """As warning(), at error level (e.g. with exc_info)."""
        return self.log("error", event, **details)

    def log(self, level: str, event: str, **details: Any) -> bool:
        now = self.clock()
        if now - self.window_start >= self.interval_s:
            self.flush()
            self.window_start = now
            self.lines = 0
        if self.lines < self.max_lines:
            self.lines += 1
            getattr(self.logger, level)(event, **details)
            return True
        self.suppressed += 1
        self._schedule_summary(now)
        return False

    def flush(self) -> None:
        """Write the summary of what this interval suppressed, if anything."""
        self._summary_scheduled = False
        if self.suppressed:
            self.logger.warning(
                f"suppressed warnings about {self.about}",
                suppressed=self.suppressed,
                interval_s=self.interval_s,
            )
            self.suppressed = 0

    def _schedule_summary(self, now: float) -> None:
        if self._summary_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (unit tests): the next warning() after the interval flushes
        self._summary_scheduled = True
        loop.call_later(max(0.0, self.window_start + self.interval_s - now), self.flush)


class RecentValues:
    """The last value seen per key, for a log line when it changes (which replica serves a
    consumer's partition, say) instead of one per request. At most `max_keys` keys are kept, the
    least recently seen forgotten: a client cycling through new ids costs a line each, never
    memory."""

    def __init__(self, max_keys: int = 4096) -> None:
        self.max_keys = max_keys
        self._last: OrderedDict[Hashable, Any] = OrderedDict()

    def swap(self, key: Hashable, value: Any) -> Any:
        """Record `value` for `key`; the value recorded before (None when unseen or forgotten)."""
        last = self._last
        previous = last.pop(key, None)
        last[key] = value
        if len(last) > self.max_keys:
            last.popitem(last=False)
        return previous
