"""Pure arithmetic of `odradek perf`: latency samples, percentiles, histograms, result lines.

No I/O and no client library here, so it is unit-tested on its own (tests/unit/clients/
test_perf_stats.py) and shared by the CLI (clients/perf.py), the measuring functions
(clients/perf_run.py) and the benchmark harness (tests/bench/).

Percentiles follow kafka-producer-perf-test: sort the samples and take the one at index
`int(p * n)` (clamped to the last). Like Kafka, a recorder keeps every `sampling`-th latency so
memory stays bounded for long runs (Kafka keeps ~500,000 samples); count, mean and max are exact.

The final lines are Kafka's, field for field, so scripts written for Kafka's tools parse ours:
  producer: `N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency,
             P ms 50th, P ms 95th, P ms 99th, P ms 99.9th.`
  consumer: `start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
             rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec` and one row.
MB is 1024 * 1024 bytes, as in both Kafka tools.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MB = 1024 * 1024
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
MAX_SAMPLES = 500_000


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The sample at index int(p * n) of an ascending sequence (Kafka's rule); 0.0 if empty."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"percentile must be within [0, 1], got {p}")
    if not sorted_values:
        return 0.0
    return sorted_values[min(int(p * len(sorted_values)), len(sorted_values) - 1)]


def sampling_for(expected: int, max_samples: int = MAX_SAMPLES) -> int:
    """Keep one latency in this many so that `expected` records give at most ~max_samples."""
    return max(1, math.ceil(expected / max_samples)) if expected > 0 else 1


class LatencyRecorder:
    """Latencies in milliseconds: exact count/sum/max, every `sampling`-th kept for percentiles."""

    def __init__(self, sampling: int = 1) -> None:
        if sampling < 1:
            raise ValueError("sampling must be >= 1")
        self.sampling = sampling
        self.count = 0
        self.total_ms = 0.0
        self.max_ms = 0.0
        self.samples = array("d")

    def record(self, ms: float) -> None:
        if self.count % self.sampling == 0:
            self.samples.append(ms)
        self.count += 1
        self.total_ms += ms
        if ms > self.max_ms:
            self.max_ms = ms

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.record(v)

    def stats(self) -> LatencyStats:
        ordered = sorted(self.samples)
        return LatencyStats(
            count=self.count,
            avg_ms=self.total_ms / self.count if self.count else 0.0,
            max_ms=self.max_ms,
            percentiles={p: percentile(ordered, p) for p in PERCENTILES},
        )


@dataclass(frozen=True)
class LatencyStats:
    count: int
    avg_ms: float
    max_ms: float
    percentiles: dict[float, float]

    @property
    def p50(self) -> float:
        return self.percentiles[0.5]

    @property
    def p95(self) -> float:
        return self.percentiles[0.95]

    @property
    def p99(self) -> float:
        return self.percentiles[0.99]

    @property
    def p999(self) -> float:
        return self.percentiles[0.999]


@dataclass(frozen=True)
class ProduceResult:
    """What `odradek perf produce` measured: acknowledged records, their value bytes, the wall
    time from the first send to the last acknowledgement, and send-to-ack latencies."""

    records: int
    bytes: int
    elapsed_s: float
    latency: LatencyStats
    failed: int = 0
    first_error: str | None = None

    @property
    def records_per_sec(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_sec(self) -> float:
        return self.bytes / MB / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary_line(self) -> str:
        lat = self.latency
        return (f"{self.records} records sent, {self.records_per_sec:.1f} records/sec "
                f"({self.mb_per_sec:.2f} MB/sec), {lat.avg_ms:.2f} ms avg latency, "
                f"{lat.max_ms:.2f} ms max latency, {int(lat.p50)} ms 50th, {int(lat.p95)} ms 95th, "
                f"{int(lat.p99)} ms 99th, {int(lat.p999)} ms 99.9th.")


PRODUCE_LINE = re.compile(
    r"^(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.$")


def parse_produce_line(line: str) -> dict[str, float]:
    """The fields of a producer summary line (ours or Kafka's); ValueError if it is not one."""
    return _parse_line(PRODUCE_LINE, line, "a producer")


def _parse_line(pattern: re.Pattern[str], line: str, what: str) -> dict[str, float]:
    m = pattern.match(line.strip())
    if m is None:
        raise ValueError(f"not {what} summary line: {line!r}")
    return {k: float(v) for k, v in m.groupdict().items()}


CONSUME_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                  "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def kafka_time(t: float) -> str:
    """`yyyy-MM-dd HH:mm:ss:SSS` in local time, the date format of kafka-consumer-perf-test."""
    d = dt.datetime.fromtimestamp(t)
    return d.strftime("%Y-%m-%d %H:%M:%S:") + f"{d.microsecond // 1000:03d}"


@dataclass(frozen=True)
class ConsumeResult:
    """What `odradek perf consume` measured. Times are wall-clock seconds since the epoch:
    `start` when the consumer was created, `first` when the first record arrived (the
    difference is group join / metadata / offset lookup: Kafka's rebalance.time.ms), `end` when
    the last record arrived."""

    records: int
    bytes: int
    start: float
    first: float
    end: float
    requested: int = 0

    @property
    def elapsed_s(self) -> float:
        return self.end - self.start

    @property
    def rebalance_s(self) -> float:
        return self.first - self.start if self.records else 0.0

    @property
    def fetch_s(self) -> float:
        return self.end - self.first if self.records else 0.0

    @property
    def mb(self) -> float:
        return self.bytes / MB

    @staticmethod
    def _rate(amount: float, seconds: float) -> float:
        return amount / seconds if seconds > 0 else 0.0

    @property
    def mb_per_sec(self) -> float:
        return self._rate(self.mb, self.elapsed_s)

    @property
    def records_per_sec(self) -> float:
        return self._rate(self.records, self.elapsed_s)

    @property
    def fetch_mb_per_sec(self) -> float:
        return self._rate(self.mb, self.fetch_s)

    @property
    def fetch_records_per_sec(self) -> float:
        return self._rate(self.records, self.fetch_s)

    def summary_line(self) -> str:
        return (f"{kafka_time(self.start)}, {kafka_time(self.end)}, {self.mb:.4f}, "
                f"{self.mb_per_sec:.4f}, {self.records}, {self.records_per_sec:.4f}, "
                f"{self.rebalance_s * 1000:.0f}, {self.fetch_s * 1000:.0f}, "
                f"{self.fetch_mb_per_sec:.4f}, {self.fetch_records_per_sec:.4f}")


def parse_consume_line(line: str) -> dict[str, float | str]:
    """The fields of a consumer summary row, keyed by CONSUME_HEADER's names."""
    names = CONSUME_HEADER.split(", ")
    cells = line.strip().split(", ")
    if len(cells) != len(names):
        raise ValueError(f"not a consumer summary line: {line!r}")
    out: dict[str, float | str] = {}
    for name, cell in zip(names, cells, strict=True):
        out[name] = cell if name.endswith("time") else float(cell)
    return out


@dataclass(frozen=True)
class E2EResult:
    """End-to-end latency at a fixed send rate: `samples` holds (seconds since the run began at
    which the record was sent, produce-to-consume latency in ms) for the plot, every
    `latency.count / len(samples)`-th record."""

    rate: float
    sent: int
    received: int
    elapsed_s: float
    latency: LatencyStats
    samples: list[tuple[float, float]] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.sent - self.received

    def summary_line(self) -> str:
        lat = self.latency
        return (f"{self.received} of {self.sent} records received at {self.rate:g} records/sec, "
                f"end-to-end latency {lat.avg_ms:.2f} ms avg, {lat.max_ms:.2f} ms max, "
                f"{lat.p50:.2f} ms 50th, {lat.p95:.2f} ms 95th, {lat.p99:.2f} ms 99th, "
                f"{lat.p999:.2f} ms 99.9th.")


E2E_LINE = re.compile(
    r"^(?P<received>\d+) of (?P<sent>\d+) records received at (?P<rate>[\d.e+]+) records/sec, "
    r"end-to-end latency (?P<avg>[\d.]+) ms avg, (?P<max>[\d.]+) ms max, (?P<p50>[\d.]+) ms 50th, "
    r"(?P<p95>[\d.]+) ms 95th, (?P<p99>[\d.]+) ms 99th, (?P<p999>[\d.]+) ms 99.9th\.$")


def parse_e2e_line(line: str) -> dict[str, float]:
    return _parse_line(E2E_LINE, line, "an end-to-end")


# 1-2-5 steps in ms: fine enough to tell 0.2 ms from 0.5 ms, wide enough for a stalled second
BUCKET_BOUNDS_MS = tuple(m * 10.0 ** e for e in range(-2, 5) for m in (1, 2, 5))


def histogram(values: Iterable[float], bounds: Sequence[float] = BUCKET_BOUNDS_MS,
              ) -> list[tuple[float, float, int]]:
    """Counts per bucket [low, high) over ascending `bounds` (the first bucket starts at 0, the
    last ends at infinity), trimmed to the span from the first to the last non-empty bucket."""
    edges = [0.0, *bounds, math.inf]
    counts = [0] * (len(edges) - 1)
    for v in values:
        lo, hi = 0, len(counts) - 1
        while lo < hi:  # first bucket whose upper edge is > v
            mid = (lo + hi) // 2
            if v < edges[mid + 1]:
                hi = mid
            else:
                lo = mid + 1
        counts[lo] += 1
    used = [i for i, c in enumerate(counts) if c]
    if not used:
        return []
    return [(edges[i], edges[i + 1], counts[i]) for i in range(used[0], used[-1] + 1)]


def format_ms(v: float) -> str:
    return "inf" if math.isinf(v) else f"{v:g}"


def render_histogram(buckets: Sequence[tuple[float, float, int]], width: int = 40) -> list[str]:
    """Text rows `  low - high ms  count  pct%  ####`, bars scaled to the largest bucket."""
    if not buckets:
        return ["(no samples)"]
    total = sum(c for _, _, c in buckets)
    top = max(c for _, _, c in buckets)
    labels = [f"{format_ms(lo)} - {format_ms(hi)} ms" for lo, hi, _ in buckets]
    lw = max(len(s) for s in labels)
    cw = max(len(str(c)) for _, _, c in buckets)
    rows = []
    for label, (_, _, c) in zip(labels, buckets, strict=True):
        bar = "#" * (round(c / top * width) if c else 0)
        if c and not bar:
            bar = "."
        rows.append(f"{label:>{lw}}  {c:>{cw}}  {c / total * 100:5.1f}%  {bar}")
    return rows
