"""Log compaction through a real broker and real clients (issue #13): confluent-kafka writes
1,000 keys x 200 versions to compacted topics with each codec; once the cleaner has run, a
consumer from the beginning sees exactly one record per key, its latest value, at the offset it
was written at. `__consumer_offsets` after 50,000 commits of one group shrinks to a bounded
size, and the group's offsets reload after a restart.

Readiness is the cleaner's own log line (`cleaned log <tp> (dirty section = [a, b])`) with an
end offset past what was written, never a sleep; every wait is bounded."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess

KEYS = 1000
VERSIONS = 200
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CLEANER = ["log.cleaner.backoff.ms=100", "num.partitions=1", "auto.create.topics.enable=false"]
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "segment.bytes": "262144",
    "segment.ms": "500",
}
_CLEANED = re.compile(r"cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)")


@pytest.fixture
def cbroker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=CLEANER).start()
    try:
        yield b
    finally:
        b.stop()


def wait_cleaned_through(b: BrokerProcess, tp: str, offset: int, timeout: float = 120.0) -> int:
    """Block until a cleaning of ``tp`` reports a dirty section ending at or past ``offset``;
    returns how many cleanings of it were logged."""
    deadline = time.monotonic() + timeout
    after = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{tp} not cleaned through {offset} within {timeout}s:\n" + "\n".join(
                line for line in b.lines if "clean" in line.lower())[-3000:])
        line = b.wait_for_line(f"cleaned log {tp} ", timeout=left, after=after)
        after = b.lines.index(line) + 1
        m = _CLEANED.search(line)
        assert m is not None, line
        if int(m.group(3)) >= offset:
            return sum(1 for x in b.lines if f"cleaned log {tp} " in x)


def roll_with_sentinel(p: Producer, topic: str) -> int:
    """Wait out segment.ms, then write one record with a key of its own: its append rolls the
    segment, so everything before it becomes cleanable. Returns its offset."""
    time.sleep(0.6)  # segment.ms is a wall-clock age: there is no event to await
    offsets: list[int] = []
    p.produce(topic, key=b"sentinel", value=b"s", on_delivery=lambda e, m: offsets.append(-1 if e else m.offset()))
    p.flush(30)
    assert offsets and offsets[0] >= 0, offsets
    return offsets[0]


def read_all(bootstrap: str, topic: str, timeout: float = 60.0) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record from the beginning to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if not out or out[-1][0] >= hi - 1:
                        return out
                    continue
                raise AssertionError(m.error())
            out.append((m.offset(), m.key(), m.value()))
        raise AssertionError(f"reading {topic} did not reach offset {hi} within {timeout}s ({len(out)} records)")
    finally:
        c.close()


def produce_waiting(p: Producer, topic: str, key: bytes, value: bytes, on_delivery: object) -> None:
    """Produce one record, serving delivery reports while librdkafka's local queue is full.

    200,000 records exceed the default queue (100,000 messages); on a loaded machine the broker
    acknowledges slower than the loop enqueues, and produce() raises BufferError instead of waiting.
    """
    deadline = time.monotonic() + 60
    while True:
        try:
            p.produce(topic, key=key, value=value, on_delivery=on_delivery)
            return
        except BufferError:
            if time.monotonic() > deadline:
                raise
            p.poll(0.1)


@pytest.mark.parametrize("codec", CODECS)
def test_one_record_per_key_the_latest_at_its_offset(cbroker: BrokerProcess, codec: str) -> None:
    topic = f"table-{codec}"
    admin = AdminClient({"bootstrap.servers": cbroker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIG)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": cbroker.bootstrap, "compression.type": codec, "linger.ms": 5,
                  "batch.size": 65536, "acks": "all", "enable.idempotence": False})
    latest: dict[bytes, tuple[int, bytes]] = {}
    errors: list[object] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            latest[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

    for v in range(VERSIONS):
        for k in range(KEYS):
            produce_waiting(p, topic, b"key-%04d" % k, b"value-%04d-%03d" % (k, v), delivered)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    sentinel = roll_with_sentinel(p, topic)
    assert sentinel == KEYS * VERSIONS
    cleanings = wait_cleaned_through(cbroker, f"{topic}-0", sentinel)

    records = read_all(cbroker.bootstrap, topic)
    by_key = {}
    for offset, key, value in records:
        assert key not in by_key, f"{key!r} read twice (offsets {by_key[key][0]} and {offset})"
        by_key[key] = (offset, value)
    assert by_key.pop(b"sentinel") == (sentinel, b"s")
    assert by_key == latest, "every key once, with its latest value at the offset it was written at"
    assert all(value.endswith(b"-%03d" % (VERSIONS - 1)) for _o, value in by_key.values())
    offsets = [o for o, _k, _v in records]
    assert offsets == sorted(offsets)
    assert cleanings >= 1


def test_consumer_offsets_stay_bounded_and_reload_after_a_restart(tmp_path: Path) -> None:
    segment = 65536
    overrides = [
        *CLEANER,
        "offsets.topic.num.partitions=1",
        f"offsets.topic.segment.bytes={segment}",
        "group.initial.rebalance.delay.ms=0",
    ]
    data = tmp_path / "data"
    b = BrokerProcess(data, overrides=overrides).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("events", 4, 1)]).values():
            f.result(30)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "committer", "enable.auto.commit": False})
        try:
            commits = 50_000
            for i in range(commits):  # explicit offsets need no assignment (a simple group)
                c.commit(offsets=[TopicPartition("events", i % 4, i)], asynchronous=True)
                if i % 1000 == 999:
                    c.poll(0)
            final = c.commit(offsets=[TopicPartition("events", p, commits + p) for p in range(4)], asynchronous=False)
            assert final is not None and all(tp.error is None for tp in final)
        finally:
            c.close()
        part = data / "__consumer_offsets-0"
        # 50,000 commits (about 5 MB of records) went through segments of 64 KiB; wait for a
        # cleaning through everything below the active segment
        active = int(sorted(part.glob("*.log"))[-1].name[:20])
        assert active > 40_000, f"the active segment starts at {active}: the commits did not roll segments"
        wait_cleaned_through(b, "__consumer_offsets-0", active - 1)
        live = sum(f.stat().st_size for f in part.glob("*.log"))
        assert live < 3 * segment, f"__consumer_offsets-0 holds {live} bytes after cleaning"
    finally:
        assert b.stop() == 0
    b = BrokerProcess(data, overrides=overrides).start()
    try:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "committer", "enable.auto.commit": False})
        try:
            got = c.committed([TopicPartition("events", p) for p in range(4)], timeout=30)
            assert [(tp.partition, tp.offset) for tp in got] == [(p, 50_000 + p) for p in range(4)]
        finally:
            c.close()
    finally:
        assert b.stop() == 0
