"""Structured Streaming against the 3-broker ZooKeeper-mode cluster (issue #15): a query reads an
RF 3, min.insync.replicas=2 topic while an idempotent acks=all producer writes to it, the leader
of a partition is killed -9 mid-query and restarted later, and the query's Parquet output (Spark's
file sink, exactly-once with its checkpoint) holds every acknowledged record exactly once, for
Spark's own `format("kafka")` (Java kafka-clients 3.9.2) and for our `format("odradek")`
(kafka-python). The query is also stopped after the kill and restarted from its checkpoint. The
same, under read_committed, while a transactional producer commits and aborts (issue #22).

Right after the election the new leader's high watermark can be behind the end the old leader
answered; it answers a consumer's "latest" with OFFSET_NOT_AVAILABLE (retriable) until it catches
up (KIP-207, tests/cluster/test_list_offsets_failover.py); an end going back would be taken for
lost data (by the odradek source at once, by Spark's after its fetchOffset retries).

One cluster serves both sources (module scope): brokers are real `odradek serve` processes
(tests/cluster/processes.py), whose async helpers run on a loop of their own thread here, since
Spark's calls block."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import warnings
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.cluster.processes import IDS, PROMISE_S, WAIT, Cluster, partitions
from tests.spark.helpers import unique_topic
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

T = TypeVar("T")

N = 3_000  # records per run, produced at RATE/s so the query is mid-stream for the kill
RATE = 250
PARTITIONS = 3
LAG_MS = 800  # replica.lag.time.max.ms: a restarted broker rejoins the ISRs promptly
CATCH_UP_S = 90.0


class SyncCluster:
    """A `Cluster` driven from blocking code: its coroutines run on a loop in a thread of its own
    (the ZooKeeper client's session needs a loop that keeps running between calls)."""

    def __init__(self, zookeeper: ZooKeeperServer, root: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cluster-loop", daemon=True)
        self.thread.start()
        self.cluster = Cluster(zookeeper, root, (f"replica.lag.time.max.ms={LAG_MS}",))

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.cluster.brokers[i].bootstrap for i in IDS)

    def close(self) -> None:
        try:
            self.run(self.cluster.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncCluster]:
    """ZooKeeper and brokers 1-3 for this module's tests (a cluster start costs ~10 s; the
    shared `zookeeper` fixture of tests/conftest.py is per test, so the server is started here)."""
    root = tmp_path_factory.mktemp("spark-cluster")
    zk = ZooKeeperServer(root / "zookeeper").start()
    try:
        c = SyncCluster(zk, root)
        try:
            c.run(c.cluster.open())
            yield c
        finally:
            c.close()
    finally:
        zk.stop()


def create_durable_topic(c: SyncCluster, name: str) -> None:
    """RF 3 (preferred leaders 1, 2, 3 in turn), min.insync.replicas=2, every ISR full."""
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=20_000)
    try:
        admin.create_topics([NewTopic(name, -1, -1, replica_assignments={
            p: [IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)},
            topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    c.run(c.cluster.until_all_agree(
        lambda m: name in m["topics"] and len(partitions(m, name)) == PARTITIONS
        and all(s[0] == 0 and sorted(s[4]) == list(IDS) for s in partitions(m, name).values()),
        f"{name} with full ISRs"))


def paced(count: int, rate: float, go_on: threading.Event, wait_s: float) -> Iterator[int]:
    """0 .. count-1 at `rate` per second; after the first third, wait for `go_on` (at most
    `wait_s`) and go on at the same rate from there."""
    start = time.monotonic()
    for i in range(count):
        if i == count // 3:
            go_on.wait(wait_s)
            start = time.monotonic() - i / rate
        ahead = start + i / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)  # pacing the load, not waiting for an event
        yield i


class PacedProducer(threading.Thread):
    """An idempotent acks=all producer writing N unique values at RATE/s, round-robin over the
    partitions; `acked` maps each acknowledged value to its (partition, offset). After the first
    third it waits for `go_on` (set once the leader is killed), so the load spans the kill
    whatever the query's start-up time."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="paced-producer", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.go_on = threading.Event()
        self.acked: dict[str, tuple[int, int]] = {}
        self.failed: list[tuple[str, BaseException]] = []
        self.sent = 0

    def run(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5, request_timeout_ms=10_000, delivery_timeout_ms=60_000)
        try:
            futures = []
            for i in paced(N, RATE, self.go_on, WAIT + PROMISE_S):
                value = f"r{i:05d}"
                futures.append((value, producer.send(self.topic, value.encode(), partition=i % PARTITIONS)))
                self.sent = i + 1
            producer.flush(90)
            for value, f in futures:
                try:
                    md = f.get(0)
                    self.acked[value] = (md.partition, md.offset)
                except Exception as e:
                    self.failed.append((value, e))
        finally:
            producer.close(5)


# Client timeouts sized to the cluster's 4 s ZooKeeper session. The driver's Java AdminClient sends
# ListOffsets to the leader its metadata names; a leader killed -9 stays named there until its
# session expires, and the call waits for that node until its deadline (default.api.timeout.ms,
# 60 s by default), before Spark retries with a new AdminClient: the query would stall a minute,
# as it does against Kafka.
SOURCE_OPTIONS = {
    "kafka": {"kafka.default.api.timeout.ms": "8000", "kafka.request.timeout.ms": "5000"},
    "odradek": {},
}


def start_query(spark: Any, source: str, bootstrap: str, topic: str, out: Path, checkpoint: Path,
                **options: str) -> Any:
    """`topic` -> Parquet (Spark's file sink: a batch's files are listed in its _spark_metadata log
    once committed, so a replayed batch is not read twice), small micro-batches; `options` adds
    source options."""
    reader = (spark.readStream.format(source)
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "400"))
    for k, v in {**SOURCE_OPTIONS[source], **options}.items():
        reader = reader.option(k, v)
    return (reader.load()
            .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="300 milliseconds")
            .start())


def rows_done(query: Any) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def until(check: Any, what: str, timeout: float, query: Any | None = None) -> None:
    """Poll `check` (the query's progress, another thread's) until true, bounded; fail at once if
    the query died."""
    deadline = time.monotonic() + timeout
    while not check():
        if query is not None and not query.isActive:
            raise AssertionError(f"{what}: the query ended: {query.exception()}")
        if time.monotonic() > deadline:
            detail = "" if query is None else f"; status {query.status}, last progress {query.lastProgress}"
            raise AssertionError(f"{what}: not within {timeout}s{detail}")
        time.sleep(0.1)


def caught_up(query: Any, topic: str, ends: dict[int, int]) -> bool:
    """The query's last batch ends at `ends` (the partitions' log ends) and it has committed it."""
    progress = query.lastProgress
    if not progress or query.status["isDataAvailable"]:
        return False
    end = progress["sources"][0]["endOffset"]
    if isinstance(end, str):
        end = json.loads(end)
    return {int(p): o for p, o in (end or {}).get(topic, {}).items()} == ends


def kill_a_leader(cluster: SyncCluster, topic: str, then: threading.Event) -> int:
    """kill -9 the leader of partition 0 of `topic` (or of another partition if that one is the
    controller: one election at a time), set `then`, and wait until every broker names new
    leaders at a higher epoch. Returns the victim's id."""
    c = cluster.cluster
    controller, _ = cluster.run(c.controller())
    view = c.metadata(controller)
    p = next(p for p, s in sorted(partitions(view, topic).items()) if s[1] != controller)
    victim, epoch = partitions(view, topic)[p][1], partitions(view, topic)[p][2]
    c.brokers[victim].kill()
    then.set()
    view = cluster.run(c.until_all_agree(
        lambda m: all(s[0] == 0 and s[1] not in (victim, -1) for s in partitions(m, topic).values()),
        "new leaders for the victim's partitions", timeout=PROMISE_S + WAIT))
    assert partitions(view, topic)[p][1] != victim and partitions(view, topic)[p][2] > epoch
    return victim


def restart(cluster: SyncCluster, topic: str, victim: int) -> None:
    """Start the killed broker again and wait until it is back in every ISR of `topic`."""
    c = cluster.cluster
    cluster.run(c.start(victim))
    cluster.run(c.until_all_agree(
        lambda m: all(sorted(s[4]) == list(IDS) for s in partitions(m, topic).values()),
        "the victim back in every ISR", timeout=WAIT))


@pytest.mark.slow
@pytest.mark.parametrize("source", ["kafka", "odradek"])
def test_streaming_exactly_once_across_a_leader_kill(spark: Any, cluster: SyncCluster, source: str,
                                                     tmp_path: Path) -> None:
    topic = unique_topic(f"failover-{source}")
    create_durable_topic(cluster, topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    producer = PacedProducer(cluster.bootstrap, topic)
    query = start_query(spark, source, cluster.bootstrap, topic, out, checkpoint)
    try:
        producer.start()
        until(lambda: rows_done(query) > 0, "first output", WAIT, query)

        before_kill = rows_done(query)
        produced_at_kill = producer.sent
        victim = kill_a_leader(cluster, topic, producer.go_on)

        # the query goes on through the new leaders, then is stopped and restarted from its
        # checkpoint while the victim is still down
        at_election = rows_done(query)
        until(lambda: rows_done(query) > at_election, "output from the new leaders", WAIT, query)
        query.stop()
        assert query.exception() is None
        query = start_query(spark, source, cluster.bootstrap, topic, out, checkpoint)
        until(lambda: rows_done(query) > 0, "output after the restart from the checkpoint", WAIT, query)

        restart(cluster, topic, victim)
        producer.join(N / RATE + 90)
        assert not producer.is_alive()
        assert producer.failed == [] and len(producer.acked) == N
        assert 0 < produced_at_kill <= N // 3  # the rest was produced after the kill

        ends = {q: 1 + max(o for pp, o in producer.acked.values() if pp == q) for q in range(PARTITIONS)}
        until(lambda: caught_up(query, topic, ends), f"the query at the log ends {ends}", CATCH_UP_S, query)
    finally:
        producer.go_on.set()  # a failure before the kill must not leave the producer waiting
        query.stop()
    assert query.exception() is None

    rows = [(r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect()]
    assert len(rows) == N  # nothing twice, nothing else
    assert sorted(rows) == sorted((p, o, v) for v, (p, o) in producer.acked.items())
    assert 0 < before_kill < N


TXNS = 60  # transactions, paced TXN_RATE/s; every third is aborted
TXN_RATE = 12
PER_PARTITION = 4  # records per partition per transaction


class TransactionalProducer(threading.Thread):
    """A confluent-kafka (librdkafka) transactional producer: TXNS transactions of PER_PARTITION
    records to every partition, every third aborted, the others committed. Like `PacedProducer`,
    it waits for `go_on` after the first third. A transaction whose commit fails with an abortable
    error is aborted; one whose commit keeps failing with retriable errors is `indeterminate`.
    `committed` and `aborted` map each value to its (partition, offset) from the delivery report."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="transactional-producer", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.go_on = threading.Event()
        self.committed: dict[str, tuple[int, int]] = {}
        self.aborted: dict[str, tuple[int, int]] = {}
        self.indeterminate: list[set[str]] = []
        self.error: BaseException | None = None
        self.begun = 0

    def run(self) -> None:
        from confluent_kafka import KafkaException, Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"spark-{self.topic}",
                             "transaction.timeout.ms": 60_000, "linger.ms": 5})
        try:
            producer.init_transactions(60)
            for t in paced(TXNS, TXN_RATE, self.go_on, CATCH_UP_S + PROMISE_S):
                self.begun = t + 1
                delivered: dict[str, tuple[int, int]] = {}

                def report(err: Any, msg: Any, delivered: dict[str, tuple[int, int]] = delivered) -> None:
                    if err is None:
                        delivered[msg.value().decode()] = (msg.partition(), msg.offset())

                producer.begin_transaction()
                values = [f"t{t:03d}-p{p}-{j}" for p in range(PARTITIONS) for j in range(PER_PARTITION)]
                for v in values:
                    producer.produce(self.topic, v.encode(), partition=int(v.split("-p")[1][0]), on_delivery=report)
                producer.flush(30)  # in the log before the outcome: an abort would purge unsent records
                outcome = "abort" if t % 3 == 2 else "commit"
                for _attempt in range(5):
                    try:
                        if outcome == "commit":
                            producer.commit_transaction(30)
                        else:
                            producer.abort_transaction(30)
                        break
                    except KafkaException as e:
                        if e.args[0].txn_requires_abort():
                            outcome = "abort"
                        elif not e.args[0].retriable():
                            raise
                else:
                    self.indeterminate.append(set(values))
                    continue
                producer.poll(0)  # the delivery reports of this transaction
                if outcome == "commit":
                    assert set(delivered) == set(values), f"t{t}: delivered {sorted(delivered)}"
                    self.committed.update(delivered)
                else:
                    self.aborted.update(delivered)
        except BaseException as e:  # surfaced by the test
            self.error = e
        finally:
            producer.flush(10)


def stable_ends(bootstrap: str, topic: str, timeout: float = WAIT) -> dict[int, int]:
    """Each partition's end once no transaction is open on it: the last stable offset equal to
    the high watermark (every marker written), as a read_committed reader's end."""
    from kafka import KafkaConsumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    committed = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    uncommitted = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + timeout
        while True:
            lso, hw = committed.end_offsets(tps), uncommitted.end_offsets(tps)
            if lso == hw:
                return {tp.partition: o for tp, o in lso.items()}
            assert time.monotonic() < deadline, f"last stable offsets {lso} never reached {hw}"
            time.sleep(0.1)
    finally:
        committed.close()
        uncommitted.close()


@pytest.mark.slow
@pytest.mark.parametrize("source", ["kafka", "odradek"])
def test_streaming_read_committed_across_a_leader_kill(spark: Any, cluster: SyncCluster, source: str,
                                                       tmp_path: Path) -> None:
    """kafka.isolation.level=read_committed on the cluster (issue #22): a query reads an RF 3 topic
    while a transactional producer commits and aborts transactions over every partition, the
    leader of a partition is killed -9 mid-stream (its transactions' markers are then written by
    the new leaders) and restarted. The Parquet output holds exactly the committed transactions'
    records at the offsets the producer was given, each once: no aborted record, none of a
    transaction whose outcome the producer could not learn unless all of it."""
    topic = unique_topic(f"txn-failover-{source}")
    create_durable_topic(cluster, topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    producer = TransactionalProducer(cluster.bootstrap, topic)
    query = start_query(spark, source, cluster.bootstrap, topic, out, checkpoint,
                        **{"kafka.isolation.level": "read_committed"})
    try:
        producer.start()
        until(lambda: rows_done(query) > 0, "first output", CATCH_UP_S, query)  # a loaded machine's first batch
        begun_at_kill = producer.begun
        victim = kill_a_leader(cluster, topic, producer.go_on)
        at_election = rows_done(query)
        until(lambda: rows_done(query) > at_election or not producer.is_alive(),
              "output from the new leaders", WAIT, query)
        restart(cluster, topic, victim)
        producer.join(TXNS / TXN_RATE + 120)
        assert not producer.is_alive()
        assert producer.error is None, producer.error
        assert 0 < begun_at_kill <= TXNS // 3  # the rest began after the kill
        ends = stable_ends(cluster.bootstrap, topic)
        until(lambda: caught_up(query, topic, ends), f"the query at the stable ends {ends}", CATCH_UP_S, query)
    finally:
        producer.go_on.set()
        query.stop()
    assert query.exception() is None

    rows = [(r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect()]
    undecided = set().union(*producer.indeterminate)
    decided = [row for row in rows if row[2] not in undecided]
    assert sorted(decided) == sorted((p, o, v) for v, (p, o) in producer.committed.items())
    seen = {row[2] for row in rows}
    for values in producer.indeterminate:  # all of such a transaction or none of it
        assert values <= seen or not values & seen, sorted(values & seen)
    assert len(rows) == len(seen)  # nothing twice
    assert len(producer.committed) >= (TXNS * 2 // 3 - 3) * PARTITIONS * PER_PARTITION
    assert len(producer.aborted) >= (TXNS // 3 - 3) * PARTITIONS * PER_PARTITION  # in the log, not read
