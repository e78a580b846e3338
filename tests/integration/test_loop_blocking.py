"""The event loop thread never makes a blocking file syscall while serving (issue #12, part 4).

A real broker runs with ``ODRADEK_AUDIT_LOOP_IO=1`` (broker.loop_audit): every fsync, fdatasync,
ftruncate, open, unlink, rename, rmdir, mkdir or mmap made on the loop thread after start-up is
logged as ``blocking file syscall on the event loop``. The workload covers what used to block:
topic creation (segments and preallocated indexes created), the first append of a leader epoch
(its checkpoint), many segment rolls (tiny segment.bytes, and segment.ms), fetches, a consumer group (creating
``__consumer_offsets``'s 50 partitions and appending commits to it), DeleteRecords (epochs and
producer snapshots below the new log start offset), adding partitions, deleting topics and
creating one again. The appends themselves (pwrite) are the exception the design keeps on the loop."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.loop_audit import ENV_VAR
from tests.broker_process import FAST_GROUPS, BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewPartitions, NewTopic

REPORT = "blocking file syscall on the event loop"
SEGMENT_BYTES = 4096
RECORDS = 2000
SEGMENT_MS = 100


def _rolled(broker: BrokerProcess, partition: str) -> list[str]:
    return [line for line in broker.lines if f"Rolled new log segment of {partition} " in line]


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=FAST_GROUPS, env={ENV_VAR: "1"}).start()
    try:
        b.wait_for_line("auditing blocking file syscalls")
        yield b
    finally:
        b.stop()


def _wait_deleted(admin: KafkaAdminClient, names: set[str], deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while names & set(admin.list_topics()):
        if time.monotonic() > end:
            raise TimeoutError(f"topics {names} still listed")
        time.sleep(0.05)


def test_no_blocking_file_syscalls_on_the_loop(audited: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=audited.bootstrap)
    try:
        admin.create_topics([
            NewTopic("rolls", 3, 1, topic_configs={"segment.bytes": str(SEGMENT_BYTES)}),
            NewTopic("gone", 2, 1),
            NewTopic("aged", 1, 1, topic_configs={"segment.ms": str(SEGMENT_MS)}),
        ])
        producer = KafkaProducer(bootstrap_servers=audited.bootstrap, acks="all", linger_ms=0)
        value = b"v" * 200
        futures = [producer.send("rolls", value, partition=i % 3) for i in range(RECORDS)]
        futures += [producer.send("gone", value, partition=i % 2) for i in range(50)]
        for f in futures:
            f.get(timeout=30)
        # segment.ms rolls: decided by the batches' timestamps, so produced over some time
        deadline = time.monotonic() + 20
        for i in range(20_000):
            producer.send("aged", value).get(timeout=30)
            if i % 20 == 0 and len(_rolled(audited, "aged-0")) >= 3:
                break
            assert time.monotonic() < deadline, "no three segment.ms rolls within 20 s"
        producer.close()

        consumer = KafkaConsumer(
            "rolls",
            bootstrap_servers=audited.bootstrap,
            group_id="audit-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=20_000,
        )
        got = 0
        deadline = time.monotonic() + 60
        for _msg in consumer:
            got += 1
            if got % 500 == 0:
                consumer.commit()
            if got >= RECORDS or time.monotonic() > deadline:
                break
        consumer.commit()
        consumer.close()
        assert got == RECORDS

        # DeleteRecords: the log start offset passes leader epochs and producer snapshots
        admin.delete_records({TopicPartition("rolls", 0): RECORDS // 6})
        admin.create_partitions({"gone": NewPartitions(4)})
        admin.delete_topics(["gone", "rolls"])
        _wait_deleted(admin, {"gone", "rolls"})
        admin.create_topics([NewTopic("again", 1, 1)])
    finally:
        admin.close()
    rolled = [line for line in audited.lines if "Rolled new log segment" in line]
    assert len(rolled) >= 20, "the workload must roll segments"
    reports = [line for line in audited.lines if REPORT in line]
    assert not reports, f"{len(reports)} blocking file syscalls on the loop:\n" + "\n".join(reports)
