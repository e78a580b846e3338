"""`odradek console` in a real browser (headless chromium) against a live 3-broker cluster: each
page loads, and the numbers it shows are the cluster's own answers -- the ISR shrinking on the
topics page and the under-replicated count on the live overview after a follower is paused, a
stopped consumer's lag after more records are produced, a known record in the message browser."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.client_waits import consume_and_commit
from tests.cluster.processes import IDS, RF3, Cluster, partitions, running_cluster
from tests.console.browser import screenshot, text_of, until
from tests.console.console_process import ConsoleProcess
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import OffsetSpec

LAG_MS = 800  # replica.lag.time.max.ms: a paused follower leaves the ISRs within a second


@pytest.fixture
async def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    """Brokers 1-3 in racks r1-r3, all stopped at teardown."""
    async with running_cluster(zookeeper, tmp_path, (f"replica.lag.time.max.ms={LAG_MS}",),
                               {i: (f"broker.rack=r{i}",) for i in IDS}) as c:
        yield c


GROUP = "console.readers"  # a dot: the live pages key groups by name, not by a dotted path
HEADER = ("trace-id", b"abc-123")
KEY, VALUE = b"order-17", {"item": "lamp", "qty": 2}


def _under_replicated(view: dict[str, Any]) -> int:
    """Metadata's count, as Kafka's UnderReplicatedPartitions counts: ISR < replicas, with a leader."""
    return sum(1 for t in view["topics"].values() for s in t[2].values() if s[1] >= 0 and len(s[4]) < len(s[3]))


def _seed(bootstrap: str) -> dict[tuple[str, int], int]:
    """A known record at rf3-0 offset 0; 10 records per rf3 partition consumed and committed by
    GROUP, whose consumer then stops; 7 more records to rf3-1 and 3 to rf3-4 after it. The lag
    the cluster answers: log end - committed per partition."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=20_000)
    try:
        producer.send("rf3", key=KEY, value=json.dumps(VALUE).encode(), headers=[HEADER], partition=0).get(20)
        for p in RF3:
            for i in range(10 - (p == 0)):
                producer.send("rf3", value=b"v%d" % i, partition=p)
        producer.flush(20)
        consume_and_commit(bootstrap, "rf3", GROUP, 60)
    finally:
        producer.close(5)
    _produce(bootstrap, {1: 7, 4: 3})
    return _lags(bootstrap)


def _produce(bootstrap: str, counts: dict[int, int]) -> None:
    """counts[p] more records to rf3-p."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=20_000)
    try:
        for p, n in counts.items():
            for i in range(n):
                producer.send("rf3", value=b"late%d" % i, partition=p)
        producer.flush(20)
    finally:
        producer.close(5)


def _lags(bootstrap: str) -> dict[tuple[str, int], int]:
    """GROUP's lag per partition as the cluster answers it: ListOffsets(latest) - OffsetFetch."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        committed = admin.list_group_offsets(GROUP)[GROUP]
        ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in committed})
        return {(tp.topic, tp.partition): ends[tp].offset - om.offset for tp, om in committed.items()}
    finally:
        admin.close()


async def test_the_pages_show_what_the_cluster_answers(cluster: Cluster, browser: Any) -> None:
    await cluster.open()
    cid, _ = await cluster.controller()
    bootstrap = cluster.brokers[cid].bootstrap
    lags = await asyncio.to_thread(_seed, bootstrap)
    assert sum(lags.values()) == 10 and lags[("rf3", 1)] == 7  # what the cluster answers
    console = await asyncio.to_thread(ConsoleProcess(",".join(b.bootstrap for b in cluster.brokers.values())).start)
    try:
        await _check_pages(cluster, browser, console, cid, lags)
    finally:
        await asyncio.to_thread(console.stop)


async def _check_pages(cluster: Cluster, browser: Any, console: ConsoleProcess, cid: int,
                       lags: dict[tuple[str, int], int]) -> None:
    await cluster.until_all_agree(lambda m: "__consumer_offsets" in m["topics"] and _under_replicated(m) == 0,
                                  "the offsets topic, every ISR full")

    def shows_the_answer(page: str, matches: Any) -> None:
        """Load `page` until what it shows `matches` Metadata as the controller's broker answers
        it just after (bounded: a page and an answer taken while an ISR changes may differ)."""
        def check() -> bool:
            browser.get(console.url + page)
            return matches(cluster.metadata(cid))
        until(check, f"{page} showing the cluster's answer", 30.0, 0.5)

    def overview() -> None:
        shows_the_answer("/", lambda m: text_of(browser, "under-replicated") == str(_under_replicated(m))
                         and text_of(browser, "broker-count") == str(len(m["brokers"]))
                         and text_of(browser, "controller") == str(m["controller_id"]))
        assert text_of(browser, "broker-count") == "3" and text_of(browser, "controller") == str(cid)
        for i in IDS:  # its rack; the version kafka-python infers from the broker's own ApiVersions answer
            assert re.search(rf"^{i} [0-9.:]+ \d+ r{i} \d+\.\d+ \(\d+ APIs\)", text_of(browser, f"broker-{i}")), \
                text_of(browser, f"broker-{i}")
        assert text_of(browser, "under-replicated") == "0" and text_of(browser, "offline") == "0"
        assert "without --metrics" in text_of(browser, "no-metrics")  # no numbers made up
        until(lambda: text_of(browser, "live-status").startswith("updated"), "the first live refresh")
        screenshot(browser, "overview")

    def topics() -> None:
        shows_the_answer("/topics", lambda m: all(
            text_of(browser, f"isr-rf3-{p}") == ",".join(map(str, s[4])) and text_of(browser, f"leader-rf3-{p}") == str(s[1])
            for p, s in partitions(m, "rf3").items()))
        screenshot(browser, "topics")

    def messages() -> None:
        browser.get(console.url + "/topics/rf3/messages?partition=0&offset=0&limit=5")
        row = browser.find_element(By.ID, "record-0")
        assert row.find_element(By.CSS_SELECTOR, ".key").text == KEY.decode()
        assert json.loads(row.find_element(By.CSS_SELECTOR, ".value").text) == VALUE
        assert row.find_element(By.CSS_SELECTOR, ".headers").text == f"{HEADER[0]}: {HEADER[1].decode()}"
        assert len(browser.find_elements(By.CSS_SELECTOR, "#records tr[id^=record-]")) == 5  # one page only
        screenshot(browser, "messages")

    def groups() -> None:
        browser.get(console.url + "/groups")
        assert text_of(browser, f"lag-{GROUP}") == str(sum(lags.values()))
        assert text_of(browser, f"lag-{GROUP}-rf3") == str(sum(lags.values()))
        screenshot(browser, "groups")
        browser.get(console.url + f"/groups/{GROUP}")
        assert text_of(browser, "state") == "Empty"
        for (t, p), lag in lags.items():
            row = browser.find_element(By.ID, f"p-{t}-{p}")
            assert row.find_element(By.CSS_SELECTOR, ".lag").text == str(lag)
        screenshot(browser, "group")

    def live_lag() -> None:
        """The live page, not reloaded, follows the group's lag as more records arrive."""
        browser.get(console.url + "/live")
        assert text_of(browser, f"live-lag-{GROUP}") == str(sum(lags.values()))
        _produce(console.bootstrap, {2: 5})
        answered = sum(_lags(console.bootstrap).values())
        assert answered == sum(lags.values()) + 5
        until(lambda: text_of(browser, f"live-lag-{GROUP}") == str(answered), "the live lag after 5 more records")

    for check in (overview, topics, messages, groups, live_lag):
        await asyncio.to_thread(check)
    await _check_a_paused_follower(cluster, browser, console, cid)


async def _check_a_paused_follower(cluster: Cluster, browser: Any, console: ConsoleProcess, cid: int) -> None:
    """SIGSTOP a follower: the live page's under-replicated count, without a reload, and then the
    topics page's ISRs become what the controller's broker answers."""
    paused = next(i for i in IDS if i != cid)
    await asyncio.to_thread(browser.get, console.url + "/live")
    cluster.brokers[paused].proc.send_signal(signal.SIGSTOP)
    try:
        await cluster.until_all_agree(lambda m: any(paused not in s[4] for s in partitions(m, "rf3").values()),
                                      "the paused follower out of an ISR", among=[cid])

        def shown_equals_answered() -> bool:
            answered = _under_replicated(cluster.metadata(cid))
            return answered > 0 and text_of(browser, "live-under-replicated") == str(answered)

        await asyncio.to_thread(until, shown_equals_answered, "the live under-replicated count", 30.0)
        await asyncio.to_thread(screenshot, browser, "live")

        def topics_isr_equals_answered() -> bool:
            browser.get(console.url + "/topics")
            rf3 = partitions(cluster.metadata(cid), "rf3")
            return all(text_of(browser, f"isr-rf3-{p}") == ",".join(map(str, s[4])) for p, s in rf3.items()) \
                and any(paused not in s[4] for s in rf3.values())

        await asyncio.to_thread(until, topics_isr_equals_answered, "the topics page's ISRs", 30.0, 0.5)
        await asyncio.to_thread(screenshot, browser, "topics-isr-shrunk")
    finally:
        cluster.brokers[paused].proc.send_signal(signal.SIGCONT)
