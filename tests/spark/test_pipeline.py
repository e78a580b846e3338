"""The clickstream pipeline end to end: generated clicks in, windowed counts out (topic and
Parquet), checked against counts computed independently in Python. Each test runs twice, with
the `odradek` Python data source and with Spark's own `kafka` connector (`--source kafka`): the
same expected counts for both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spark_connector.pipelines import clickstream
from tests.broker_process import BrokerProcess
from tests.spark.helpers import ADMISSION_CONTROL, consume_all, unique_topic

SOURCES = pytest.mark.parametrize("source", clickstream.SOURCES)

START_MS = 1_700_000_000_000  # a multiple of the 10 s window


def _ms(dt: datetime) -> int:
    return int(dt.replace(tzinfo=UTC).timestamp() * 1000)


@pytest.mark.skipif(not ADMISSION_CONTROL, reason=(
    "the watermark closes windows between micro-batches; PySpark < 4.2 runs AvailableNow as a "
    "single batch for Python sources, so --available-now emits no closed window there"))
@SOURCES
def test_clickstream_counts_per_page_and_window(spark: Any, bootstrap: str, scratch: Path,
                                                source: str) -> None:
    clicks_topic, counts_topic = unique_topic("clicks"), unique_topic("page-counts")
    clickstream.ensure_topics(bootstrap, clicks_topic, counts_topic, partitions=2)
    clicks = clickstream.generate_clicks(600, START_MS, spacing_ms=100)
    clickstream.produce_clicks(bootstrap, clicks, clicks_topic)
    expected = clickstream.expected_counts(clicks)
    # 60 s of clicks, watermark 10 s behind the last: the windows up to [30 s, 40 s) are final
    assert sorted({w for w, _ in expected}) == [START_MS + i * 10_000 for i in range(4)]

    out = scratch / "page_counts"
    query = clickstream.start(spark, bootstrap, out, scratch / "checkpoint",
                              clicks_topic=clicks_topic, counts_topic=counts_topic,
                              available_now=True, max_offsets_per_trigger=250, source=source)
    assert query.awaitTermination(180)
    assert query.exception() is None
    described = {p["sources"][0]["description"] for p in query.recentProgress}
    assert all(d.startswith("KafkaV2[") == (source == "kafka") for d in described), described

    parquet = {(_ms(r.window_start), r.page): r["count"]
               for r in clickstream.read_counts(spark, out)}
    assert parquet == expected

    topic = {}
    for _p, _o, key, value, _h in consume_all(bootstrap, counts_topic):
        row = json.loads(value)
        assert key.decode() == row["page"]
        start = datetime.fromisoformat(row["window_start"]).replace(tzinfo=UTC)
        topic[(int(start.timestamp() * 1000), row["page"])] = row["count"]
    assert topic == expected


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[str]:
    """A broker of one test's own: the command uses the fixed topic names."""
    b = BrokerProcess(tmp_path / "data", overrides=["num.partitions=1"]).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


@pytest.mark.skipif(not ADMISSION_CONTROL, reason=(
    "PySpark < 4.2 runs AvailableNow as a single batch for Python sources: no window closes"))
@SOURCES
def test_pipeline_command_end_to_end(own_broker: str, scratch: Path, source: str) -> None:
    """`odradek pipeline clickstream --available-now [--source kafka]` as a user runs it (its
    own Spark, the fixed topics `clicks` and `page-counts`; the kafka connector's jars found in
    build/java without an option): it prints every finished window and the total, which the
    generator's seed fixes, and the counts land on the topic."""
    import subprocess
    import sys

    clicks = clickstream.generate_clicks(600, START_MS, spacing_ms=100)
    expected = clickstream.expected_counts(clicks)
    odradek = Path(sys.executable).with_name("odradek")
    proc = subprocess.run(
        [str(odradek), "pipeline", "clickstream", "--bootstrap-server", own_broker,
         "--available-now", "--events", "600", "--output", str(scratch / "out"),
         "--source", source],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Spark's kafka source (only) records its initial offsets in the checkpoint's sources/0/0
    assert (scratch / "out" / "_checkpoint" / "sources" / "0" / "0").is_file() == (source == "kafka")
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("window (UTC)")
    assert lines[-1] == f"{sum(expected.values())} clicks counted in finished windows"
    printed = sorted((ln.split()[1], int(ln.split()[2])) for ln in lines[1:-1])
    assert printed == sorted((page, n) for (_w, page), n in expected.items())
    on_topic = [json.loads(v) for _p, _o, _k, v, _h in consume_all(own_broker, clickstream.COUNTS_TOPIC)]
    assert sorted((r["page"], r["count"]) for r in on_topic) == printed
