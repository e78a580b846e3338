"""Throughput from the brokers' Prometheus /metrics (`--metrics URL,...`), for sparklines.

Brokers expose counters named as the Prometheus JMX exporter names Kafka's
(`kafka_server_brokertopicmetrics_messagesin_total{topic=...}`, `..._bytesin_total`,
`..._bytesout_total`). The sampler scrapes every URL every few seconds, sums each counter per
topic over the brokers, and keeps the rates between successive samples (a bounded history).
With no URL nothing is sampled and the pages say so: the console never makes numbers up.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

COUNTERS = {
    "kafka_server_brokertopicmetrics_messagesin_total": "messages_in",
    "kafka_server_brokertopicmetrics_bytesin_total": "bytes_in",
    "kafka_server_brokertopicmetrics_bytesout_total": "bytes_out",
}
ALL_TOPICS = ""  # the key of a counter without a topic label: the broker's total
_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[tuple[str, str], float]:
    """(kind, topic) -> value of the counters in COUNTERS from one Prometheus text exposition
    (kind is messages_in, bytes_in or bytes_out; topic "" for the unlabelled total)."""
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None or m["name"] not in COUNTERS:
            continue
        labels = dict(_LABEL.findall(m["labels"] or ""))
        try:
            value = float(m["value"])
        except ValueError:
            continue
        key = (COUNTERS[m["name"]], labels.get("topic", ALL_TOPICS))
        out[key] = out.get(key, 0.0) + value
    return out


@dataclass
class Sampler:
    """Scrapes `urls` every `interval_s` and keeps up to `keep` per-second rates per
    (kind, topic), summed over the brokers."""

    urls: list[str]
    interval_s: float = 2.0
    keep: int = 60
    rates: dict[tuple[str, str], deque[float]] = field(default_factory=lambda: defaultdict(deque))
    errors: dict[str, str] = field(default_factory=dict)
    _last: tuple[float, dict[tuple[str, str], float]] | None = None

    def add(self, at: float, totals: dict[tuple[str, str], float]) -> None:
        """One scrape's summed counters at monotonic time `at`: a rate per key since the last."""
        if self._last is not None and at > self._last[0]:
            then, before = self._last
            for key, value in totals.items():
                if key in before:
                    series = self.rates[key]
                    series.append(max(value - before[key], 0.0) / (at - then))  # a restart resets a counter
                    while len(series) > self.keep:
                        series.popleft()
        self._last = (at, totals)

    def series(self, kind: str, topic: str = ALL_TOPICS) -> list[float]:
        return list(self.rates.get((kind, topic), ()))

    async def scrape(self, session: Any) -> None:
        """Scrape every URL once; a URL that fails is named in `errors` and left out."""
        totals: dict[tuple[str, str], float] = defaultdict(float)
        for url in self.urls:
            try:
                async with session.get(url) as resp:
                    resp.raise_for_status()
                    text = await resp.text()
            except Exception as e:  # shown on the page, the others still count
                self.errors[url] = f"{type(e).__name__}: {e}"
                continue
            self.errors.pop(url, None)
            for key, value in parse(text).items():
                totals[key] += value
        self.add(time.monotonic(), dict(totals))

    async def run(self) -> None:
        import aiohttp

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.interval_s)) as session:
            while True:
                await self.scrape(session)
                await asyncio.sleep(self.interval_s)
