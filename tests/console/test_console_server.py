"""`odradek console`'s safety defaults and its throughput scrape, over real HTTP against a real
broker: it listens on 127.0.0.1, refuses anything but GET/HEAD unless --allow-writes, answers a
bad request with 400/404 instead of a stack trace, and with --metrics draws per-second rates
from a Prometheus endpoint's counters (a small aiohttp server here, since Odradek brokers serve
none yet); without --metrics the JSON says throughput is off."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tests.broker_process import module_broker
from tests.console.browser import until
from tests.console.console_process import ConsoleProcess

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

broker = module_broker("console", ["num.partitions=1"])


def _status(url: str, method: str = "GET") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_read_only_on_localhost_by_default(broker: Any) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("present", 1, 1)])
    finally:
        admin.close()
    console = ConsoleProcess(broker.bootstrap).start()
    try:
        assert f"on http://127.0.0.1:{console.port}/" in console.log_text() and "read-only" in console.log_text()
        assert _status(console.url + "/")[0] == 200
        for method in ("POST", "PUT", "DELETE"):
            status, body = _status(console.url + "/topics", method)
            assert status == 403 and "--allow-writes" in body
        assert _status(console.url + "/topics/no-such-topic")[0] == 404
        assert _status(console.url + "/topics/present/messages?offset=x")[0] == 400
        assert _status(console.url + "/topics/present/messages?format=yaml")[0] == 400
        assert _status(console.url + "/topics/present/messages?partition=7")[0] == 404
        assert _status(console.url + "/topics/present/messages?offset=0")[0] == 200
        assert _status(console.url + "/groups/no-such-group")[0] == 404
        assert json.loads(_status(console.url + "/api/live")[1])["throughput"] == {"enabled": False}
    finally:
        console.stop()
    writable = ConsoleProcess(broker.bootstrap, "--allow-writes").start()
    try:
        assert "writes allowed" in writable.log_text()
        assert _status(writable.url + "/topics", "POST")[0] == 405  # let through: no page takes it yet
    finally:
        writable.stop()


@pytest.fixture
async def metrics_endpoint() -> AsyncIterator[str]:
    """A Prometheus endpoint whose messages-in counter grows by 1000 a second (monotonic clock)."""
    start = time.monotonic()

    async def metrics(request: web.Request) -> web.Response:
        n = 1000 * (time.monotonic() - start)
        return web.Response(text=f'kafka_server_brokertopicmetrics_messagesin_total{{topic="t"}} {n}\n'
                                 f"kafka_server_brokertopicmetrics_messagesin_total {n}\n")

    app = web.Application()
    app.add_routes([web.get("/metrics", metrics)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}/metrics"
    finally:
        await runner.cleanup()


async def test_throughput_from_metrics_is_the_counters_rate(broker: Any, metrics_endpoint: str) -> None:
    console = await asyncio.to_thread(ConsoleProcess(broker.bootstrap, "--metrics", metrics_endpoint).start)
    try:
        def rates() -> list[float]:
            return json.loads(_status(console.url + "/api/live")[1])["throughput"]["messages_in"]

        got = await asyncio.to_thread(until, lambda: len(rates()) >= 2 and rates(), "two rates", 30.0, 0.5)
        assert all(800 < r < 1250 for r in got), got  # 1000/s, scraped 2 s apart
        status, page = await asyncio.to_thread(_status, console.url + "/topics")
        assert status == 200 and "not shown" not in page and "data-spark-static" in page
    finally:
        await asyncio.to_thread(console.stop)
