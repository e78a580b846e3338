"""A client quota set through one broker of a 3-broker ZooKeeper-mode cluster (Kafka 3.9's
kafka-configs, AlterClientQuotas, /config/clients/<c> and a /config/changes notification) is
applied without restart by every broker: a confluent-kafka producer writing to a partition led by
each of them is throttled by all three, and every broker describes the quota (issue #23 §4)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from confluent_kafka import Producer

from tests.cluster.processes import IDS, Cluster, cluster_fixture
from tests.compat.jvm import run_tool

cluster = cluster_fixture()

CONFIGS = "kafka.admin.ConfigCommand"


def throttled_brokers(stats: list[str]) -> set[int]:
    out: set[int] = set()
    for s in stats:
        for b in json.loads(s).get("brokers", {}).values():
            if b.get("nodeid", -1) >= 0 and b.get("throttle", {}).get("max", 0) > 0:
                out.add(b["nodeid"])
    return out


def produce_to_every_leader(bootstrap: str) -> set[int]:
    """Write 60 kB to each rf1 partition (led by brokers 1, 2, 3) as client quota-c; the brokers
    that reported a throttle time, within a bounded run."""
    stats: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "quota-c", "statistics.interval.ms": 200,
                  "stats_cb": stats.append, "linger.ms": 5})
    deadline = time.monotonic() + 40
    try:
        for _ in range(60):
            for partition in range(3):
                p.produce("rf1", b"z" * 1000, partition=partition)
            p.poll(0)
        while throttled_brokers(stats) != set(IDS) and time.monotonic() < deadline:
            p.poll(0.2)
    finally:
        p.flush(0)
    return throttled_brokers(stats)


async def test_a_quota_change_reaches_every_broker(cluster: Cluster) -> None:
    await cluster.open()
    b = cluster.brokers
    await asyncio.to_thread(run_tool, CONFIGS, "--bootstrap-server", b[2].bootstrap, "--alter", "--add-config",
                            "producer_byte_rate=1000", "--entity-type", "clients", "--entity-name", "quota-c")
    for i in IDS:  # each broker applies the notification: the log line of its ClientQuotas
        await asyncio.to_thread(b[i].wait_for_line, "Client quota changed", 20.0)
    bootstrap = ",".join(b[i].bootstrap for i in IDS)
    assert await asyncio.to_thread(produce_to_every_leader, bootstrap) == set(IDS)
    for i in IDS:
        proc: Any = await asyncio.to_thread(run_tool, CONFIGS, "--bootstrap-server", b[i].bootstrap, "--describe",
                                            "--entity-type", "clients", "--entity-name", "quota-c")
        assert "Quota configs for client-id 'quota-c' are producer_byte_rate=1000.0" in proc.stdout, proc.stdout
