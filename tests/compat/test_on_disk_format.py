"""Odradek's on-disk format, proved by Kafka's own code, both ways:

* Kafka 3.9's `kafka.tools.DumpLogSegments` reads the `.log`, `.index`, `.timeindex` and
  `.snapshot` files Odradek wrote and prints, line for line, what `odradek dump-log` prints
  (batches, records with keys and payloads, index entries, producer snapshots), with no index
  mismatch reported.
* Partition dirs written by a real Kafka 3.9 broker, copied into an Odradek log dir, are adopted
  as topics (same topic ids), served record for record as Kafka served them, keep their
  committed group offsets, and take new records at the right offsets.

Data: a few hundred records over several segments (small segment.bytes), every codec, an
idempotent producer per codec but one, keys, null keys, tombstones, headers, explicit
timestamps; a LogAppendTime topic on the Kafka side."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import REPO, BrokerProcess
from tests.compat.jvm import run_tool
from tests.compat.reference_kafka import ReferenceKafka
from tests.raw_client import RawConnection
from tests.txn_requests import init_when_ready

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 40
ISOLATION = ("read_uncommitted", "read_committed")
SMALL_SEGMENTS = {"segment.bytes": "1024", "index.interval.bytes": "128"}
DUMPED = (".log", ".index", ".timeindex", ".snapshot", ".txnindex")
Record = tuple[str, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...], tuple[int, int]]


def create_topics(bootstrap: str, topics: dict[str, tuple[int, dict[str, str]]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, parts, 1, config=cfg) for name, (parts, cfg) in topics.items()],
                                  operation_timeout=30)
    for f in futures.values():
        f.result(timeout=60)


def produce_mixed(bootstrap: str, topic: str, partitions: int, base_ts: int, first: int = 0) -> int:
    """PER_CODEC records per codec over `partitions`, each codec from its own producer
    (idempotent but for gzip's); returns the number produced."""
    n = first
    failed: list[object] = []
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                      "batch.num.messages": 7, "enable.idempotence": codec != "gzip", "acks": "all"})
        for _ in range(PER_CODEC):
            key = None if n % 7 == 0 else f"key-{n}".encode()
            value = None if n % 11 == 0 else f"{codec} value {n} ".encode() * 3
            headers = [] if n % 5 == 0 else [("codec", codec.encode()), ("n", str(n).encode())]
            p.produce(topic, key=key, value=value, partition=n % partitions, headers=headers,
                      timestamp=base_ts + n, on_delivery=lambda err, _msg: err and failed.append(err))
            n += 1
        assert p.flush(60) == 0, f"{codec}: records still queued after 60 s"
        assert not failed, f"{codec}: {failed[:3]}"
    return n - first


def produce_transactions(bootstrap: str, topic: str) -> None:
    """Three transactions of 5 records to partition 0 of `topic`: committed, aborted, committed."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "on-disk-txn", "linger.ms": 5})
    p.init_transactions(60)
    for t, commit in enumerate((True, False, True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, key=f"txn-{t}-{i}".encode(), value=f"{'kept' if commit else 'aborted'} {t} {i}".encode(),
                      partition=0)
        assert p.flush(60) == 0  # written before the abort, not purged from the queue by it
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)


def read_all(bootstrap: str, partitions: Iterable[tuple[str, int]], timeout_s: float = 60.0,
             isolation: str = "read_uncommitted") -> list[Record]:
    """Every record of `partitions` from offset 0 to the high watermark, in offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "on-disk-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": isolation})
    try:
        tps = [TopicPartition(t, p, 0) for t, p in partitions]
        ends = {(tp.topic, tp.partition): c.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
        c.assign([tp for tp in tps if ends[tp.topic, tp.partition] > 0])
        pending = {tp for tp, end in ends.items() if end > 0}
        records: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            assert time.monotonic() < deadline, f"partitions {sorted(pending)} not read to their end in {timeout_s} s"
            m = c.poll(1.0)
            if m is None:
                continue
            tp = (m.topic(), m.partition())
            if m.error():
                assert m.error().code() == -191, m.error()  # _PARTITION_EOF
                if c.position([TopicPartition(*tp)])[0].offset >= ends[tp]:
                    pending.discard(tp)
                continue
            records.append((m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                            tuple(m.headers() or ()), m.timestamp()))
            if m.offset() + 1 >= ends[tp]:
                pending.discard(tp)
        return sorted(records, key=lambda r: (r[0], r[1], r[2]))
    finally:
        c.close()


def commit_offsets(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], timeout_s: float = 60.0) -> None:
    """Commit `offsets` for `group`, retrying while the group coordinator is still being
    created or loaded (a fresh Kafka creates `__consumer_offsets` on the first lookup)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
                return
            except KafkaException as e:
                retriable = e.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                                 KafkaError.COORDINATOR_NOT_AVAILABLE)
                if not retriable or time.monotonic() > deadline:
                    raise
    finally:
        c.close()


def cluster_id(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: the future dies with its client
    return str(admin.describe_cluster().result(timeout=30).cluster_id)


def topic_ids(bootstrap: str, names: list[str]) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_topics(TopicCollection(names))
    return {name: str(f.result(timeout=30).topic_id) for name, f in described.items()}


def epoch_entries(partition_dir: Path) -> list[tuple[int, int]]:
    """The (epoch, start offset) entries of a leader-epoch-checkpoint (version, count, entries)."""
    _version, _count, *entries = (partition_dir / "leader-epoch-checkpoint").read_text().splitlines()
    return [(int(e), int(o)) for e, o in (line.split() for line in entries)]


def segment_files(partition_dirs: Iterable[Path]) -> list[str]:
    return [str(f) for d in sorted(partition_dirs) for f in sorted(d.iterdir()) if f.suffix in DUMPED]


def kafka_dump(files: list[str]) -> list[str]:
    """kafka-dump-log.sh --deep-iteration --print-data-log; fails on any complaint it prints
    (index entries not matching the log, time index out of order, non-consecutive offsets)."""
    proc = run_tool("kafka.tools.DumpLogSegments", "--files", ",".join(files), "--deep-iteration",
                    "--print-data-log", timeout=120)
    complaints = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("[")]
    assert not complaints, "\n".join(complaints[:20])
    return proc.stdout.splitlines()


def odradek_dump(files: list[str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "clients.cli", "dump-log", "--deep-iteration", "--print-data-log",
                           *files], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def assert_dumps_agree(partition_dirs: list[Path]) -> list[str]:
    files = segment_files(partition_dirs)
    kafka = kafka_dump(files)
    assert odradek_dump(files) == kafka
    return kafka


def test_kafka_dump_log_reads_odradek_files(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "odradek-data").start()
    try:
        create_topics(broker.bootstrap, {"disk": (2, SMALL_SEGMENTS)})
        produced = produce_mixed(broker.bootstrap, "disk", 2, int(time.time() * 1000) - 60_000)
    finally:
        stopped = broker.stop()
    assert stopped == 0  # a clean shutdown trims the indexes and snapshots producer state
    dirs = [broker.log_dir / "disk-0", broker.log_dir / "disk-1"]
    assert all(len(list(d.glob("*.log"))) >= 3 for d in dirs), "expected several segments per partition"

    lines = assert_dumps_agree(dirs)

    batches = [line for line in lines if line.startswith("baseOffset:")]
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(records) == produced
    assert all(line.endswith("isvalid: true") for line in batches)
    assert {c for c in CODECS if any(f"compresscodec: {c} " in b for b in batches)} == set(CODECS)
    assert any("producerId: -1 " in b for b in batches) and any("baseSequence: 0 " in b for b in batches)
    assert sum(line.startswith("offset: ") and "position: " in line for line in lines) > 5  # index entries
    assert sum(line.startswith("timestamp: ") for line in lines) > 5  # time-index entries
    snapshots = [line for line in lines if line.startswith("producerId: ")]
    assert len({line.split()[1] for line in snapshots}) == len(CODECS) - 1  # one per idempotent producer
    assert any("headerKeys: [codec,n]" in r and " key: key-" in r and " payload: " in r for r in records)
    assert any("keySize: -1 " in r for r in records) and any("valueSize: -1 " in r for r in records)


def test_kafka_log_dirs_migrate_to_odradek(tmp_path: Path) -> None:
    """Stop Kafka cleanly, copy its `<topic>-<partition>` dirs (not `__cluster_metadata-0`, not
    its meta.properties or checkpoints) into an Odradek log dir, start Odradek: same topics,
    same ids, same records, same committed offsets, the transactional id's producer id and
    epoch from Kafka's __transaction_state, and new records continue the offsets."""
    topics = {"mig": (2, SMALL_SEGMENTS), "mig-lat": (1, {**SMALL_SEGMENTS, "message.timestamp.type": "LogAppendTime"}),
              "mig-txn": (1, {"segment.bytes": "300"})}
    parts = [("mig", 0), ("mig", 1), ("mig-lat", 0)]
    kafka = ReferenceKafka(tmp_path / "kafka", overrides={"log.segment.delete.delay.ms": "0"})
    kafka.start()
    try:
        create_topics(kafka.bootstrap, topics)
        base = int(time.time() * 1000) - 60_000
        produced = produce_mixed(kafka.bootstrap, "mig", 2, base) + produce_mixed(kafka.bootstrap, "mig-lat", 1, base)
        served_by_kafka = read_all(kafka.bootstrap, parts)
        produce_transactions(kafka.bootstrap, "mig-txn")
        txn_by_kafka = {level: read_all(kafka.bootstrap, [("mig-txn", 0)], isolation=level) for level in ISOLATION}
        ids_in_kafka = topic_ids(kafka.bootstrap, list(topics))
        kafka_cluster_id = cluster_id(kafka.bootstrap)
        commit_offsets(kafka.bootstrap, "migrated-group", {("mig", 0): 17, ("mig", 1): 42})
    finally:
        stopped = kafka.stop()
    assert stopped == 143  # the JVM's exit status after SIGTERM, its shutdown hook run
    assert (kafka.log_dir / ".kafka_cleanshutdown").exists()
    assert len(served_by_kafka) == produced
    assert [r[4] for r in txn_by_kafka["read_committed"]] == [
        f"kept {t} {i}".encode() for t in (0, 2) for i in range(5)]
    assert len(txn_by_kafka["read_uncommitted"]) == 15

    data = tmp_path / "odradek-data"
    data.mkdir()
    copied = [d for d in kafka.log_dir.iterdir() if d.is_dir() and not d.name.startswith("__cluster_metadata")]
    assert {d.name for d in copied} >= {"mig-0", "mig-1", "mig-lat-0", "__consumer_offsets-0"}
    for d in copied:
        shutil.copytree(d, data / d.name)
    assert all(len(list((data / f"{t}-{p}").glob("*.log"))) >= 3 for t, p in parts)
    assert list((data / "mig-txn-0").glob("*.txnindex")), "expected the aborted transaction in a .txnindex"
    # Kafka's own files, read by Odradek's dump-log as Kafka's dump tool reads them
    lines = assert_dumps_agree([data / f"{t}-{p}" for t, p in [*parts, ("mig-txn", 0)]])
    assert sum("endTxnMarker: ABORT" in line for line in lines) == 1
    assert sum(line.startswith("version: 0 producerId: ") for line in lines) == 1  # the .txnindex entry

    txn_producers = {int(line.split("producerId: ")[1].split()[0]) for line in lines
                     if "isTransactional: true" in line and "producerId: " in line}
    assert len(txn_producers) == 1, txn_producers  # the transactional producer Kafka gave an id
    kafka_epochs = {p: epoch_entries(data / f"mig-{p}") for p in (0, 1)}
    odradek = BrokerProcess(data).start()
    try:
        adopted = [line for line in odradek.lines if "adopted topic from logs found on disk" in line]
        assert any("topic='mig' " in line and "partitions=2 " in line for line in adopted), adopted
        # Kafka's cleanly stopped files pass the checks every start makes (nothing rebuilt or cut)
        rebuilt = [line for line in odradek.lines if "Found a corrupt index or log tail" in line]
        assert not rebuilt, rebuilt
        assert topic_ids(odradek.bootstrap, list(topics)) == ids_in_kafka
        assert read_all(odradek.bootstrap, parts) == served_by_kafka
        for level in ISOLATION:  # aborted records hidden from read_committed, as Kafka hid them
            assert read_all(odradek.bootstrap, [("mig-txn", 0)], isolation=level) == txn_by_kafka[level]
        # Kafka's __transaction_state is loaded as is: the transactional id keeps its producer id,
        # and the epoch Kafka stored (0, its transactions completed) is bumped
        with RawConnection(odradek.port) as conn:
            assert init_when_ready(conn, "on-disk-txn") == (0, *txn_producers, 1)

        c = Consumer({"bootstrap.servers": odradek.bootstrap, "group.id": "migrated-group"})
        try:
            got = c.committed([TopicPartition("mig", 0), TopicPartition("mig", 1)], timeout=30)
        finally:
            c.close()
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 17), (1, 42)]

        # new records, from idempotent producers too, continue each partition's offsets
        ends = {p: sum(1 for r in served_by_kafka if r[:2] == ("mig", p)) for p in (0, 1)}
        more = produce_mixed(odradek.bootstrap, "mig", 2, base + 10_000, first=produced)
        after = read_all(odradek.bootstrap, parts[:2])
        assert [r for r in after if r[2] < ends[r[1]]] == [r for r in served_by_kafka if r[0] == "mig"]
        for p in (0, 1):
            assert [r[2] for r in after if r[1] == p] == list(range(ends[p] + more // 2))
        new_keys = [r[3] for r in after if r[2] >= ends[r[1]]]
        assert all(k is None or int(k.split(b"-")[1]) >= produced for k in new_keys)
    finally:
        stopped = odradek.stop()
    assert stopped == 0
    # taking over leadership started a new leader epoch where Kafka's data ends
    for p in (0, 1):
        latest = max(epoch for epoch, _ in kafka_epochs[p])
        assert epoch_entries(data / f"mig-{p}") == [*kafka_epochs[p], (latest + 1, ends[p])]

    # in place: Kafka's whole log dir as Odradek's (its meta.properties names node 1, so broker.id
    # must be 1); the KRaft metadata log is left alone, the cluster id is Kafka's
    in_place = tmp_path / "in-place"
    shutil.copytree(kafka.log_dir, in_place)
    raft_files = {f.name: f.read_bytes() for f in (in_place / "__cluster_metadata-0").iterdir()}
    odradek = BrokerProcess(in_place, overrides=["broker.id=1"]).start()
    try:
        assert cluster_id(odradek.bootstrap) == kafka_cluster_id
        assert topic_ids(odradek.bootstrap, list(topics)) == ids_in_kafka
        assert read_all(odradek.bootstrap, parts) == served_by_kafka
    finally:
        stopped = odradek.stop()
    assert stopped == 0
    assert {f.name: f.read_bytes() for f in (in_place / "__cluster_metadata-0").iterdir()} == raft_files
