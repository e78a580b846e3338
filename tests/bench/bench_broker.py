"""Broker throughput, CPU per record and end-to-end latency, with confluent-kafka (librdkafka)
as the client so that the client is not what is measured.

Workload (issue 4): 100-byte records, linger.ms=5, batch.size=1 MiB, acks=1, 1 and 8 partitions;
end-to-end latency p50/p99 at 10,000 msg/s. The broker's own CPU time (its process's on-CPU
nanoseconds from /proc/<pid>/task/*/schedstat, see tests/bench/peers.py's `cpu_seconds`, divided
by records) does not depend on how fast the client is.

    python -m tests.bench.bench_broker [--records 500000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.peers import cpu_seconds  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    p = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20,
        "enable.idempotence": False,
    })
    value = b"x" * size
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    assert p.flush(120) == 0
    return time.perf_counter() - start


def consume(bootstrap: str, topic: str, partitions: int, n: int) -> tuple[float, float, int]:
    """(seconds from the first record to the last, seconds until the first record, records timed).
    The consumer's start-up (metadata, offsets) is timed apart from its steady throughput."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20, "fetch.wait.max.ms": 100,
        # librdkafka pauses prefetching for fetch.queue.backoff.ms (1 s) once queued.min.messages
        # (100k) are buffered: that is the client throttling itself, not the broker being slow
        "queued.min.messages": 10_000_000, "fetch.queue.backoff.ms": 0,
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    created = time.perf_counter()
    got = 0
    first = 0
    start = 0.0
    while got < n:
        msgs = c.consume(10000, timeout=10)
        if not msgs:
            raise RuntimeError(f"consume stalled at {got}/{n}")
        if not got:
            start = time.perf_counter()
            first = len(msgs)
        got += len(msgs)
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed, start - created, n - first


def e2e_latency(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    create(bootstrap, topic, 1)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lat", "fetch.wait.max.ms": 5,
                  "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    total = int(rate * seconds)
    latencies: list[float] = []
    start = time.perf_counter()
    sent = 0
    while sent < total or len(latencies) < total:
        now = time.perf_counter()
        due = min(total, int((now - start) * rate))
        while sent < due:
            p.produce(topic, str(time.perf_counter()).encode())
            sent += 1
        p.poll(0)
        for m in c.consume(1000, timeout=0.001):
            latencies.append(time.perf_counter() - float(m.value()))
        if now - start > seconds + 20:
            break
    p.flush(10)
    c.close()
    latencies.sort()
    return latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args(argv)
    n, size = args.records, args.size
    rows = []
    startups: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", overrides=["log.flush.offset.checkpoint.interval.ms=60000"]).start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            for partitions in (1, 8):
                topic = f"bench-{partitions}"
                create(broker.bootstrap, topic, partitions)
                cpu0 = cpu_seconds(pid)
                t_prod = produce(broker.bootstrap, topic, n, size)
                cpu1 = cpu_seconds(pid)
                t_cons, startup, timed = consume(broker.bootstrap, topic, partitions, n)
                cpu2 = cpu_seconds(pid)
                startups.append(startup)
                rows.append((partitions, "produce", n / t_prod, n * size / t_prod / 1e6, (cpu1 - cpu0) / n * 1e6))
                rows.append((partitions, "consume", timed / t_cons, timed * size / t_cons / 1e6, (cpu2 - cpu1) / n * 1e6))
            p50, p99 = e2e_latency(broker.bootstrap, "latency", 10_000, 5.0)
        finally:
            broker.stop()
    print(f"{n:,} records of {size} bytes; confluent-kafka {__import__('confluent_kafka').libversion()[0]}; "
          "linger.ms=5, batch.size=1 MiB, acks=1.\n")
    print("| partitions | workload | records/s | MB/s | broker CPU µs/record | Kafka 3.9 CPU µs/record |")
    print("|---:|---|---:|---:|---:|---:|")
    for partitions, kind, rps, mbps, cpu in rows:
        ref = 1.3 if kind == "produce" else 0.75
        print(f"| {partitions} | {kind} | {rps:,.0f} | {mbps:,.1f} | {cpu:.2f} | {ref} |")
    print(f"\nEnd-to-end latency at 10,000 msg/s (1 partition, acks=1): p50 {p50:.1f} ms, p99 {p99:.1f} ms.")
    print("Consume rates are timed from the first record received; the consumer's start-up before it "
          f"(metadata, offsets) took {', '.join(f'{s * 1000:.0f} ms' for s in startups)}.")
    print("Kafka 3.9 reference figures are the issue's (same machine kind, fast client).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
