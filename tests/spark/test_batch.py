"""Batch reads and writes through `format("odradek")` against a real broker."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.spark.helpers import (
    COMMITTED,
    EVERY_RECORD,
    TXN_OUTCOMES,
    consume_all,
    create_topic,
    produce,
    transactions,
    unique_topic,
)


def read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_10k_equals_produced(spark: Any, bootstrap: str) -> None:
    topic = create_topic(bootstrap, unique_topic("batch10k"), 3)
    base_ts = 1_700_000_000_000
    produced = produce(bootstrap, topic, (
        (None if i % 97 == 0 else f"k{i}".encode(), f"value-{i}".encode() * (1 + i % 5),
         i % 3, base_ts + i, [("h", str(i).encode()), ("n", b"")] if i % 2 else [])
        for i in range(10_000)
    ))

    started = time.perf_counter()
    rows = read(spark, bootstrap, subscribe=topic, includeHeaders="true").collect()
    elapsed = time.perf_counter() - started
    print(f"batch read of 10,000 records: {elapsed:.2f}s, {10_000 / elapsed:,.0f} rows/s")

    got = sorted(
        (r.partition, r.offset, r.key, r.value, r.timestamp, r.timestampType,
         tuple((h.key, bytes(h.value)) for h in r.headers), r.topic)
        for r in rows
    )
    want = sorted(
        (p.partition, p.offset, p.key, p.value,
         datetime.fromtimestamp(p.timestamp_ms / 1000, UTC).replace(tzinfo=None), 0,
         p.headers, topic)
        for p in produced
    )
    assert len(got) == 10_000
    assert got == want


def test_batch_read_offset_bounds_and_min_partitions(spark: Any, bootstrap: str) -> None:
    topic = create_topic(bootstrap, unique_topic("bounds"), 2)
    produce(bootstrap, topic, ((None, f"{p}:{i}".encode(), p, None, []) for p in (0, 1)
                               for i in range(100)))

    df = read(spark, bootstrap, subscribe=topic,
              startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
              endingOffsets=f'{{"{topic}": {{"0": 60, "1": -1}}}}',
              minPartitions="6")
    assert df.rdd.getNumPartitions() == 6  # 50 + 100 records cut into ~6 equal tasks
    rows = df.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == (
        [(0, o) for o in range(10, 60)] + [(1, o) for o in range(100)])
    assert all(r.value == f"{r.partition}:{r.offset}".encode() for r in rows)
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,"
                                        "partition:int,offset:bigint,timestamp:timestamp,"
                                        "timestampType:int>")


def test_batch_read_by_assign_and_timestamp(spark: Any, bootstrap: str) -> None:
    topic = create_topic(bootstrap, unique_topic("ts"), 2)
    base = 1_600_000_000_000
    produce(bootstrap, topic, ((None, str(i).encode(), i % 2, base + i * 1000, [])
                               for i in range(20)))
    rows = read(spark, bootstrap, assign=f'{{"{topic}": [1]}}',
                startingTimestamp=str(base + 10_000)).collect()
    # partition 1 holds the odd i; those stamped at or after base+10s are 11, 13, ..., 19
    assert sorted(int(r.value) for r in rows) == [11, 13, 15, 17, 19]
    assert {r.partition for r in rows} == {1}


def test_batch_write_with_explicit_partitions(spark: Any, bootstrap: str) -> None:
    topic = create_topic(bootstrap, unique_topic("write"), 4)
    data = [(f"k{i}", f"v{i}".encode(), i % 4, [(("src", b"spark"))]) for i in range(200)]
    df = spark.createDataFrame(
        data, "key string, value binary, partition int, "
              "headers array<struct<key string, value binary>>")
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).mode("append").save()

    records = consume_all(bootstrap, topic)
    assert len(records) == 200
    for partition, _offset, key, value, headers in records:
        i = int(key.decode()[1:])
        assert partition == i % 4
        assert value == f"v{i}".encode()
        assert headers == (("src", b"spark"),)
    # each partition got its 50 records in the order Spark wrote them (one task per partition)
    assert sorted({(p, o) for p, o, *_ in records}) == [(p, o) for p in range(4) for o in range(50)]


def test_batch_write_topic_column_and_string_values(spark: Any, bootstrap: str) -> None:
    a = create_topic(bootstrap, unique_topic("col-a"), 1)
    b = create_topic(bootstrap, unique_topic("col-b"), 1)
    df = spark.createDataFrame([(a, "x"), (b, "y"), (a, "z")], "topic string, value string")
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    assert [r[3] for r in consume_all(bootstrap, a)] == [b"x", b"z"]
    assert [r[3] for r in consume_all(bootstrap, b)] == [b"y"]


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t", "startingOffset": "earliest"},
     "unknown option 'startingoffset' for the odradek batch read"),
    ({"subscribe": "t", "assign": '{"t": [0]}'},
     "Only one of the options 'subscribe', 'subscribePattern', 'assign' must be specified"),
    ({}, "One of the options 'subscribe', 'subscribePattern', 'assign' must be specified"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": 5}'},
     "option 'startingOffsets': malformed JSON"),
    ({"subscribe": "t", "startingOffsets": '{"t": [5]}'},
     "option 'startingOffsets': topic 't' must map to an object"),
    ({"subscribe": "t", "endingOffsets": "earliest"},
     "option 'endingOffsets': earliest is not allowed for batch queries"),
    ({"subscribe": "t", "kafka.group.id": "g"},
     "option 'kafka.group.id' is not supported"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "many"},
     "option 'maxOffsetsPerTrigger' must be an integer"),
])
def test_bad_options_are_refused_clearly(spark: Any, bootstrap: str, options: dict[str, str],
                                         message: str) -> None:
    with pytest.raises(Exception, match="OptionError") as info:
        read(spark, bootstrap, **options).collect()
    assert message in str(info.value)


def test_bad_write_options_are_refused(spark: Any, bootstrap: str) -> None:
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="no 'topic' column and no 'topic' option"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
            .mode("append").save()
    with pytest.raises(Exception, match="option 'subscribe' does not apply to a batch write"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", "t").option("subscribe", "t").mode("append").save()


def test_data_loss_is_detected(spark: Any, bootstrap: str) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    topic = create_topic(bootstrap, unique_topic("loss"), 1)
    produce(bootstrap, topic, ((None, str(i).encode(), 0, None, []) for i in range(30)))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-tests")
    try:
        admin.delete_records({TopicPartition(topic, 0): 10})
    finally:
        admin.close()

    explicit = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(Exception, match=r"offsets \[0, 10\) were deleted") as info:
        read(spark, bootstrap, subscribe=topic, startingOffsets=explicit).collect()
    assert "failOnDataLoss=false" in str(info.value)
    rows = read(spark, bootstrap, subscribe=topic, startingOffsets=explicit,
                failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(10, 30))


def test_batch_read_committed_skips_aborted_and_open_transactions(spark: Any, bootstrap: str) -> None:
    """`kafka.isolation.level` as Spark's kafka source takes it (tests/spark/test_kafka_connector.py
    checks the same against Spark's and Kafka's): read_committed gives the committed transactions'
    records only and ends at the last stable offset, before the open transaction; read_uncommitted
    (the default) every record. A partition's range ends past its last visible record here (the
    aborted records and the markers are invisible), which the read must not wait for."""
    topic = create_topic(bootstrap, unique_topic("txn"), 3)
    with transactions(bootstrap, topic, 3, TXN_OUTCOMES):
        committed = read(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed",
                                                                 "kafkaConsumer.pollTimeoutMs": "20000"})
        assert sorted(committed.select("partition", "offset", "value").collect()) == COMMITTED
        uncommitted = read(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_uncommitted"})
        assert sorted(uncommitted.select("partition", "offset", "value").collect()) == EVERY_RECORD
        default = read(spark, bootstrap, subscribe=topic).select("partition", "offset", "value").collect()
        assert sorted(default) == EVERY_RECORD
