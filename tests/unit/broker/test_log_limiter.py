"""RateLimitedLog: at most N lines per interval, then one summary (pure logic, fake clock)."""

from __future__ import annotations

from typing import Any

from broker.log_limiter import RateLimitedLog, RecentValues


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))


def test_burst_is_cut_to_quota_and_summarised_in_the_next_interval() -> None:
    now = [100.0]
    rec = Recorder()
    limiter = RateLimitedLog(rec, max_lines=3, interval_s=10.0, clock=lambda: now[0])
    written = [limiter.warning("bad frame", n=i) for i in range(1000)]
    assert written.count(True) == 3 and len(rec.lines) == 3
    now[0] += 10.0
    assert limiter.warning("bad frame", n=1000)
    assert rec.lines[3] == ("suppressed warnings about client input", {"suppressed": 997, "interval_s": 10.0})
    assert rec.lines[4][0] == "bad frame"


def test_flush_without_suppression_writes_nothing() -> None:
    rec = Recorder()
    limiter = RateLimitedLog(rec, max_lines=3, interval_s=10.0, clock=lambda: 0.0)
    limiter.warning("x")
    limiter.flush()
    assert len(rec.lines) == 1


def test_errors_share_the_quota_and_name_what_was_suppressed() -> None:
    now = [0.0]
    levels: list[str] = []

    class Levels:
        def warning(self, event: str, **kw: Any) -> None:
            levels.append(f"warning:{event}")

        def error(self, event: str, **kw: Any) -> None:
            levels.append(f"error:{event}")

    limiter = RateLimitedLog(Levels(), max_lines=2, interval_s=1.0, clock=lambda: now[0], about="failed handlers")
    for _ in range(5):
        limiter.error("handler failed")
    now[0] = 1.0
    limiter.flush()
    assert levels == ["error:handler failed"] * 2 + ["warning:suppressed warnings about failed handlers"]


def test_recent_values_say_what_changed_and_forget_the_least_recent() -> None:
    seen = RecentValues(max_keys=2)
    assert seen.swap("a", 2) is None  # first sight
    assert seen.swap("a", 2) == 2  # unchanged: the caller writes no line
    assert seen.swap("a", -1) == 2  # changed
    seen.swap("b", 1)
    seen.swap("a", -1)  # "a" used more recently than "b"
    seen.swap("c", 1)  # over max_keys: "b" forgotten, not "a"
    assert seen.swap("b", 1) is None
    assert seen.swap("c", 1) == 1
