"""Replication between real `odradek serve` processes (issue #15): followers fetch from their
leaders, the leader's high watermark follows the ISR, acks=all waits for it, and what was
acknowledged with acks=all survives the leader's kill -9 (the new leader, from the ISR, has it)."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cluster.processes import (
    IDS,
    PROMISE_S,
    RF3,
    WAIT,
    Cluster,
    partitions,
    running_cluster,
)
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

N = 300


@pytest.fixture
async def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with running_cluster(zookeeper, tmp_path) as c:
        yield c


def produce_acks_all(bootstrap: str, topic: str, values: list[bytes]) -> dict[bytes, tuple[int, int]]:
    """Send with acks=all; the (partition, offset) each value was acknowledged at."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, request_timeout_ms=10_000)
    try:
        futures = [(v, producer.send(topic, v, partition=i % len(RF3))) for i, v in enumerate(values)]
        producer.flush(30)
        return {v: (f.get(10).partition, f.get(10).offset) for v, f in futures}
    finally:
        producer.close(5)


def read_all(bootstrap: str, topic: str, expected: int) -> dict[bytes, tuple[int, int]]:
    """Every record of the topic's partitions from the start (assigned, no group), bounded."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        tps = [TopicPartition(topic, p) for p in RF3]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict[bytes, tuple[int, int]] = {}
        deadline = time.monotonic() + WAIT
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    out[r.value] = (r.partition, r.offset)
        return out
    finally:
        consumer.close()


async def test_acks_all_records_survive_the_leaders_kill(cluster):
    await cluster.open()
    cid, _ = await cluster.controller()
    values = [b"v%04d" % i for i in range(N)]
    acked = await asyncio.to_thread(produce_acks_all, cluster.brokers[cid].bootstrap, "rf3", values)
    assert sorted(acked) == values
    # every partition's high watermark reached its log end: the ISR (all three) has everything
    victim = next(i for i in IDS if i != cid)
    cluster.brokers[victim].kill()
    view = await cluster.until_all_agree(
        lambda m: all(s[0] == 0 and s[1] not in (victim, -1) for s in partitions(m, "rf3").values()),
        "new leaders for the victim's partitions", timeout=PROMISE_S + WAIT)
    assert all(victim not in s[4] for s in partitions(view, "rf3").values())
    read = await asyncio.to_thread(read_all, cluster.brokers[cid].bootstrap, "rf3", N)
    assert read == acked  # same offsets, nothing lost, nothing else
