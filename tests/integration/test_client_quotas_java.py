"""A client quota seen by Kafka 3.9.2's Java producer (issue #23 §4): ProducerPerformance under a
producer_byte_rate for its client-id reports the throttle in its own metrics
(`produce-throttle-time-avg` / `-max`, from the throttle_time_ms of our Produce responses, KIP-219)
and its rate stays near the quota, while the same run under another client-id is not throttled.

The broker measures rates over 2 windows of 1 s (quota.window.num=2), so the quota bites within a
second instead of after Kafka's default 11 windows' burst, and the run stays short."""

from __future__ import annotations

import re

from tests.broker_process import BrokerProcess, module_broker
from tests.compat.jvm import run_tool

broker = module_broker("quotas-java", ["num.partitions=1", "quota.window.num=2", "quota.window.size.seconds=1"])

PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
X = 200_000  # producer_byte_rate, bytes per second
RECORDS, SIZE = 1_200, 1_000  # 1.2 MB: six seconds at the quota


def producer_perf(b: BrokerProcess, client_id: str, topic: str) -> tuple[float, dict[str, float]]:
    """Run ProducerPerformance to completion; its final records/sec and its producer metrics."""
    out = run_tool(PRODUCER_PERF, "--topic", topic, "--num-records", str(RECORDS), "--record-size", str(SIZE),
                   "--throughput", "-1", "--print-metrics", "--producer-props", f"bootstrap.servers={b.bootstrap}",
                   f"client.id={client_id}", "acks=1", "batch.size=16384", "linger.ms=0", timeout=120).stdout
    total = re.search(rf"{RECORDS} records sent, ([\d.]+) records/sec", out)
    assert total, out[-3000:]
    metrics = {m.group(1): float(m.group(2)) for m in re.finditer(
        rf"producer-metrics:(produce-throttle-time-(?:avg|max)):{{client-id={re.escape(client_id)}}}\s*:\s*([\d.NaE-]+)",
        out)}
    assert set(metrics) == {"produce-throttle-time-avg", "produce-throttle-time-max"}, out[-3000:]
    return float(total.group(1)), metrics


def test_the_java_producer_reports_the_throttle_and_keeps_to_the_quota(broker: BrokerProcess) -> None:
    run_tool("kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap, "--alter", "--add-config",
             f"producer_byte_rate={X}", "--entity-type", "clients", "--entity-name", "quota-java")
    rate, metrics = producer_perf(broker, "quota-java", "quota-java")
    print(f"throttled: {rate:.0f} records/s, {metrics}")
    assert metrics["produce-throttle-time-max"] > 0 and metrics["produce-throttle-time-avg"] > 0, metrics
    assert rate * SIZE <= 2 * X, rate  # near the quota (the first windows' burst included), not the machine's speed

    free_rate, free = producer_perf(broker, "free-java", "free-java")
    print(f"unthrottled: {free_rate:.0f} records/s, {free}")
    assert free["produce-throttle-time-max"] == 0, free
    assert free_rate > 2 * rate, (free_rate, rate)
