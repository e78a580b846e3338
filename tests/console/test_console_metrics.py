"""The console's throughput end to end against Odradek's own /metrics: a 3-broker ZooKeeper-mode
cluster serving metrics.port, `odradek console --metrics` pointed at the three /metrics URLs, a
producer writing to a topic with a partition on each broker at a known rate (100 records/s), and
headless chromium showing that topic's messages-in rate (the number and the sparkline) near it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.broker_process import free_port
from tests.cluster.processes import IDS, Cluster, running_cluster
from tests.console.browser import screenshot, text_of, until
from tests.console.console_process import ConsoleProcess
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

TOPIC = "clicks"
RATE = 100  # records/s, 10 every 100 ms
RUN_S = 60.0  # the producer's bound: the test stops it as soon as the page shows the rate


@pytest.fixture
async def metered(zookeeper: ZooKeeperServer, tmp_path: Path) -> AsyncIterator[tuple[Cluster, list[str]]]:
    """Brokers 1-3, each serving /metrics on its own port; the cluster and the three URLs."""
    ports = {i: free_port() for i in IDS}
    per_broker = {i: (f"metrics.port={ports[i]}", "metrics.host=127.0.0.1") for i in IDS}
    async with running_cluster(zookeeper, tmp_path, (), per_broker) as c:
        yield c, [f"http://127.0.0.1:{ports[i]}/metrics" for i in IDS]


def _produce_at_rate(bootstrap: str, stop: threading.Event, sent: list[int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, request_timeout_ms=20_000)
    try:
        deadline = time.monotonic() + RUN_S
        tick = time.monotonic()
        while not stop.is_set() and time.monotonic() < deadline:
            for i in range(RATE // 10):
                producer.send(TOPIC, b"click-%d" % i, partition=(sent[0] + i) % 3)
            sent[0] += RATE // 10
            tick += 0.1
            stop.wait(max(0.0, tick - time.monotonic()))
        producer.flush(20)
    finally:
        producer.close(5)


async def test_topic_throughput_from_odradeks_own_metrics(metered: tuple[Cluster, list[str]], browser: Any) -> None:
    cluster, urls = metered
    await cluster.open()
    bootstrap = cluster.brokers[1].bootstrap

    def create() -> None:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
        try:  # one partition led by each broker: the console sums the three brokers' counters
            admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [1], 1: [2], 2: [3]})])
        finally:
            admin.close()

    await asyncio.to_thread(create)
    console = await asyncio.to_thread(ConsoleProcess(bootstrap, "--metrics", ",".join(urls)).start)
    stop, sent = threading.Event(), [0]
    producer = threading.Thread(target=_produce_at_rate, args=(bootstrap, stop, sent), daemon=True)
    producer.start()
    try:
        def shown() -> tuple[float, list[float]] | None:
            """The topic page's latest messages-in rate and its sparkline series, once the rate
            is about RATE and the series has the two samples a sparkline needs."""
            browser.get(f"{console.url}/topics/{TOPIC}")
            latest = browser.find_elements(By.ID, "messages-in-latest")
            series = json.loads(browser.find_element(By.CSS_SELECTOR, "span[data-spark-static]")
                                .get_attribute("data-spark-static"))
            rate = float(latest[0].text) if latest else 0.0
            return (rate, series) if rate >= RATE / 4 and len(series) >= 2 else None

        # the sampler's rates (2 s apart) of the three brokers' summed messagesin counters:
        # about RATE once the producer runs (nothing is shown before: never made up)
        rate, series = await asyncio.to_thread(until, shown, "a messages-in rate for the topic", 40.0, 1.0)
        assert RATE / 4 <= rate <= RATE * 2.5, rate
        assert series[-1] == pytest.approx(rate, abs=0.051)
        # the sparkline is drawn from the same series: an SVG polyline, a point per sample
        spark = browser.find_element(By.CSS_SELECTOR, "span[data-spark-static] svg.spark polyline")
        assert len(spark.get_attribute("points").split()) == len(series)
        # the topics page: that topic's row has a non-zero sparkline series too
        browser.get(f"{console.url}/topics")
        cell = browser.find_element(By.CSS_SELECTOR, f"#p-{TOPIC}-0 span[data-spark-static]")
        assert any(v > 0 for v in json.loads(cell.get_attribute("data-spark-static")))
        assert "without --metrics" not in browser.page_source
        screenshot(browser, "topic-throughput")
        assert text_of(browser, "topics")
    finally:
        stop.set()
        await asyncio.to_thread(producer.join, 30)
        await asyncio.to_thread(console.stop)
    assert sent[0] > 0
