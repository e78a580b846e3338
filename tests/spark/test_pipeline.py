"""The clickstream pipeline end to end: generated clicks in, windowed counts out (topic and
Parquet), checked against counts computed independently in Python."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spark_connector.pipelines import clickstream
from tests.spark.helpers import ADMISSION_CONTROL, consume_all, unique_topic

START_MS = 1_700_000_000_000  # a multiple of the 10 s window


def _ms(dt: datetime) -> int:
    return int(dt.replace(tzinfo=UTC).timestamp() * 1000)


@pytest.mark.skipif(not ADMISSION_CONTROL, reason=(
    "the watermark closes windows between micro-batches; PySpark < 4.2 runs AvailableNow as a "
    "single batch for Python sources, so --available-now emits no closed window there"))
def test_clickstream_counts_per_page_and_window(spark: Any, bootstrap: str,
                                                scratch: Path) -> None:
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
                              available_now=True, max_offsets_per_trigger=250)
    assert query.awaitTermination(180)
    assert query.exception() is None

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
