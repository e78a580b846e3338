"""Spark's own `kafka` connector (spark-sql-kafka-0-10 4.2.0, Java kafka-clients 3.9.2) against
Odradek: batch and streaming reads, offset bounds, data loss, batch and streaming writes.

What is produced or consumed on the other side is done with kafka-python (tests/spark/helpers),
independently of the connector under test; the SparkSession (tests/spark/conftest.py) carries the
connector's jars. Every test also runs against a reference Apache Kafka 3.9 broker: the
expectations are Kafka's behaviour, not a description of Odradek's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.compat.reference_kafka import ReferenceKafka
from tests.spark.helpers import (
    COMMITTED,
    EVERY_RECORD,
    TXN_OUTCOMES,
    add_partitions,
    consume_all,
    create_topic,
    produce,
    transactions,
    unique_topic,
)

QUERY_TIMEOUT_S = 180


@pytest.fixture(scope="module", params=["odradek", "kafka-3.9"])
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[str]:
    """The broker under test: the Spark suite's Odradek, or Apache Kafka 3.9 (KRaft, one node,
    started for this module and stopped after its tests)."""
    if request.param == "odradek":
        yield request.getfixturevalue("spark_broker").bootstrap
        return
    kafka = ReferenceKafka(tmp_path_factory.mktemp("reference-kafka")).start()
    try:
        yield kafka.bootstrap
    finally:
        kafka.stop()


def read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-tests")
    try:
        admin.delete_records({TopicPartition(topic, partition): before})
    finally:
        admin.close()


def _utc(ms: int) -> datetime:
    """A record timestamp as Spark returns it in a UTC session (naive)."""
    return datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def test_batch_read_equals_produced_field_by_field(spark: Any, bootstrap: str) -> None:
    """Every column of `format("kafka")` against what kafka-python had acknowledged: null and
    non-null keys, empty and repeated headers, explicit CreateTime timestamps on three partitions,
    and a LogAppendTime topic whose broker-assigned times reach Spark as timestampType 1."""
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = create_topic(bootstrap, unique_topic("kbatch"), 3)
    base_ts = 1_700_000_000_000
    produced = produce(bootstrap, topic, (
        (None if i % 13 == 0 else f"k{i}".encode(), b"" if i % 17 == 0 else f"v{i}".encode() * (1 + i % 4),
         i % 3, base_ts + i * 7, [("h", str(i).encode()), ("h", b""), ("n", b"\x00\xff")] if i % 2 else [])
        for i in range(3_000)
    ))
    rows = read(spark, bootstrap, subscribe=topic, includeHeaders="true").collect()
    got = sorted((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestampType,
                  tuple((h.key, bytes(h.value)) for h in r.headers or ())) for r in rows)
    want = sorted((topic, p.partition, p.offset, p.key, p.value, _utc(p.timestamp_ms), 0, p.headers)
                  for p in produced)
    assert len(got) == 3_000
    assert got == want
    # read_committed: ListOffsets and Fetch at isolation level 1 (the last stable offset), which
    # without transactions is the high watermark: the same records
    committed = read(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    assert sorted(committed.selectExpr("partition", "offset").collect()) == sorted(
        (p.partition, p.offset) for p in produced)

    log_append = unique_topic("kbatch-lat")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-tests")
    try:
        admin.create_topics([NewTopic(log_append, 1, 1, topic_configs={
            "message.timestamp.type": "LogAppendTime"})])
    finally:
        admin.close()
    stamped = produce(bootstrap, log_append, ((b"k", f"{i}".encode(), 0, 1_000 + i, [])
                                              for i in range(20)))
    assert all(p.timestamp_ms > base_ts for p in stamped)  # the broker's clock, not ours
    rows = read(spark, bootstrap, subscribe=log_append).collect()
    assert sorted((r.offset, r.value, r.timestamp, r.timestampType) for r in rows) == sorted(
        (p.offset, p.value, _utc(p.timestamp_ms), 1) for p in stamped)


def test_batch_offset_bounds_as_json(spark: Any, bootstrap: str) -> None:
    """startingOffsets/endingOffsets as per-partition JSON, with the -2 (earliest) and -1 (latest)
    sentinels, and as the words; startingTimestamp and startingOffsetsByTimestamp through
    ListOffsets by time, including a time after every record."""
    topic = create_topic(bootstrap, unique_topic("kbounds"), 3)
    base = 1_650_000_000_000
    produce(bootstrap, topic, ((None, f"{i % 3}:{i // 3}".encode(), i % 3, base + (i // 3) * 1000, [])
                               for i in range(150)))  # 50 records per partition
    delete_records(bootstrap, topic, 2, 5)  # partition 2 starts at 5: -2 must mean 5, not 0

    def offsets(**options: str) -> list[tuple[int, int]]:
        rows = read(spark, bootstrap, subscribe=topic, **options).collect()
        assert all(r.value == f"{r.partition}:{r.offset}".encode() for r in rows)
        return sorted((r.partition, r.offset) for r in rows)

    assert offsets(startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": -2}}),
                   endingOffsets=json.dumps({topic: {"0": 20, "1": 3, "2": -1}})) == (
        [(0, o) for o in range(10, 20)] + [(1, o) for o in range(3)]
        + [(2, o) for o in range(5, 50)])
    assert offsets(startingOffsets="earliest", endingOffsets="latest") == (
        [(p, o) for p in (0, 1) for o in range(50)] + [(2, o) for o in range(5, 50)])
    assert offsets(startingOffsets=json.dumps({topic: {"0": 49, "1": 50, "2": 7}}),
                   endingOffsets=json.dumps({topic: {"0": -1, "1": -1, "2": 8}})) == [(0, 49), (2, 7)]
    # the first record stamped at or after base + 40 s is offset 40 in every partition
    assert offsets(startingTimestamp=str(base + 39_500)) == [
        (p, o) for p in (0, 1, 2) for o in range(40, 50)]
    assert offsets(startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 48_000,
                                                                  "1": base + 1, "2": base}})) == (
        [(0, 48), (0, 49)] + [(1, o) for o in range(1, 50)] + [(2, o) for o in range(5, 50)])
    # no record at or after the time: ListOffsets answers offset -1, which Spark refuses by
    # default and reads as "latest" (nothing) with the latest strategy
    after_all = str(base + 3_600_000)
    with pytest.raises(Exception, match=f"No offset matched from request of topic-partition "
                                        f"{topic}-[012] and timestamp {after_all}"):
        offsets(startingTimestamp=after_all)
    assert offsets(startingTimestamp=after_all, startingOffsetsByTimestampStrategy="latest") == []


def test_batch_sink_keys_headers_partitions_topics(spark: Any, bootstrap: str) -> None:
    """`df.write.format("kafka")` (an idempotent kafka-clients producer): keys (and null keys),
    null values, headers, an explicit partition column and a topic column, read back with
    kafka-python."""
    a = create_topic(bootstrap, unique_topic("ksink-a"), 2)
    b = create_topic(bootstrap, unique_topic("ksink-b"), 1)
    rows = [(a if i % 4 else b, None if i % 5 == 0 else f"k{i}", None if i == 7 else f"v{i}",
             [("i", str(i).encode()), ("t", b"\x01")] if i % 3 else [],
             None if i % 4 == 0 else i % 2)
            for i in range(400)]
    df = spark.createDataFrame(rows, "topic string, key string, value string, "
                                     "headers array<struct<key: string, value: binary>>, "
                                     "partition int")
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()

    got = Counter((t, p, k, v, h) for t in (a, b) for p, _o, k, v, h in consume_all(bootstrap, t))
    # topic a's rows all name their partition; topic b has a single one
    want = Counter((t, 0 if p is None else p, k and k.encode(), v and v.encode(), tuple(h))
                  for t, k, v, h, p in rows)
    assert got.total() == 400
    assert got == want


def test_sink_compression_codecs_and_null_header_values(spark: Any, bootstrap: str) -> None:
    """Batches compressed by kafka-clients (gzip, snappy, lz4, zstd: the Java framings) are
    stored and served back intact; a header with a null value stays null, an empty one empty."""
    df = spark.range(1_000).selectExpr(
        "CAST(id AS STRING) AS key", "repeat(CAST(id AS STRING), 20) AS value",
        "array(named_struct('key', 'null', 'value', CAST(NULL AS BINARY)),"
        "      named_struct('key', 'empty', 'value', CAST('' AS BINARY))) AS headers")
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        topic = create_topic(bootstrap, unique_topic(f"kcodec-{codec}"), 2)
        (df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("kafka.compression.type", codec).save())
        rows = read(spark, bootstrap, subscribe=topic, includeHeaders="true").collect()
        assert sorted(int(r.key) for r in rows) == list(range(1_000)), codec
        assert all(r.value == r.key * 20 for r in rows), codec
        assert {tuple((h.key, h.value) for h in r.headers) for r in rows} == {
            (("null", None), ("empty", b""))}, codec


def _start_kafka_to_kafka(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path,
                          **options: str) -> Any:
    """A Structured Streaming query from topic `source` to topic `sink` that writes, for every
    input record, its `partition:offset:value` (so the output names exactly what was consumed)."""
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source))
    for k, v in options.items():
        reader = reader.option(k, v)
    return (reader.load()
            .selectExpr("CAST(partition AS STRING) AS key",
                        "concat_ws(':', partition, offset, CAST(value AS STRING)) AS value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start())


def _run_to_end(query: Any) -> list[int]:
    """Wait (bounded) for an AvailableNow query; returns the rows of each micro-batch."""
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()  # a no-op once it ended; stops it if the wait timed out or failed
    assert finished, f"query still running after {QUERY_TIMEOUT_S}s"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_streaming_kafka_to_kafka_exactly_once_across_restart(spark: Any, bootstrap: str,
                                                            scratch: Path) -> None:
    """kafka -> kafka with a checkpoint, stopped and restarted with more input produced while it
    was stopped, into a partition added meanwhile too (CreatePartitions: Spark reads a new
    partition from its start): every input offset appears exactly once in the output, and
    maxOffsetsPerTrigger bounds every micro-batch."""
    source = create_topic(bootstrap, unique_topic("kstream-in"), 3)
    sink = create_topic(bootstrap, unique_topic("kstream-out"), 2)
    produce(bootstrap, source, ((None, f"a{i}".encode(), i % 3, None, []) for i in range(300)))
    checkpoint = scratch / "checkpoint"

    first = _run_to_end(_start_kafka_to_kafka(spark, bootstrap, source, sink, checkpoint,
                                              startingOffsets="earliest", maxOffsetsPerTrigger="120"))
    assert sum(first) == 300 and max(first) <= 120 and len(first) >= 3, first
    add_partitions(bootstrap, source, 4)
    produce(bootstrap, source, ((None, f"b{i}".encode(), i % 4, None, []) for i in range(200)))
    # startingOffsets only applies to a new checkpoint: "latest" here must not skip anything
    second = _run_to_end(_start_kafka_to_kafka(spark, bootstrap, source, sink, checkpoint,
                                               startingOffsets="latest", maxOffsetsPerTrigger="120"))
    assert sum(second) == 200 and max(second) <= 120, second

    inputs = {(p, o): v for p, o, _k, v, _h in consume_all(bootstrap, source)}
    outputs = []
    for _p, _o, key, value, _h in consume_all(bootstrap, sink):
        partition, offset, payload = value.decode().split(":")
        assert key.decode() == partition
        assert inputs[(int(partition), int(offset))] == payload.encode()
        outputs.append((int(partition), int(offset)))
    assert sorted(outputs) == sorted(inputs)  # each input offset once: no loss, no duplicate
    assert sorted(o for p, o in outputs if p == 3) == list(range(50))


def test_streaming_starting_offsets_json(spark: Any, bootstrap: str, scratch: Path) -> None:
    """A new streaming query starts at the JSON's offsets (-2 earliest, -1 latest, a number)."""
    source = create_topic(bootstrap, unique_topic("kstart-in"), 3)
    sink = create_topic(bootstrap, unique_topic("kstart-out"), 1)
    produce(bootstrap, source, ((None, f"{i}".encode(), i % 3, None, []) for i in range(90)))
    _run_to_end(_start_kafka_to_kafka(
        spark, bootstrap, source, sink, scratch / "checkpoint",
        startingOffsets=json.dumps({source: {"0": -2, "1": -1, "2": 25}})))
    got = sorted(tuple(map(int, v.decode().split(":")[:2]))
                 for *_, v, _h in consume_all(bootstrap, sink))
    assert got == [(0, o) for o in range(30)] + [(2, o) for o in range(25, 30)]


def test_streaming_fail_on_data_loss(spark: Any, bootstrap: str, scratch: Path) -> None:
    """Records deleted (DeleteRecords) past the checkpointed offset while the query was stopped:
    with failOnDataLoss=true (the default) the restarted query fails and says data was lost; with
    false it resumes at the new log start offset."""
    source = create_topic(bootstrap, unique_topic("kloss-in"), 1)
    sink = create_topic(bootstrap, unique_topic("kloss-out"), 1)
    produce(bootstrap, source, ((None, f"{i}".encode(), 0, None, []) for i in range(20)))
    checkpoint = scratch / "checkpoint"
    assert sum(_run_to_end(_start_kafka_to_kafka(spark, bootstrap, source, sink, checkpoint,
                                                 startingOffsets="earliest"))) == 20
    produce(bootstrap, source, ((None, f"{i}".encode(), 0, None, []) for i in range(20, 50)))
    delete_records(bootstrap, source, 0, 35)

    query = _start_kafka_to_kafka(spark, bootstrap, source, sink, checkpoint)
    try:
        with pytest.raises(Exception) as failure:
            query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    # KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE: the executor's Fetch at 20 got
    # OFFSET_OUT_OF_RANGE, as from Kafka once the log start offset passed it
    message = str(failure.value)
    assert "Some data may have been lost" in message, message
    assert f"Could not read records in offset [20, 50) for topic partition {source}-0" in message
    assert "failOnDataLoss" in message
    assert len(consume_all(bootstrap, sink)) == 20  # nothing of the lost batch was written

    assert sum(_run_to_end(_start_kafka_to_kafka(spark, bootstrap, source, sink, checkpoint,
                                                 failOnDataLoss="false"))) == 15
    got = [tuple(map(int, v.decode().split(":")[1:])) for *_, v, _h in consume_all(bootstrap, sink)]
    assert sorted(got) == [(o, o) for o in range(20)] + [(o, o) for o in range(35, 50)]


def test_batch_read_committed_skips_aborted_and_open_transactions(spark: Any, bootstrap: str) -> None:
    """kafka.isolation.level=read_committed reads the committed transactions' records only, and
    stops at the last stable offset (the open transaction's first record); read_uncommitted (the
    default) reads every record, aborted and open ones included. Control records are never rows."""
    topic = create_topic(bootstrap, unique_topic("ktxn"), 3)
    with transactions(bootstrap, topic, 3, TXN_OUTCOMES):
        committed = read(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
        assert sorted(committed.select("partition", "offset", "value").collect()) == COMMITTED
        uncommitted = read(spark, bootstrap, subscribe=topic).select("partition", "offset", "value").collect()
        assert sorted(uncommitted) == EVERY_RECORD
