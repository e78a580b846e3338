"""KIP-467 per-record errors in Produce responses, through a real broker over TCP.

Kafka's LogValidator checks every record of a batch (a key on a compacted topic, a CreateTime
timestamp within message.timestamp.before/after.max.ms, no LogAppendTime set by a producer) and
refuses the whole batch: INVALID_RECORD, or INVALID_TIMESTAMP when a timestamp is among the
reasons; from Produce v8 the response lists each bad record (record_errors: batch_index and
message) and sets error_message. Nothing of the batch is appended, other partitions of the
request are not affected, and an idempotent producer's sequence does not advance.

The messages are Kafka 3.9's, character for character (LogValidator.validateKey /
validateTimestamp / processRecordErrors); tests/compat/differential has the same requests
answered by Kafka itself.

The Python clients, as they behave against Kafka 3.9.2 too: neither retries the valid records of
a refused batch (nor does Kafka's Java producer, tests/compat/test_java_client.py). kafka-python
fails each listed record with the broker's message and the others with a generic KafkaError, as
the Java producer does; confluent-kafka (librdkafka 2.16) fails the listed records with the
partition's error code and the others with _INVALID_DIFFERENT_RECORD (a batch with a single
listed record: every record with the partition's error), and does not pass the broker's
messages on to the application.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import CreateTopicsRequest, ListOffsetsRequest, ProduceRequest
from protocol.messages import create_topics_request as ct
from protocol.messages import list_offsets_request as lr
from protocol.messages import produce_request as pr
from protocol.records import LOG_APPEND_TIME, Record, build_batch
from tests.broker_process import BrokerProcess, module_broker
from tests.raw_client import RawConnection

NO_KEY = "Compacted topic cannot accept message without key in topic partition {tp}"


broker = module_broker("record-errors", ["num.partitions=1"])


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[RawConnection]:
    with RawConnection(broker.port, "record-errors") as c:
        yield c


def create_topic(conn: RawConnection, name: str, partitions: int = 1, **configs: str) -> None:
    resp = conn.call(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[ct.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])]))
    assert resp.topics[0].error_code == 0, resp.topics[0]


def batch(keys: list[bytes | None], base_ts: int, deltas: list[int] | None = None, **kw: Any) -> bytes:
    deltas = deltas or [0] * len(keys)
    return build_batch([Record(0, d, i, k, b"value-%d" % i) for i, (k, d) in enumerate(zip(keys, deltas, strict=True))],
                       base_timestamp=base_ts, **kw)


def produce(conn: RawConnection, topic: str, records: bytes, version: int = 9, partition: int = 0) -> Any:
    resp = conn.call(0, version, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name=topic, partition_data=[pr.PartitionProduceData(index=partition, records=records)])]))
    return resp.responses[0].partition_responses[0]


def end_offset(conn: RawConnection, topic: str, partition: int = 0) -> int:
    resp = conn.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[lr.ListOffsetsTopic(
        name=topic, partitions=[lr.ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
    return resp.topics[0].partitions[0].offset


def errors(p: Any) -> list[tuple[int, str | None]]:
    return [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]


def summary(errs: list[tuple[int, str]]) -> str:
    """processRecordErrors' message for INVALID_RECORD (Java's List.toString of RecordErrors)."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errs[:3])
    return (f"One or more records have been rejected due to {len(errs)} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]")


@pytest.mark.parametrize(("version", "codec"), [(8, 0), (9, 3), (11, 1)])
def test_keyless_records_on_a_compacted_topic_are_listed(conn: RawConnection, version: int, codec: int) -> None:
    topic = f"compacted-v{version}"
    create_topic(conn, topic, **{"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    p = produce(conn, topic, batch([b"k0", None, b"k2", None, b"k4"], now, compression=codec), version)
    no_key = NO_KEY.format(tp=f"{topic}-0")
    expected = [(1, no_key), (3, no_key)]
    assert (p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset) == (ErrorCode.INVALID_RECORD, -1, -1, 0)
    assert errors(p) == expected
    assert p.error_message == summary(expected)
    assert end_offset(conn, topic) == 0  # nothing of the batch was appended

    p = produce(conn, topic, batch([None] * 5, now, compression=codec), version)  # five errors, three shown
    assert errors(p) == [(i, no_key) for i in range(5)]
    assert p.error_message == summary(errors(p))

    p = produce(conn, topic, batch([b"k0", b"k2"], now, compression=codec), version)
    assert (p.error_code, p.base_offset, errors(p), p.error_message) == (0, 0, [], None)
    assert end_offset(conn, topic) == 2


def test_produce_v7_has_the_error_code_only(conn: RawConnection) -> None:
    create_topic(conn, "compacted-v7", **{"cleanup.policy": "compact,delete"})
    p = produce(conn, "compacted-v7", batch([b"k", None], int(time.time() * 1000)), version=7)
    assert (p.error_code, p.base_offset, errors(p), p.error_message) == (ErrorCode.INVALID_RECORD, -1, [], None)


def _window(message: str) -> tuple[int, int]:
    m = re.search(r"The timestamp should be within \[(-?\d+), (-?\d+)\]$", message)
    assert m, message
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("configs", [
    {"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "60000"},
    {"message.timestamp.difference.max.ms": "60000"},  # deprecated, the default of both (Kafka 3.6+)
])
def test_timestamps_out_of_range_are_listed(conn: RawConnection, configs: dict[str, str]) -> None:
    topic = "ts-" + str(len(configs))
    create_topic(conn, topic, partitions=2, **configs)
    before = int(configs.get("message.timestamp.before.max.ms", configs.get("message.timestamp.difference.max.ms")))
    after = int(configs.get("message.timestamp.after.max.ms", configs.get("message.timestamp.difference.max.ms")))
    day = 86_400_000
    t0 = int(time.time() * 1000)
    # in range, too old, in range, too new, too old: the base timestamp itself is in range, so
    # only the records tell (timestamp deltas are signed)
    deltas = [0, -day, 1000, day, -2 * day]
    resp = conn.call(0, 9, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[pr.TopicProduceData(
        name=topic, partition_data=[
            pr.PartitionProduceData(index=0, records=batch([b"a"] * 5, t0, deltas, compression=4)),
            pr.PartitionProduceData(index=1, records=batch([b"b"] * 2, t0)),
        ])]))
    t1 = int(time.time() * 1000)
    bad, good = resp.responses[0].partition_responses
    assert (bad.error_code, bad.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1)
    assert bad.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in errors(bad)] == [1, 3, 4]
    lo, hi = _window(errors(bad)[0][1] or "")
    assert t0 <= lo + before <= t1 and hi - lo == before + after  # the broker's clock at the append
    window = f"The timestamp should be within [{lo}, {hi}]"
    assert errors(bad) == [
        (i, f"Timestamp {t0 + deltas[i]} of message with offset {i} is out of range. {window}") for i in (1, 3, 4)
    ]
    assert (good.error_code, good.base_offset, errors(good)) == (0, 0, [])  # the other partition: appended
    assert end_offset(conn, topic, 0) == 0 and end_offset(conn, topic, 1) == 2


def test_keys_are_checked_before_timestamps(conn: RawConnection) -> None:
    """validateKey first: a keyless record is reported for its key only; one timestamp error
    anywhere makes the partition's error INVALID_TIMESTAMP."""
    create_topic(conn, "compacted-ts", **{"cleanup.policy": "compact", "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    p = produce(conn, "compacted-ts", batch([b"k", None, b"k"], now, [0, 86_400_000, 86_400_000]))
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in errors(p)] == [1, 2]
    assert errors(p)[0][1] == NO_KEY.format(tp="compacted-ts-0")
    assert (errors(p)[1][1] or "").startswith(f"Timestamp {now + 86_400_000} of message with offset 2 is out of range.")


def test_producer_may_not_set_log_append_time(conn: RawConnection) -> None:
    create_topic(conn, "lat", **{"message.timestamp.type": "LogAppendTime"})
    ts = 1_700_000_000_000
    p = produce(conn, "lat", batch([b"key", None], ts, [0, 5], timestamp_type=LOG_APPEND_TIME))
    tail = "Producer should not set timestamp type to LogAppendTime."
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert errors(p) == [
        (0, f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={ts + 5}, key=3 bytes, "
            f"value=7 bytes). {tail}"),
        (1, f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={ts + 5}, key=0 bytes, "
            f"value=7 bytes). {tail}"),
    ]
    assert produce(conn, "lat", batch([b"key"], ts)).error_code == 0  # CreateTime batches: stamped by the broker


def test_refused_batch_does_not_advance_the_producer_sequence(conn: RawConnection) -> None:
    """Kafka validates the records before it looks at the producer state: after a refused
    batch, the same sequence is still the next one expected."""
    create_topic(conn, "compacted-idem", **{"cleanup.policy": "compact"})
    init = conn.call(22, 4, _init_producer_id())
    pid, epoch = init.producer_id, init.producer_epoch
    now = int(time.time() * 1000)
    idem = {"producer_id": pid, "producer_epoch": epoch, "base_sequence": 0}
    p = produce(conn, "compacted-idem", batch([b"k", None, b"k"], now, **idem))
    assert (p.error_code, errors(p)) == (ErrorCode.INVALID_RECORD, [(1, NO_KEY.format(tp="compacted-idem-0"))])
    p = produce(conn, "compacted-idem", batch([b"k", b"k"], now, **idem))
    assert (p.error_code, p.base_offset) == (0, 0)


def _init_producer_id() -> Any:
    from protocol.messages import InitProducerIdRequest

    return InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                 producer_epoch=-1)


def test_topics_are_independent(conn: RawConnection) -> None:
    """A delete-policy topic takes keyless records: the key check is the compacted topics'."""
    create_topic(conn, "plain")
    p = produce(conn, "plain", batch([None, None], int(time.time() * 1000)))
    assert (p.error_code, p.base_offset, errors(p)) == (0, 0, [])


def test_confluent_kafka_fails_the_listed_records(broker: BrokerProcess, conn: RawConnection) -> None:
    from confluent_kafka import KafkaError, Producer

    create_topic(conn, "ck", **{"cleanup.policy": "compact", "message.timestamp.after.max.ms": "60000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 60000})

    def send_batch(records: list[tuple[bytes | None, int]]) -> list[tuple[int, int]]:
        """One batch (flush sends it): each record's (error code or 0, offset or -1)."""
        reports: dict[int, tuple[int, int]] = {}
        for i, (key, ts) in enumerate(records):
            producer.produce("ck", value=b"v%d" % i, key=key, partition=0, timestamp=ts,
                             on_delivery=lambda e, m, i=i: reports.__setitem__(i, (e.code(), -1) if e else (0, m.offset())))
        assert producer.flush(30) == 0
        return [reports[i] for i in range(len(records))]

    now = int(time.time() * 1000)
    other = KafkaError._INVALID_DIFFERENT_RECORD
    assert send_batch([(b"k0", now), (None, now), (b"k2", now), (None, now)]) == [
        (other, -1), (KafkaError.INVALID_RECORD, -1), (other, -1), (KafkaError.INVALID_RECORD, -1)]
    # one record listed: librdkafka fails the whole batch with the partition's error
    assert send_batch([(b"k0", now), (b"k1", now + 86_400_000)]) == [(KafkaError.INVALID_TIMESTAMP, -1)] * 2
    assert send_batch([(b"k0", now), (None, now), (b"k1", now)]) == [(KafkaError.INVALID_RECORD, -1)] * 3
    assert send_batch([(b"k0", now), (b"k1", now)]) == [(0, 0), (0, 1)]


def test_kafka_python_reports_the_brokers_messages(broker: BrokerProcess, conn: RawConnection) -> None:
    """With idempotence off: kafka-python 3.0's idempotent producer treats any non-retriable
    batch error as fatal and fails every later send with it (against Kafka 3.9.2 as well)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer
        from kafka.errors import InvalidRecordError, KafkaError

    create_topic(conn, "kp", **{"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=60000, enable_idempotence=False)
    try:
        sent = [producer.send("kp", key=k, value=b"v", partition=0) for k in (b"k0", None, b"k2", None)]
        producer.flush(30)
        outcomes = []
        for f in sent:
            with pytest.raises(KafkaError) as e:
                f.get(10)
            outcomes.append((type(e.value), str(e.value)))
        no_key = NO_KEY.format(tp="kp-0")
        generic = "KafkaError: Failed to append record because it was part of a batch which had one more more invalid records"
        assert outcomes == [(KafkaError, generic), (InvalidRecordError, f"[Error 87] InvalidRecordError: {no_key}"),
                            (KafkaError, generic), (InvalidRecordError, f"[Error 87] InvalidRecordError: {no_key}")]
        last = producer.send("kp", key=b"k", value=b"v", partition=0)
        producer.flush(30)
        assert last.get(10).offset == 0
    finally:
        producer.close(timeout=10)
