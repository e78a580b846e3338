"""Structured Streaming through `format("odradek")`: checkpointed reads, rate limits, restarts,
new partitions, and the streaming sink, against a real broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import (
    ADMISSION_CONTROL,
    COMMITTED,
    TXN_OUTCOMES,
    add_partitions,
    consume_all,
    create_topic,
    produce,
    transactions,
    unique_topic,
)

QUERY_TIMEOUT_S = 120


def start_available_now(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path,
                        **options: str) -> Any:
    """Start `topic` -> Parquet with Trigger.AvailableNow; `topic` is a subscribePattern
    instead when that option is given as "" (the pattern is `topic`)."""
    how = "subscribePattern" if options.pop("subscribePattern", None) == "" else "subscribe"
    reader = (spark.readStream.format("odradek")
              .option("kafka.bootstrap.servers", bootstrap)
              .option(how, topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    return (reader.load()
            .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start())


def run_available_now(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path,
                      **options: str) -> list[int]:
    """Run `topic` -> Parquet with Trigger.AvailableNow to completion; return the number of
    input rows of each micro-batch that read something."""
    query = start_available_now(spark, bootstrap, topic, out, checkpoint, **options)
    assert query.awaitTermination(QUERY_TIMEOUT_S), "streaming query did not finish"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def read_parquet(spark: Any, path: Path) -> list[tuple[int, int, str]]:
    return sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(str(path)).collect())


def test_streaming_read_exactly_once_across_restart(spark: Any, bootstrap: str,
                                                    scratch: Path) -> None:
    topic = create_topic(bootstrap, unique_topic("stream"), 2)
    first = produce(bootstrap, topic, ((None, str(i).encode(), i % 2, None, [])
                                       for i in range(1000)))
    out, checkpoint = scratch / "out", scratch / "checkpoint"

    batches = run_available_now(spark, bootstrap, topic, out, checkpoint,
                                startingOffsets="earliest", maxOffsetsPerTrigger="300")
    assert batches == ([300, 300, 300, 100] if ADMISSION_CONTROL else [1000])
    want = sorted((p.partition, p.offset, p.value.decode()) for p in first)
    assert read_parquet(spark, out) == want

    # Stopped. More data arrives, including in a partition created meanwhile.
    add_partitions(bootstrap, topic, 3)
    second = produce(bootstrap, topic, ((None, f"new-{i}".encode(), i % 3, None, [])
                                        for i in range(450)))
    batches = run_available_now(spark, bootstrap, topic, out, checkpoint,
                                startingOffsets="earliest", maxOffsetsPerTrigger="300")
    assert batches == ([300, 150] if ADMISSION_CONTROL else [450])
    want += sorted((p.partition, p.offset, p.value.decode()) for p in second)
    assert read_parquet(spark, out) == sorted(want)  # every record exactly once

    # Nothing new: a restart reads nothing.
    assert run_available_now(spark, bootstrap, topic, out, checkpoint) == []


def test_streaming_starts_at_latest_by_default(spark: Any, bootstrap: str,
                                               scratch: Path) -> None:
    topic = create_topic(bootstrap, unique_topic("latest"), 1)
    produce(bootstrap, topic, ((None, b"old", 0, None, []) for _ in range(5)))
    out, checkpoint = scratch / "out", scratch / "checkpoint"
    assert run_available_now(spark, bootstrap, topic, out, checkpoint) == []
    produce(bootstrap, topic, ((None, b"new", 0, None, []) for _ in range(3)))
    assert run_available_now(spark, bootstrap, topic, out, checkpoint) == [3]
    assert read_parquet(spark, out) == [(0, 5, "new"), (0, 6, "new"), (0, 7, "new")]


def test_streaming_write_round_trips(spark: Any, bootstrap: str, scratch: Path) -> None:
    source = create_topic(bootstrap, unique_topic("rt-src"), 2)
    sink = create_topic(bootstrap, unique_topic("rt-dst"), 3)
    produced = produce(bootstrap, source, (
        (f"k{i}".encode(), f"v{i}".encode(), i % 2, None, [("i", str(i).encode())])
        for i in range(500)))

    query = (spark.readStream.format("odradek")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source)
             .option("startingOffsets", "earliest")
             .option("includeHeaders", "true")
             .option("maxOffsetsPerTrigger", "200")
             .load()
             .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "headers")
             .writeStream.format("odradek")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink)
             .option("checkpointLocation", str(scratch / "checkpoint"))
             .trigger(availableNow=True)
             .start())
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == (
        [200, 200, 100] if ADMISSION_CONTROL else [500])

    got = sorted((k, v, h) for _p, _o, k, v, h in consume_all(bootstrap, sink))
    want = sorted((p.key, p.value.upper(), p.headers) for p in produced)
    assert got == want


def test_streaming_refuses_ending_offsets(spark: Any, bootstrap: str, scratch: Path) -> None:
    df = (spark.readStream.format("odradek")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", "any")
          .option("endingOffsets", "latest")
          .load())
    with pytest.raises(Exception, match="option 'endingOffsets' is not valid in streaming"):
        query = (df.writeStream.format("memory").queryName("refused")
                 .option("checkpointLocation", str(scratch / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(QUERY_TIMEOUT_S)


def test_streaming_subscribe_pattern_finds_topics_created_later(spark: Any, bootstrap: str,
                                                                scratch: Path) -> None:
    """subscribePattern matches whole topic names (Java's Pattern.matches, as Spark's kafka
    source); a matching topic created while the query is stopped is read from its start."""
    prefix = unique_topic("pat")
    first = create_topic(bootstrap, f"{prefix}-a", 2)
    other = create_topic(bootstrap, f"x{prefix}-a", 1)  # contains the pattern, does not match it
    produce(bootstrap, first, ((None, f"a{i}".encode(), i % 2, None, []) for i in range(40)))
    produce(bootstrap, other, ((None, b"no", 0, None, []) for _ in range(5)))
    out, checkpoint = scratch / "out", scratch / "checkpoint"
    pattern = f"{prefix}-.*"

    assert sum(run_available_now(spark, bootstrap, pattern, out, checkpoint, subscribePattern="",
                                 startingOffsets="earliest")) == 40
    second = create_topic(bootstrap, f"{prefix}-b", 1)
    produce(bootstrap, second, ((None, f"b{i}".encode(), 0, None, []) for i in range(7)))
    produce(bootstrap, first, ((None, b"a-more", 0, None, []) for _ in range(3)))
    assert sum(run_available_now(spark, bootstrap, pattern, out, checkpoint, subscribePattern="",
                                 startingOffsets="earliest")) == 10

    rows = spark.read.parquet(str(out)).collect()
    assert sorted({r.topic for r in rows}) == [first, second]
    assert sorted(r.value for r in rows if r.topic == second) == sorted(f"b{i}" for i in range(7))
    assert len(rows) == len({(r.topic, r.partition, r.offset) for r in rows}) == 50


def test_streaming_data_loss_fails_or_skips_per_fail_on_data_loss(spark: Any, bootstrap: str,
                                                                  scratch: Path) -> None:
    """Records deleted past the checkpointed offset while the query was stopped: with
    failOnDataLoss (the default) the query fails naming the lost range; with false it goes on
    from the log start offset."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    topic = create_topic(bootstrap, unique_topic("sloss"), 1)
    produce(bootstrap, topic, ((None, str(i).encode(), 0, None, []) for i in range(20)))
    out, checkpoint = scratch / "out", scratch / "checkpoint"
    assert run_available_now(spark, bootstrap, topic, out, checkpoint,
                             startingOffsets="earliest") == [20]
    produce(bootstrap, topic, ((None, str(i).encode(), 0, None, []) for i in range(20, 50)))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-tests")
    try:
        admin.delete_records({TopicPartition(topic, 0): 35})
    finally:
        admin.close()

    query = start_available_now(spark, bootstrap, topic, out, checkpoint)
    with pytest.raises(Exception, match=r"offsets \[20, 35\) were deleted"):
        query.awaitTermination(QUERY_TIMEOUT_S)
    assert query.exception() is not None
    assert read_parquet(spark, out) == [(0, i, str(i)) for i in range(20)]  # nothing written

    assert run_available_now(spark, bootstrap, topic, out, checkpoint,
                             failOnDataLoss="false") == [15]
    assert read_parquet(spark, out) == [(0, i, str(i)) for i in range(20)] + [
        (0, i, str(i)) for i in range(35, 50)]


def test_streaming_read_committed_waits_for_the_open_transaction(spark: Any, bootstrap: str, scratch: Path) -> None:
    """kafka.isolation.level=read_committed in a stream: a micro-batch ends at the last stable
    offset, so the records of the transaction still open are not read (nor skipped); once it is
    committed the next run reads them, and the aborted records never. Each partition's batch range
    ends on an invisible transaction marker, which the read must not wait for."""
    topic = create_topic(bootstrap, unique_topic("stxn"), 3)
    out, checkpoint = scratch / "out", scratch / "checkpoint"
    options = {"startingOffsets": "earliest", "kafka.isolation.level": "read_committed",
               "kafkaConsumer.pollTimeoutMs": "20000"}
    with transactions(bootstrap, topic, 3, TXN_OUTCOMES) as open_transaction:
        run_available_now(spark, bootstrap, topic, out, checkpoint, **options)
        assert read_parquet(spark, out) == [(p, o, v.decode()) for p, o, v in COMMITTED]
        open_transaction.commit()
        assert run_available_now(spark, bootstrap, topic, out, checkpoint, **options) == [3]
    assert read_parquet(spark, out) == sorted([(p, o, v.decode()) for p, o, v in COMMITTED]
                                              + [(p, 6, f"3-{p}") for p in range(3)])
