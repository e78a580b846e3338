"""The cost of metrics (issue #24 §1.2): one broker with metrics.port=0 and one with /metrics
served and scraped every second, each fed the same produce (librdkafka, acks=1, 100-byte
records, 4 partitions) and a full read-back; throughput and the broker's CPU per record, off and
on, alternating over trials so machine noise hits both.

    python -m tests.bench.bench_metrics [--records N] [--trials T]

Under `python -m tests.bench` N scales with ODRADEK_BENCH_SCALE (a smoke run: --scale 0.01).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.bench.bench_broker import create, produce
from tests.bench.peers import cpu_seconds
from tests.broker_process import BrokerProcess, free_port

SIZE = 100
PARTITIONS = 4


def consume(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-metrics", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    start = time.perf_counter()
    got = 0
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    c.close()
    assert got >= n, f"read {got} of {n}"
    return time.perf_counter() - start


def trial(workdir: Path, metrics: bool, n: int) -> dict[str, float]:
    port = free_port()
    overrides = [f"metrics.port={port}", "metrics.host=127.0.0.1"] if metrics else []
    b = BrokerProcess(workdir / ("on" if metrics else "off"), overrides=overrides).start()
    stop = threading.Event()
    scrapes = [0]

    def scraper() -> None:  # Prometheus' default is 15 s; every second is the harsher case
        while not stop.wait(1.0):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                r.read()
            scrapes[0] += 1

    t = threading.Thread(target=scraper, daemon=True)
    try:
        create(b.bootstrap, "bench", PARTITIONS)
        if metrics:
            t.start()
        cpu0 = cpu_seconds(b.proc.pid)
        produce_s = produce(b.bootstrap, "bench", n, SIZE)
        consume_s = consume(b.bootstrap, "bench", n)
        cpu = cpu_seconds(b.proc.pid) - cpu0
    finally:
        stop.set()
        if t.is_alive():
            t.join(15)
        b.stop()
    return {"produce_rps": n / produce_s, "consume_rps": n / consume_s, "cpu_us": cpu / (2 * n) * 1e6,
            "scrapes": scrapes[0]}


def run(n: int, trials: int) -> list[str]:
    rows: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        for i in range(trials):
            for metrics in ((False, True) if i % 2 == 0 else (True, False)):
                rows[metrics].append(trial(Path(tmp) / f"t{i}", metrics, n))
    out = [f"{n:,} records of {SIZE} B produced (acks=1) and read back, {PARTITIONS} partitions, median of "
           f"{trials} trials; \"on\" serves /metrics and is scraped every second during the run.", "",
           "| metrics | produce records/s | consume records/s | broker CPU µs per record (produce + consume) | scrapes |",
           "|---|---|---|---|---|"]
    for metrics in (False, True):
        rs = rows[metrics]
        med = {k: statistics.median(r[k] for r in rs) for k in ("produce_rps", "consume_rps", "cpu_us", "scrapes")}
        out.append(f"| {'on' if metrics else 'off'} | {med['produce_rps']:,.0f} | {med['consume_rps']:,.0f} | "
                   f"{med['cpu_us']:.2f} | {med['scrapes']:.0f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    scale = float(os.environ.get("ODRADEK_BENCH_SCALE", "1"))
    ap.add_argument("--records", type=int, default=max(2000, int(1_000_000 * scale)))
    ap.add_argument("--trials", type=int, default=3 if scale >= 0.1 else 1)
    args = ap.parse_args()
    print("\n".join(run(args.records, args.trials)))


if __name__ == "__main__":
    main()
