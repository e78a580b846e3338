"""Load for the compose tests, from the host through the published ports: an idempotent acks=all
librdkafka producer in a thread that remembers what was acknowledged, and the check that every
acknowledged record is in the topic exactly once at the offset it was acknowledged at."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int = 3, replication: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication)], operation_timeout=30)
    futures[topic].result(60)
    wait_full_isr(bootstrap, topic, replication)


def partition_state(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, ISR) as the brokers answer Metadata. A broker may not know a topic
    created a moment ago through another (the controller's UpdateMetadata is on its way): asked
    again until it does (bounded)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=20).topics[topic]
        if (meta.error is None and meta.partitions) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert meta.error is None, f"{topic}: {meta.error}"
    return {p: (pm.leader, sorted(pm.isrs)) for p, pm in meta.partitions.items()}


def wait_full_isr(bootstrap: str, topic: str, replication: int = 3, timeout: float = 120.0) -> None:
    """Until every partition has a leader and `replication` in-sync replicas (bounded)."""
    deadline = time.monotonic() + timeout
    state: dict[int, tuple[int, list[int]]] = {}
    while time.monotonic() < deadline:
        try:
            state = partition_state(bootstrap, topic)
        except Exception:  # a broker restarting answers nothing for a moment
            state = {}
        if state and all(leader >= 0 and len(isr) == replication for leader, isr in state.values()):
            return
        time.sleep(0.5)
    raise AssertionError(f"{topic}: ISRs not full within {timeout} s: {state}")


class AckedProducer:
    """Produces v0, v1, ... at `rate` per second to `topic` (at most `limit` records, at most
    `max_seconds`), idempotent with acks=all, until stopped; `acked` maps each acknowledged value
    to its (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str, *, rate: float = 200, limit: int = 50_000,
                 max_seconds: float = 240) -> None:
        self.topic = topic
        self.rate, self.limit, self.max_seconds = rate, limit, max_seconds
        self.producer: Producer | None = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 200,
        })
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{topic}", daemon=True)

    def _on_delivery(self, err: KafkaError | None, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set() and self.sent < self.limit and time.monotonic() - started < self.max_seconds:
            assert self.producer is not None
            try:
                self.producer.produce(self.topic, f"v{self.sent}".encode(), on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(1 / self.rate)
        assert self.producer is not None
        self.producer.flush(150)
        # destroyed now, not at garbage collection: a live librdkafka producer keeps asking for
        # its topic's metadata, and a broker auto-creates a topic it is asked about
        self.producer = None

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    def wait_acked(self, count: int, timeout: float = 120.0) -> None:
        """Until `count` more records than now are acknowledged (bounded)."""
        target = len(self.acked) + count
        deadline = time.monotonic() + timeout
        while len(self.acked) < target:
            assert self._thread.is_alive(), "the producer stopped"
            assert time.monotonic() < deadline, f"{len(self.acked)} of {target} acknowledged in {timeout} s"
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "the producer did not finish flushing"


def read_all(bootstrap: str, topic: str, timeout: float = 120.0) -> dict[tuple[int, int], bytes]:
    """Every record of `topic` by (partition, offset), read to each partition's high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: dict[tuple[int, int], bytes] = {}
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(ends):
            assert time.monotonic() < deadline, f"read {len(records)} records, partitions done {done} of {ends}"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= ends[msg.partition()]:
                    done.add(msg.partition())
                continue
            records[(msg.partition(), msg.offset())] = msg.value()
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return records
    finally:
        consumer.close()


def check_nothing_lost(bootstrap: str, producer: AckedProducer) -> int:
    """Every acknowledged value at its acknowledged offset, no value twice; the number checked."""
    records = read_all(bootstrap, producer.topic)
    missing = {v: at for v, at in producer.acked.items() if records.get(at) != v}
    assert not missing, f"{len(missing)} acknowledged records lost or moved, e.g. {list(missing.items())[:5]}"
    values = list(records.values())
    assert len(values) == len(set(values)), "a value stored twice"
    assert not producer.failed, f"deliveries failed: {producer.failed[:5]}"
    return len(producer.acked)
