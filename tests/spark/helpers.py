"""Broker-side helpers for the Spark tests: create topics, produce and consume with kafka-python
(transactions with confluent-kafka),
independently of the data source under test."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


def _spark_version() -> tuple[int, int]:
    from pyspark import __version__

    major, minor = __version__.split(".")[:2]
    return int(major), int(minor)

_names = itertools.count()

# PySpark gave Python streaming sources admission control (latestOffset(start, limit),
# maxOffsetsPerTrigger under Trigger.AvailableNow) in 4.2. On 4.0/4.1 the engine asks for the
# first batch's end before it hands out the start, and runs AvailableNow as one batch: every
# record still arrives exactly once, but the batch sizes differ.
ADMISSION_CONTROL = _spark_version() >= (4, 2)


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-tests")
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-tests")
    try:
        admin.create_partitions({name: NewPartitions(total)})
    finally:
        admin.close()


@dataclass(frozen=True)
class Produced:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...]


def produce(bootstrap: str, topic: str,
            records: Iterable[tuple[bytes | None, bytes | None, int | None, int | None,
                                    list[tuple[str, bytes]]]]) -> list[Produced]:
    """Send (key, value, partition, timestamp_ms, headers) records and return what the broker
    acknowledged: the partition, offset and timestamp each record got."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=256 * 1024)
    try:
        sent = []
        for key, value, partition, ts, headers in records:
            fut = producer.send(topic, key=key, value=value, partition=partition,
                                timestamp_ms=ts, headers=headers)
            sent.append((key, value, headers, fut))
        producer.flush()
        out = []
        for key, value, headers, fut in sent:
            md = fut.get(timeout=30)
            out.append(Produced(key, value, md.partition, md.offset, md.timestamp,
                                tuple(headers)))
        return out
    finally:
        producer.close()


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None, bytes | None,
                                                          tuple[tuple[str, bytes], ...]]]:
    """Every record of `topic` as (partition, offset, key, value, headers), read to the high
    watermark of each partition with a group-less kafka-python consumer."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        out = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for recs in consumer.poll(timeout_ms=1000).values():
                out.extend((r.partition, r.offset, r.key, r.value, tuple(r.headers))
                           for r in recs)
        return sorted(out)
    finally:
        consumer.close()


# `transactions(..., 3, TXN_OUTCOMES)` leaves, per partition p: "0-p" committed at offset 0 (its
# marker at 1), "1-p" aborted at 2, "2-p" committed at 4, "3-p" at 6 in a transaction left open;
# as (partition, offset, value) rows, what read_committed and read_uncommitted return
TXN_OUTCOMES = ("commit", "abort", "commit", "open")
COMMITTED = [(p, o, f"{i}-{p}".encode()) for p in range(3) for o, i in ((0, 0), (4, 2))]
EVERY_RECORD = [(p, 2 * i, f"{i}-{p}".encode()) for p in range(3) for i in range(4)]


class OpenTransaction:
    """The transaction `transactions` left open: `commit` ends it (markers written) before the
    block does; otherwise it is aborted when the block ends."""

    def __init__(self, producer: Any, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer, self.bootstrap, self.topic, self.partitions = producer, bootstrap, topic, partitions
        self.open = False

    def end(self, commit: bool) -> None:
        from tests.txn_requests import until_stable

        (self.producer.commit_transaction if commit else self.producer.abort_transaction)(30)
        self.open = False
        until_stable(int(self.bootstrap.rsplit(":", 1)[1]), self.topic, self.partitions)

    def commit(self) -> None:
        self.end(commit=True)


@contextlib.contextmanager
def transactions(bootstrap: str, topic: str, partitions: int, outcomes: Sequence[str]) -> Iterator[OpenTransaction]:
    """Transactions of one confluent-kafka transactional producer, one record "<i>-<p>" to every
    partition p in the i-th, each committed ("commit") or aborted ("abort") in turn; the markers
    of all of them written (the last stable offsets reach the high watermarks) before the block
    runs. A last "open" one is left open while the block runs (it holds the last stable offsets at
    its first records): the block may commit it, else it is aborted after the block."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-{topic}"})
    producer.init_transactions(60)
    txn = OpenTransaction(producer, bootstrap, topic, partitions)
    for i, outcome in enumerate(outcomes):
        producer.begin_transaction()
        txn.open = True
        for p in range(partitions):
            producer.produce(topic, f"{i}-{p}".encode(), partition=p)
        assert producer.flush(30) == 0
        if outcome == "open":
            assert i == len(outcomes) - 1, "only the last transaction can be left open"
            break
        txn.end(commit=outcome == "commit")
    try:
        yield txn
    finally:
        if txn.open:
            txn.end(commit=False)
