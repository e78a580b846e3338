"""`odradek console` against Apache Kafka 3.9 (a KRaft node from build/java): it is a Kafka
client over the wire, so its overview, message browser and consumer-group lag show the
reference broker's answers as they show Odradek's."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.client_waits import consume_and_commit
from tests.compat.reference_kafka import ReferenceKafka
from tests.console.browser import screenshot, text_of
from tests.console.console_process import ConsoleProcess

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

GROUP = "kafka-readers"


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[ReferenceKafka]:
    k = ReferenceKafka(tmp_path / "kafka").start()
    try:
        yield k
    finally:
        k.stop()


def _seed(bootstrap: str) -> None:
    """A known record at events-0 offset 0 and 5 more; GROUP commits after reading all 6 and
    stops; then 4 more records: its lag is 4."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        producer.send("events", key=b"k0", value=b'{"n": 0}', headers=[("origin", b"kafka")]).get(20)
        for i in range(1, 6):
            producer.send("events", key=b"k%d" % i, value=b"plain %d" % i)
        producer.flush(20)
        consume_and_commit(bootstrap, "events", GROUP, 6)
        for i in range(4):
            producer.send("events", value=b"late %d" % i)
        producer.flush(20)
    finally:
        producer.close(5)


def test_the_console_shows_apache_kafka(kafka: ReferenceKafka, browser: Any) -> None:
    _seed(kafka.bootstrap)
    console = ConsoleProcess(kafka.bootstrap).start()
    try:
        browser.get(console.url + "/")
        assert text_of(browser, "broker-count") == "1"
        assert text_of(browser, "under-replicated") == "0"
        assert "3.9" in browser.find_element(By.ID, "broker-1").text  # inferred from Kafka's ApiVersions
        screenshot(browser, "kafka-overview")
        browser.get(console.url + "/topics/events/messages?partition=0&offset=0&limit=3")
        row = browser.find_element(By.ID, "record-0")
        assert json.loads(row.find_element(By.CSS_SELECTOR, ".value").text) == {"n": 0}
        assert row.find_element(By.CSS_SELECTOR, ".headers").text == "origin: kafka"
        browser.get(console.url + f"/groups/{GROUP}")
        assert text_of(browser, "lag") == "4"
        assert browser.find_element(By.ID, "p-events-0").find_element(By.CSS_SELECTOR, ".lag").text == "4"
    finally:
        console.stop()
