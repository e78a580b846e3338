"""Client quotas enforced on real clients (issue #23 §4): a confluent-kafka producer whose client-id
has producer_byte_rate=X and a consumer with consumer_byte_rate=X, each run as fast as they can
for a bounded time, see throttle_time_ms > 0 in librdkafka's statistics (`brokers.*.throttle`)
and move a bounded number of bytes.

The bound is Kafka's sampled rate: quota.window.num=11 windows of 1 s, a young rate measured over
at least 10 s, so a client may send 10 x X at once and then about X per second, the oldest
window's bytes allowed again as it expires -- over a run of T seconds at most about X x (T + 11)
bytes. The test allows 20 % more plus one request (librdkafka's in-flight batch), and asks for at
least half of X x min(T, 10) so that a throttle that starves the client also fails. Unthrottled,
either client moves far more in the same time (the producer tens of MB/s, the consumer the whole
topic at once)."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, Producer

from tests.broker_process import BrokerProcess, module_broker
from tests.compat.jvm import run_tool

broker = module_broker("quotas", ["num.partitions=1", "group.initial.rebalance.delay.ms=0"])

X = 100_000  # bytes per second
RUN_S = 12.0
SLACK = 1_100_000  # one request or fetch beyond the quota


def set_quota(b: BrokerProcess, client_id: str, config: str) -> None:
    run_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter", "--add-config", config,
             "--entity-type", "clients", "--entity-name", client_id)


def max_throttle(stats: list[str]) -> int:
    """The largest throttle time librdkafka reported from any broker."""
    out = 0
    for s in stats:
        for broker_stats in json.loads(s).get("brokers", {}).values():
            out = max(out, int(broker_stats.get("throttle", {}).get("max", 0)))
    return out


def assert_bounded(nbytes: int, elapsed: float) -> None:
    print(f"{nbytes} bytes in {elapsed:.1f} s: {nbytes / elapsed:.0f} B/s, quota {X} B/s")
    assert nbytes <= 1.2 * X * (elapsed + 11) + SLACK, (nbytes, elapsed)
    assert nbytes >= 0.5 * X * min(elapsed, 10), (nbytes, elapsed)


def test_producer_byte_rate_throttles_a_producer(broker: BrokerProcess) -> None:
    set_quota(broker, "quota-producer", f"producer_byte_rate={X}")
    stats: list[str] = []
    delivered = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            delivered[0] += len(msg.value())

    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "quota-producer", "linger.ms": 5,
                  "statistics.interval.ms": 500, "stats_cb": stats.append, "acks": 1})
    payload = b"x" * 1000
    start = time.monotonic()
    try:
        while time.monotonic() - start < RUN_S:
            try:
                p.produce("quota-p", payload, on_delivery=on_delivery)
            except BufferError:
                p.poll(0.05)
            p.poll(0)
        elapsed = time.monotonic() - start
        sent_in_time = delivered[0]
        p.flush(30)
        p.poll(1.0)  # a last statistics callback
    finally:
        p.flush(0)
    assert max_throttle(stats) > 0, stats[-1:]
    assert_bounded(sent_in_time, elapsed)


def test_consumer_byte_rate_throttles_a_consumer(broker: BrokerProcess) -> None:
    filler = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "filler", "linger.ms": 20})
    for _ in range(8_000):  # 8 MB: more than the quota lets through in the run
        while True:
            try:
                filler.produce("quota-c", b"y" * 1000)
                break
            except BufferError:
                filler.poll(0.05)
    assert filler.flush(60) == 0
    set_quota(broker, "quota-consumer", f"consumer_byte_rate={X}")
    stats: list[str] = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "quota-consumer", "group.id": "quota-g",
                  "auto.offset.reset": "earliest", "statistics.interval.ms": 500, "stats_cb": stats.append})
    c.subscribe(["quota-c"])
    consumed = 0
    start: float | None = None
    try:
        deadline = time.monotonic() + 30
        while start is None and time.monotonic() < deadline:  # the group joined and the first records in
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                start = time.monotonic()
                consumed += len(m.value())
        assert start is not None, "no record consumed within 30 s"
        while time.monotonic() - start < RUN_S:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                consumed += len(m.value())
        elapsed = time.monotonic() - start
        c.poll(1.0)
    finally:
        c.close()
    assert max_throttle(stats) > 0, stats[-1:]
    assert consumed < 8_000_000
    assert_bounded(consumed, elapsed)
