"""Stock Kafka clients against a real `odradek serve`: create topics, produce with every codec,
consume back in order with keys, values, headers and timestamps intact."""

from __future__ import annotations

import asyncio
import subprocess
import warnings

import pytest

from tests.broker_process import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
N_PER_CODEC = 100_000


def create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def consume_all(broker: BrokerProcess, topic: str, partitions: int, expected: int) -> list:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000,
        fetch_max_wait_ms=100,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = []
        for msg in consumer:
            out.append(msg)
            if len(out) >= expected:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS, ids=[c or "none" for c in CODECS])
def test_kafka_python_round_trip_every_codec(broker: BrokerProcess, codec: str | None) -> None:
    topic = f"kp-{codec or 'none'}"
    create_topic(broker, topic, 6)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5, acks="all")
    sent = []
    for i in range(N_PER_CODEC):
        key = f"key-{i % 50}".encode()
        value = f"value-{i}".encode() * 3
        ts = 1_700_000_000_000 + i
        md = producer.send(topic, key=key, value=value, headers=[("h", str(i).encode())], timestamp_ms=ts)
        sent.append((key, value, ts, i, md))
    producer.flush()
    metas = {}
    for key, value, ts, i, fut in sent:
        m = fut.get(timeout=10)
        metas[(m.partition, m.offset)] = (key, value, ts, i)
    producer.close()
    assert len(metas) == N_PER_CODEC
    # same key -> same partition (murmur2, as Java's default partitioner)
    by_key: dict[bytes, set[int]] = {}
    for (p, _), (key, _, _, _) in metas.items():
        by_key.setdefault(key, set()).add(p)
    assert all(len(ps) == 1 for ps in by_key.values())

    got = consume_all(broker, topic, 6, N_PER_CODEC)
    assert len(got) == N_PER_CODEC
    last_offset: dict[int, int] = {}
    for msg in got:
        assert msg.offset > last_offset.get(msg.partition, -1)  # per-partition order
        last_offset[msg.partition] = msg.offset
        key, value, ts, i = metas[(msg.partition, msg.offset)]
        assert (msg.key, msg.value, msg.timestamp) == (key, value, ts)
        assert msg.headers == [("h", str(i).encode())]


@pytest.mark.parametrize("codec", CODECS, ids=[c or "none" for c in CODECS])
def test_confluent_kafka_round_trip_every_codec(broker: BrokerProcess, codec: str | None) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP

    topic = f"ck-{codec or 'none'}"
    create_topic(broker, topic, 6)
    p = Producer({
        "bootstrap.servers": broker.bootstrap, "compression.type": codec or "none", "linger.ms": 5,
        "enable.idempotence": True, "acks": "all",
    })
    delivered = {}

    def on_delivery(err, msg):
        assert err is None, err
        delivered[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    for i in range(N_PER_CODEC):
        p.produce(topic, key=f"k{i % 40}".encode(), value=f"v{i}".encode(), headers=[("n", str(i).encode())],
                  timestamp=1_700_000_000_000 + i, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(30) == 0
    assert len(delivered) == N_PER_CODEC

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    try:
        c.assign([CTP(topic, part, 0) for part in range(6)])
        got = []
        while len(got) < N_PER_CODEC:
            batch = c.consume(1000, timeout=10)
            assert batch, f"stalled after {len(got)} records"
            for m in batch:
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        c.close()
    for m in got:  # (delivery reports carry no headers; the value says which record it was)
        assert delivered[(m.partition(), m.offset())] == (m.key(), m.value())
        assert m.headers() == [("n", m.value()[1:])]
    assert len({(m.partition(), m.offset()) for m in got}) == N_PER_CODEC


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_round_trip_every_codec(broker: BrokerProcess, codec: str) -> None:
    topic = f"kc-{codec}"
    create_topic(broker, topic, 1)
    lines = [f"k{i}:line {i}" for i in range(N_PER_CODEC)]
    subprocess.run(
        ["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-z", codec, "-K:"],
        input="\n".join(lines) + "\n", text=True, check=True, timeout=60,
    )
    out = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-f", "%k:%s\n"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    assert out.stdout.splitlines() == lines


@pytest.mark.parametrize("codec", CODECS, ids=[c or "none" for c in CODECS])
def test_aiokafka_round_trip_every_codec(broker: BrokerProcess, codec: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    topic = f"aio-{codec or 'none'}"
    create_topic(broker, topic, 3)

    async def run() -> tuple[dict, list]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5)
        await producer.start()
        try:
            pending = [
                await producer.send(topic, key=str(i % 7).encode(), value=f"m{i}".encode(),
                                    headers=[("i", str(i).encode())], timestamp_ms=1_600_000_000_000 + i)
                for i in range(N_PER_CODEC)
            ]
            metas = await asyncio.gather(*pending)
        finally:
            await producer.stop()
        sent = {(md.partition, md.offset): i for i, md in enumerate(metas)}
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [ATP(topic, p) for p in range(3)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            got = []
            while len(got) < N_PER_CODEC:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000, max_records=10000), 15)
                for msgs in batch.values():
                    got.extend(msgs)
            return sent, got
        finally:
            await consumer.stop()

    sent, got = asyncio.run(run())
    assert len(got) == N_PER_CODEC
    last: dict[int, int] = {}
    for m in got:
        i = sent[(m.partition, m.offset)]
        assert (m.key, m.value, m.timestamp) == (str(i % 7).encode(), f"m{i}".encode(), 1_600_000_000_000 + i)
        assert list(m.headers) == [("i", str(i).encode())]
        assert m.offset > last.get(m.partition, -1)
        last[m.partition] = m.offset


def test_seek_by_timestamp(broker: BrokerProcess) -> None:
    topic = "times"
    create_topic(broker, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(100):
        producer.send(topic, value=str(i).encode(), timestamp_ms=1_000_000 + i * 10)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: 1_000_000 + 425})
        assert found[tp].offset == 43 and found[tp].timestamp == 1_000_430
        assert consumer.offsets_for_times({tp: 2_000_000})[tp] is None
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == 100
    finally:
        consumer.close()


def test_acks_zero_one_all(broker: BrokerProcess) -> None:
    topic = "acks"
    create_topic(broker, topic, 1)
    for acks in (0, 1, "all"):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks)
        for i in range(100):
            producer.send(topic, value=f"{acks}-{i}".encode(), partition=0)
        producer.flush()
        producer.close()
    got = consume_all(broker, topic, 1, 300)
    assert [m.value for m in got] == [f"{a}-{i}".encode() for a in (0, 1, "all") for i in range(100)]


def test_kafka_python_version_guess_is_a_real_release(broker: BrokerProcess) -> None:
    """kafka-python infers the broker release from ApiVersions; ours must map to a real one."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        assert producer.config["api_version"] == (3, 8)  # NOTES.md: our ranges are Kafka 3.8's
    finally:
        producer.close()
