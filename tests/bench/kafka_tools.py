"""Kafka's own Java perf tools as benchmark clients: org.apache.kafka.tools.ProducerPerformance
(`kafka-producer-perf-test.sh`) and ConsumerPerformance (`kafka-consumer-perf-test.sh`) from the
Kafka 3.9 jars in build/java/kafka (tests/compat/jvm.py), run to completion as subprocesses.

The JVM gets what those scripts give it (a 512 MiB heap and kafka-run-class.sh's G1 settings), so
the client runs with the full JIT as it would on an operator's machine. Each function returns the
tool's own measurement, parsed from its final report line, and fails with the tool's output when
it exits non-zero, times out or moved fewer records than asked.

    producer_performance(bootstrap, topic, n, size, acks, props) -> ToolRun
    consumer_performance(bootstrap, topic, n, group)              -> ToolRun
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from tests.compat.jvm import java_command

# kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh: KAFKA_HEAP_OPTS="-Xmx512M", plus
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS
PERF_TOOL_JVM = ("-Xmx512m", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                 "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                 "-Djava.awt.headless=true")

# ProducerPerformance.Stats.printTotal
PRODUCER_TOTAL = re.compile(
    r"(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \([\d.]+ MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th")


@dataclass(frozen=True)
class ToolRun:
    records: int
    bytes: int
    seconds: float  # the tool's own timing (see the functions)
    output: str


class ToolFailed(RuntimeError):
    """A perf tool exited non-zero, timed out, or moved fewer records than asked."""


def _run(main_class: str, args: list[str], timeout: float) -> str:
    cmd = java_command(main_class, args, jvm_args=PERF_TOOL_JVM)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:  # subprocess.run kills the JVM before raising
        raise ToolFailed(f"{main_class} did not finish within {timeout:.0f} s") from e
    if proc.returncode != 0:
        raise ToolFailed(f"{main_class} {' '.join(args)} exited {proc.returncode}:\n"
                         f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def producer_performance(bootstrap: str, topic: str, n: int, size: int, acks: str,
                         props: Mapping[str, object], timeout: float = 300.0) -> ToolRun:
    """`kafka-producer-perf-test --throughput -1`: n random upper-case payloads of `size` bytes.
    Seconds are the tool's: n / its records/sec, timed from before the first send (the first
    metadata fetch included) to the last acknowledgement (flush)."""
    producer_props = [f"bootstrap.servers={bootstrap}", f"acks={acks}",
                      *(f"{k}={v}" for k, v in props.items())]
    out = _run("org.apache.kafka.tools.ProducerPerformance",
               ["--topic", topic, "--num-records", str(n), "--record-size", str(size),
                "--throughput", "-1", "--producer-props", *producer_props], timeout)
    # progress lines (every 5 s) have no percentiles: only the final total matches
    m = next(PRODUCER_TOTAL.finditer(out), None)
    if m is None:
        raise ToolFailed(f"no final report from ProducerPerformance:\n{out[-3000:]}")
    records, rps = int(m["records"]), float(m["rps"])
    if records != n or rps <= 0:
        raise ToolFailed(f"ProducerPerformance acknowledged {records} of {n} records:\n"
                         f"{out[-3000:]}")
    return ToolRun(records, records * size, records / rps, out)


def consumer_performance(bootstrap: str, topic: str, n: int, size: int, group: str,
                         timeout: float = 300.0, idle_ms: int = 30_000) -> ToolRun:
    """`kafka-consumer-perf-test`: a group member (subscribe) reads n records from the earliest
    offset. Seconds are the tool's fetch.time.ms: from the partition assignment (the group join
    before it is its rebalance.time.ms, left out as the tool leaves it out of fetch.nMsg.sec) to
    the last record, at millisecond resolution."""
    out = _run("org.apache.kafka.tools.ConsumerPerformance",
               ["--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(n),
                "--group", group, "--timeout", str(idle_ms), "--hide-header"], timeout)
    # start.time, end.time, MB, MB.sec, nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, ...
    rows = [line.split(", ") for line in out.splitlines() if line.count(", ") == 9]
    if not rows:
        raise ToolFailed(f"no final report from ConsumerPerformance:\n{out[-3000:]}")
    cols = rows[-1]
    records, fetch_ms = int(cols[4]), int(cols[7])
    if records != n:
        raise ToolFailed(f"ConsumerPerformance read {records} of {n} records:\n{out[-3000:]}")
    return ToolRun(records, records * size, max(fetch_ms, 1) / 1000, out)
