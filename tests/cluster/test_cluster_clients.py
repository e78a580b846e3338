"""Stock clients and Kafka's tools against three `odradek serve` brokers in ZooKeeper mode (issue
#14), with a real ZooKeeper and the brokers' own controller:

* Clients follow leaders: kafka-python, confluent-kafka, aiokafka, kcat and the Java client
  (kafka-clients 3.9, tests/cluster/java/FollowLeaders.java), each bootstrapped from one broker,
  produce to and consume (assigned partitions, no group) an RF=1 topic whose partitions the three
  brokers lead, while one broker is stopped (SIGTERM) and started again on the same port and log
  dir. Its partitions have no leader meanwhile; the producers retry and every acknowledged record
  is read back exactly once, in order, where it was acknowledged.
* Topics with RF 1 and 3 created through kafka-python, confluent-kafka and Kafka's kafka-topics
  (TopicCommand on the Java AdminClient): Kafka's rack-unaware assignment spreads leaders (each
  broker leads 10 of 30 partitions), every broker's Metadata is the same, the znodes are Kafka
  3.9's JSON field by field; kafka-topics --describe, --alter --partitions and --delete on the
  cluster.
* A kafka-python consumer group whose coordinator is the restarting broker: every record read,
  and the committed offsets read back after the coordinator's restart.

Every wait is bounded; waits are on events (a record read, a process line) except for state only
visible by asking (a broker's Metadata), which is polled."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import pytest

from controller.zk.client import ZooKeeperClient
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.messages import MetadataRequest
from tests.broker_process import BrokerProcess
from tests.cluster.control_requests import metadata_view
from tests.compat.jvm import compile_java, java_command, kafka_version, run_tool
from tests.raw_client import RawConnection
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.partitioner.default import murmur2

CHROOT = "/odradek"
WAIT = 30.0
PARTITIONS = 6  # per client topic: two led by each broker
PER_PHASE = 100  # records per client before the stop, while the broker is down, after it is back
JAVA = Path(__file__).parent / "java"
# RF 1 for __consumer_offsets: its acks=all appends need no follower (replication is #15's). At
# teardown the last broker leads RF 3 partitions no live replica can take: its controlled shutdown
# is retried controlled.shutdown.max.retries times, Kafka's 5 s apart.
BROKER_SETTINGS = ("offsets.topic.replication.factor=1", "offsets.topic.num.partitions=6",
                   "group.initial.rebalance.delay.ms=0", "controlled.shutdown.retry.backoff.ms=200")


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    assert kafka_version().startswith("3.9."), kafka_version()
    return compile_java([JAVA / "FollowLeaders.java"], tmp_path_factory.mktemp("follow-leaders") / "classes")


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[list[BrokerProcess]]:
    """Brokers 1, 2, 3 of one ZooKeeper-mode cluster (started together), once each broker's
    Metadata lists all three; stopped at teardown."""
    brokers = [BrokerProcess(tmp_path / f"broker-{i}", overrides=BROKER_SETTINGS,
                             zookeeper_connect=zookeeper.connect_string(CHROOT), broker_id=i) for i in (1, 2, 3)]
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(BrokerProcess.start, brokers))
        wait_for_metadata(brokers, lambda views: all(len(v["brokers"]) == 3 and v["controller_id"] in (1, 2, 3)
                                                     for v in views), "three live brokers and a controller")
        yield brokers
    finally:
        for b in brokers:
            b.stop()


def metadata(b: BrokerProcess) -> dict[str, Any]:
    with RawConnection(b.port) as conn:
        return metadata_view(conn.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)))


def wait_for_metadata(brokers: list[BrokerProcess], done: Callable[[list[dict[str, Any]]], bool], what: str,
                      timeout: float = WAIT) -> list[dict[str, Any]]:
    """Poll every broker's Metadata until `done(views)` (UpdateMetadata reaches brokers one by one
    and nothing tells a client when)."""
    deadline = time.monotonic() + timeout
    while True:
        views = [metadata(b) for b in brokers]
        if done(views):
            return views
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout}s; last Metadata: {views}")
        time.sleep(0.05)


def leaders(view: dict[str, Any], topic: str) -> dict[int, int]:
    return {p: state[1] for p, state in view["topics"][topic][2].items()}


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """org.apache.kafka.common.Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


# ---------------------------------------------------------------------------------------------
# The clients: each producer sends value `<client>-<i>` to partition i % PARTITIONS and reports
# what was acknowledged; each consumer reads every partition from the beginning until stopped.

Acked = dict[str, tuple[int, int | None]]  # value -> (partition, offset; None if the client does not say)


class Consumed:
    """The records a consumer has read, (partition, offset, value), and a wait on them."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int, str]] = []
        self._changed = threading.Condition()

    def add(self, partition: int, offset: int, value: str) -> None:
        with self._changed:
            self.records.append((partition, offset, value))
            self._changed.notify_all()

    def wait_for(self, values: set[str], timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: values <= {r[2] for r in self.records}, timeout)


class LineProcess:
    """A client subprocess fed through stdin whose stdout lines go to `on_line` (a reader thread)
    and whose stderr goes to a file (its retry warnings must not fill a pipe)."""

    def __init__(self, cmd: list[str], on_line: Callable[[str], None], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._stderr = stderr_path.open("w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, args=(on_line,), daemon=True)
        self._reader.start()

    def _read(self, on_line: Callable[[str], None]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            on_line(line.rstrip("\n"))

    def write(self, line: str) -> None:
        stdin: IO[str] | None = self.proc.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def finish(self, timeout: float, terminate: bool = False) -> int:
        """End of input (or SIGTERM), then wait for the exit (bounded) and the last lines."""
        assert self.proc.stdin is not None
        if terminate:
            self.proc.terminate()
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self._closed()
        return rc

    def stderr(self) -> str:
        return self.stderr_path.read_text()[-4000:]

    def kill(self) -> None:
        """Teardown after a failure: whatever still runs is killed."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._closed()

    def _closed(self) -> None:
        self._reader.join(5)
        for f in (self.proc.stdin, self.proc.stdout, self._stderr):
            if f is not None:
                f.close()


class LoopThread:
    """An asyncio loop in a thread of its own, for aiokafka next to the blocking clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Any, timeout: float = WAIT) -> Any:
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class Client:
    """A client the test drives: `send` a record, `end_phase` after each batch of sends,
    `close_producer` (flush, bounded) -> what was acknowledged and the failures, `stop_consumer`
    once everything acknowledged was read, `abort` at teardown (whatever still runs)."""

    name = ""
    consumed: Consumed

    def send(self, partition: int, value: str) -> None:
        raise NotImplementedError

    def end_phase(self) -> None:
        """Records go out as they are sent: nothing to do."""

    @staticmethod
    def producer_of(index: int) -> int:
        """Which of the client's producers sent record `index`: one sends them all."""
        return 0

    def close_producer(self) -> tuple[Acked, list[str]]:
        raise NotImplementedError

    def stop_consumer(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError


class KafkaPythonClient(Client):
    name = "kafka-python"

    def __init__(self, bootstrap: str, topic: str, tmp: Path) -> None:
        self.topic = topic
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                      delivery_timeout_ms=60_000, request_timeout_ms=15_000, linger_ms=5)
        self.futures: list[tuple[str, Any]] = []
        self.consumed = Consumed()
        self._stop = threading.Event()
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      auto_offset_reset="earliest")
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.consumer.assign(tps)
        self.consumer.seek_to_beginning(*tps)
        self._thread = threading.Thread(target=self._consume, daemon=True)
        self._thread.start()

    def _consume(self) -> None:
        while not self._stop.is_set():
            for records in self.consumer.poll(timeout_ms=200).values():
                for r in records:
                    self.consumed.add(r.partition, r.offset, r.value.decode())

    def send(self, partition: int, value: str) -> None:
        self.futures.append((value, self.producer.send(self.topic, value.encode(), partition=partition)))

    def close_producer(self) -> tuple[Acked, list[str]]:
        self.producer.flush(timeout=75)
        acked: Acked = {}
        errors: list[str] = []
        for value, future in self.futures:
            try:
                md = future.get(timeout=0)
                acked[value] = (md.partition, md.offset)
            except Exception as e:  # the test reports every failed record
                errors.append(f"{value}: {e!r}")
        self.producer.close(timeout=10)
        return acked, errors

    def stop_consumer(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()

    def abort(self) -> None:
        self.stop_consumer()  # both closes are idempotent
        self.producer.close(timeout=0)


class ConfluentClient(Client):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str, topic: str, tmp: Path) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
        from confluent_kafka import TopicPartition as CTP

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "message.timeout.ms": 60_000, "linger.ms": 5})
        self.acked: Acked = {}
        self.errors: list[str] = []
        self.sent = 0
        self.consumed = Consumed()
        self._stop = threading.Event()
        # assign() only: a group.id is required by the client's config, no group is joined
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                                  "enable.auto.commit": False, "enable.auto.offset.store": False})
        self.consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self._thread = threading.Thread(target=self._consume, daemon=True)
        self._thread.start()

    def _consume(self) -> None:
        while not self._stop.is_set():
            m = self.consumer.poll(0.2)
            if m is not None and m.error() is None:
                self.consumed.add(m.partition(), m.offset(), m.value().decode())

    def _delivered(self, err: Any, msg: Any) -> None:
        value = msg.value().decode()
        if err is not None:
            self.errors.append(f"{value}: {err}")
        else:
            self.acked[value] = (msg.partition(), msg.offset())

    def send(self, partition: int, value: str) -> None:
        self.producer.produce(self.topic, value.encode(), partition=partition, on_delivery=self._delivered)
        self.producer.poll(0)

    def close_producer(self) -> tuple[Acked, list[str]]:
        left = self.producer.flush(75)
        return self.acked, self.errors + ([f"{left} records not delivered after flush"] if left else [])

    def stop_consumer(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(10)
            self.consumer.close()

    def abort(self) -> None:
        self.stop_consumer()
        self.producer.purge()


class AiokafkaClient(Client):
    name = "aiokafka"

    def __init__(self, bootstrap: str, topic: str, tmp: Path) -> None:
        self.topic = topic
        self.bootstrap = bootstrap
        self.loop = LoopThread()
        self.consumed = Consumed()
        self.pending: list[tuple[str, Any]] = []
        self._stop = asyncio.Event()
        self.producer, self.consumer = self.loop.run(self._start())
        self._task = self.loop.submit(self._consume())

    async def _start(self) -> tuple[Any, Any]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.structs import TopicPartition as ATP

        # request_timeout_ms is also how long a batch may wait for a leader (aiokafka's batch ttl)
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True,
                                    request_timeout_ms=60_000, linger_ms=5)
        await producer.start()
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        tps = [ATP(self.topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        return producer, consumer

    async def _consume(self) -> None:
        while not self._stop.is_set():
            for records in (await self.consumer.getmany(timeout_ms=200)).values():
                for r in records:
                    self.consumed.add(r.partition, r.offset, r.value.decode())

    async def _send(self, partition: int, value: str) -> Any:
        return await (await self.producer.send(self.topic, value.encode(), partition=partition))

    def send(self, partition: int, value: str) -> None:
        self.pending.append((value, self.loop.submit(self._send(partition, value))))

    def close_producer(self) -> tuple[Acked, list[str]]:
        acked: Acked = {}
        errors: list[str] = []
        deadline = time.monotonic() + 75
        for value, future in self.pending:
            try:
                md = future.result(max(0.0, deadline - time.monotonic()))
                acked[value] = (md.partition, md.offset)
            except Exception as e:  # the test reports every failed record
                errors.append(f"{value}: {e!r}")
        return acked, errors

    def stop_consumer(self) -> None:
        if self.loop.loop.is_closed():
            return
        self.loop.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._task.result(10)
        finally:
            self.loop.run(self.consumer.stop())
            self.loop.run(self.producer.stop())  # idempotent
            self.loop.close()

    def abort(self) -> None:
        self.stop_consumer()


def murmur2_partition(key: str) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % PARTITIONS


class KcatClient(Client):
    """kcat's producer reads stdin 128 bytes at a time (fread) and sends a line once more input
    follows it, so each phase's records go to a kcat of their own whose input ends with them: at
    end of input it sends the rest and waits for their delivery. librdkafka's murmur2 partitioner
    (Java's) puts each record where its key says, so each partition gets a key that hashes to it.
    kcat reports each failed delivery on stderr and nothing for the delivered ones: acknowledged
    are all records when no kcat reports a failure and each exits 0. Its consumer (no -G: every
    partition assigned) prints partition, offset and value."""

    name = "kcat"

    @staticmethod
    def producer_of(index: int) -> int:
        return index // PER_PHASE

    def __init__(self, bootstrap: str, topic: str, tmp: Path) -> None:
        self.bootstrap, self.topic, self.tmp = bootstrap, topic, tmp
        self.keys: dict[int, str] = {}
        n = 0
        while len(self.keys) < PARTITIONS:
            self.keys.setdefault(murmur2_partition(f"key-{n}"), f"key-{n}")
            n += 1
        self.sent: list[tuple[int, str]] = []
        self.pending: list[str] = []
        self.producers: list[LineProcess] = []
        self.consumed = Consumed()
        self.consumer = LineProcess(
            ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-u", "-f", "%p %o %s\\n"],
            self._record, tmp / "kcat-consumer.stderr")

    def _record(self, line: str) -> None:
        p, o, value = line.split(" ", 2)
        self.consumed.add(int(p), int(o), value)

    def send(self, partition: int, value: str) -> None:
        self.sent.append((partition, value))
        self.pending.append(f"{self.keys[partition]}\t{value}")

    def end_phase(self) -> None:
        producer = LineProcess(
            ["kcat", "-P", "-b", self.bootstrap, "-t", self.topic, "-K", "\t", "-X", "enable.idempotence=true",
             "-X", "message.timeout.ms=60000", "-X", "partitioner=murmur2", "-X", "linger.ms=5"],
            lambda line: None, self.tmp / f"kcat-producer-{len(self.producers)}.stderr")
        self.producers.append(producer)
        for line in self.pending:
            producer.write(line)
        self.pending.clear()
        assert producer.proc.stdin is not None
        producer.proc.stdin.close()

    def close_producer(self) -> tuple[Acked, list[str]]:
        failures = []
        for producer in self.producers:
            rc = producer.finish(75)
            if rc != 0 or "Delivery failed" in producer.stderr():
                failures.append(f"kcat exited {rc}:\n{producer.stderr()}")
        if failures:
            return {}, failures
        return {value: (p, None) for p, value in self.sent}, []

    def stop_consumer(self) -> None:
        self.consumer.finish(10, terminate=True)

    def abort(self) -> None:
        for producer in self.producers:
            producer.kill()
        self.consumer.kill()


class JavaClient(Client):
    """tests/cluster/java/FollowLeaders: the default Java producer (idempotent, acks=all) and an
    assign-only KafkaConsumer, each a JVM fed and read line by line."""

    name = "java"

    def __init__(self, bootstrap: str, topic: str, tmp: Path, classes: str = "") -> None:
        self.acked: Acked = {}
        self.errors: list[str] = []
        self.producer = LineProcess(java_command("FollowLeaders", ["produce", bootstrap, topic], classpath=classes),
                                    self._ack, tmp / "java-producer.stderr")
        self.consumed = Consumed()
        self.consumer = LineProcess(java_command("FollowLeaders", ["consume", bootstrap, topic], classpath=classes),
                                    self._record, tmp / "java-consumer.stderr")

    def _ack(self, line: str) -> None:
        kind, rest = line.split(" ", 1) if " " in line else (line, "")
        if kind == "ack":
            p, o, value = rest.split(" ", 2)
            self.acked[value] = (int(p), int(o))
        elif kind == "err":
            self.errors.append(rest)

    def _record(self, line: str) -> None:
        if line.startswith("rec "):
            p, o, value = line[4:].split(" ", 2)
            self.consumed.add(int(p), int(o), value)

    def send(self, partition: int, value: str) -> None:
        self.producer.write(f"{partition} {value}")

    def close_producer(self) -> tuple[Acked, list[str]]:
        rc = self.producer.finish(75)
        return self.acked, self.errors + ([f"exited {rc}:\n{self.producer.stderr()}"] if rc else [])

    def stop_consumer(self) -> None:
        rc = self.consumer.finish(20)
        assert rc == 0, self.consumer.stderr()

    def abort(self) -> None:
        self.producer.kill()
        self.consumer.kill()


CLIENTS = [KafkaPythonClient, ConfluentClient, AiokafkaClient, KcatClient, JavaClient]


def check_read_back(name: str, sent: list[str], acked: Acked, errors: list[str],
                    records: list[tuple[int, int, str]], producer_of: Callable[[int], int]) -> None:
    """Every record acknowledged, and read back exactly once where it was acknowledged, each
    partition's offsets 0..n-1, in send order per producer (`producer_of(i)` says which of the
    client's producers sent record i): idempotent producers write no duplicates and keep order."""
    assert not errors, f"{name}: {len(errors)} records failed: {errors[:5]}"
    assert set(acked) == set(sent), f"{name}: not acknowledged: {sorted(set(sent) - set(acked))[:10]}"
    at: dict[tuple[int, int], str] = {}
    for p, o, value in records:  # a record may be read twice (a consumer refetching): the same one
        assert at.setdefault((p, o), value) == value, (name, p, o, value, at[(p, o)])
    by_value: dict[str, list[tuple[int, int]]] = {}
    for (p, o), value in at.items():
        by_value.setdefault(value, []).append((p, o))
    duplicates = {v: where for v, where in by_value.items() if len(where) > 1}
    assert not duplicates, f"{name}: records written more than once: {list(duplicates.items())[:5]}"
    assert set(by_value) == set(sent), f"{name}: read {len(by_value)} of {len(sent)}, " \
                                       f"missing {sorted(set(sent) - set(by_value))[:10]}"
    for value, [(p, o)] in by_value.items():
        want_p, want_o = acked[value]
        assert p == want_p == int(value.rsplit("-", 1)[1]) % PARTITIONS, (name, value, p, want_p)
        assert want_o is None or o == want_o, (name, value, o, want_o)
    for p in range(PARTITIONS):
        in_log = sorted((o, v) for (q, o), v in at.items() if q == p)
        assert [o for o, _ in in_log] == list(range(len(in_log))), (name, p, "offsets with holes")
        indexes = [int(v.rsplit("-", 1)[1]) for _, v in in_log]
        for producer in {producer_of(i) for i in indexes}:
            mine = [i for i in indexes if producer_of(i) == producer]
            assert mine == sorted(mine), (name, p, producer, "records out of send order", mine)


def test_clients_follow_leaders_through_a_broker_restart(cluster, java_classes, tmp_path):
    brokers = cluster
    view = metadata(brokers[0])
    controller = view["controller_id"]
    # restart a broker that is not the controller (controller failover is test_cluster_failures')
    target = next(b for i, b in zip((1, 2, 3), brokers, strict=True) if i != controller)
    target_id = brokers.index(target) + 1
    survivors = [b for b in brokers if b is not target]

    topics = {cls.name: f"follow-{cls.name}" for cls in CLIENTS}
    admin = KafkaAdminClient(bootstrap_servers=brokers[0].bootstrap, request_timeout_ms=20_000)
    try:
        result = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics.values()])
        assert all(t["error_code"] == 0 for t in result["topics"]), result
    finally:
        admin.close()
    views = wait_for_metadata(brokers, lambda vs: all(v == vs[0] for v in vs) and all(
        t in vs[0]["topics"] and len(leaders(vs[0], t)) == PARTITIONS and min(leaders(vs[0], t).values()) > 0
        for t in topics.values()), "the topics on every broker")
    led_by_target = {t: sorted(p for p, leader in leaders(views[0], t).items() if leader == target_id)
                     for t in topics.values()}
    assert all(len(ps) == 2 for ps in led_by_target.values()), led_by_target  # 6 partitions, 3 brokers

    clients: list[Client] = []
    try:
        for n, cls in enumerate(CLIENTS):  # each client bootstrapped from one of the survivors
            (tmp_path / cls.name).mkdir()
            extra = {"classes": java_classes} if cls is JavaClient else {}
            clients.append(cls(survivors[n % 2].bootstrap, topics[cls.name], tmp_path / cls.name, **extra))
        sent: dict[str, list[str]] = {c.name: [] for c in clients}

        def phase(start: int) -> None:
            for i in range(start, start + PER_PHASE):
                for c in clients:
                    value = f"{c.name}-{i}"
                    c.send(i % PARTITIONS, value)
                    sent[c.name].append(value)
            for c in clients:
                c.end_phase()

        phase(0)
        # every consumer is fetching from every leader before the broker goes
        for c in clients:
            assert c.consumed.wait_for(set(sent[c.name]), 60), (c.name, "phase 1 not read", len(c.consumed.records))
        assert target.stop() == 0
        phase(PER_PHASE)  # to partitions of which a third have no leader now
        target.start()
        views = wait_for_metadata([*survivors, target], lambda vs: all(
            leaders(v, t)[p] == target_id for v in vs for t, ps in led_by_target.items() for p in ps),
            "the restarted broker leading its partitions again")
        # Kafka's controller: leader -1 (epoch 1, ISR kept) when the broker left, elected again
        # from the ISR (epoch 2) when it came back; the other partitions were not touched
        for t in topics.values():
            epochs = {p: state[2] for p, state in views[0]["topics"][t][2].items()}
            assert epochs == {p: 2 if p in led_by_target[t] else 0 for p in range(PARTITIONS)}, (t, epochs)
        phase(2 * PER_PHASE)
        results = {c.name: c.close_producer() for c in clients}
        for c in clients:
            acked, _ = results[c.name]
            c.consumed.wait_for(set(acked), WAIT)
        for c in clients:
            c.stop_consumer()
    finally:
        for c in clients:
            c.abort()
    for c in clients:
        acked, errors = results[c.name]
        check_read_back(c.name, sent[c.name], acked, errors, c.consumed.records, c.producer_of)


# ---------------------------------------------------------------------------------------------
# Topics through three admin clients, and Kafka's kafka-topics on the cluster


def kafka_rack_unaware(n_partitions: int, rf: int, brokers: list[int], start: int, shift: int) -> dict[int, list[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokersRackUnaware with a given start index and first
    replica shift (random in Kafka): leaders round robin from `start`, followers shifted by one
    more every len(brokers) partitions."""
    out: dict[int, list[int]] = {}
    n = len(brokers)
    for p in range(n_partitions):
        s = shift + p // n  # nextReplicaShift, bumped at every multiple of n
        first = (p + start) % n
        out[p] = [brokers[first]] + [brokers[(first + 1 + (s + j) % (n - 1)) % n] for j in range(rf - 1)]
    return out


def assert_kafka_assignment(topic: str, replicas: dict[int, list[int]], rf: int) -> None:
    """The assignment is one Kafka's rack-unaware algorithm can make over brokers 1, 2, 3."""
    candidates = [kafka_rack_unaware(len(replicas), rf, [1, 2, 3], start, shift)
                  for start in range(3) for shift in range(3)]
    assert replicas in candidates, (topic, replicas)


async def read_znodes(zookeeper: ZooKeeperServer, paths: list[str]) -> dict[str, tuple[bytes | None, Any]]:
    """(data, stat) of each path, (None, None) for a missing one, with a session of the test's."""
    client = await ZooKeeperClient(zookeeper.connect_string(CHROOT), session_timeout_ms=6000,
                                   connection_timeout_ms=10_000, request_timeout_ms=10_000).start()
    try:
        zk = KafkaZkClient(client)
        return {path: await zk.get_data_and_stat(path) for path in paths}
    finally:
        await client.close()


async def children(zookeeper: ZooKeeperServer, path: str) -> list[str]:
    client = await ZooKeeperClient(zookeeper.connect_string(CHROOT), session_timeout_ms=6000,
                                   connection_timeout_ms=10_000, request_timeout_ms=10_000).start()
    try:
        return await KafkaZkClient(client).get_children(path)
    finally:
        await client.close()


def kafka_topics(broker: BrokerProcess, *args: str) -> str:
    """Kafka 3.9.2's kafka-topics (TopicCommand on the Java AdminClient), its stdout."""
    return run_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap, *args,
                    timeout=90).stdout


def compact_json(data: bytes | None) -> dict[str, Any]:
    """A znode's JSON as Kafka's Jackson writes it: one line, no spaces."""
    assert data is not None
    assert b" " not in data and b"\n" not in data, data
    doc = json.loads(data)
    assert isinstance(doc, dict), data
    return doc


def check_topic_znodes(zookeeper: ZooKeeperServer, view: dict[str, Any], topic: str,
                       configs: dict[str, str]) -> None:
    """/brokers/topics/<t>, its partitions and their state znodes, and /config/topics/<t>, field
    by field as Kafka 3.9.2 writes them, against the Metadata every broker answers."""
    _, topic_id, parts = view["topics"][topic]
    base = f"/brokers/topics/{topic}"
    paths = [base, f"{base}/partitions", f"/config/topics/{topic}", "/controller_epoch"]
    for p in parts:
        paths += [f"{base}/partitions/{p}", f"{base}/partitions/{p}/state"]
    znodes = asyncio.run(read_znodes(zookeeper, paths))
    assert sorted(asyncio.run(children(zookeeper, f"{base}/partitions")), key=int) == [str(p) for p in sorted(parts)]

    doc = compact_json(znodes[base][0])
    assert sorted(doc) == ["adding_replicas", "partitions", "removing_replicas", "topic_id", "version"], doc
    assert doc["version"] == 3
    assert doc["topic_id"] == kafka_uuid(topic_id)
    assert doc["adding_replicas"] == {} and doc["removing_replicas"] == {}
    assert doc["partitions"] == {str(p): state[3] for p, state in parts.items()}

    controller_epoch = int(znodes["/controller_epoch"][0])
    assert znodes[f"{base}/partitions"][0] is None and znodes[f"{base}/partitions"][1] is not None
    for p, (error, leader, leader_epoch, _, isr, offline) in parts.items():
        data, stat = znodes[f"{base}/partitions/{p}"]
        assert data is None and stat is not None
        data, stat = znodes[f"{base}/partitions/{p}/state"]
        state = compact_json(data)
        assert sorted(state) == ["controller_epoch", "isr", "leader", "leader_epoch", "version"], state
        assert state["version"] == 1
        assert (state["leader"], state["leader_epoch"], state["isr"]) == (leader, leader_epoch, isr), (topic, p)
        assert 1 <= state["controller_epoch"] <= controller_epoch
        assert stat.version == 0  # the partition epoch: written once, at creation
        assert (error, offline) == (0, [])
    assert compact_json(znodes[f"/config/topics/{topic}"][0]) == {"version": 1, "config": configs}


def test_topics_created_by_three_admin_clients_spread_and_match_kafkas_znodes(cluster, zookeeper):
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import NewTopic as CNewTopic

    brokers = cluster
    admin = KafkaAdminClient(bootstrap_servers=brokers[0].bootstrap, request_timeout_ms=20_000)
    try:
        result = admin.create_topics([NewTopic("kp-rf3", 30, 3), NewTopic("kp-rf1", 6, 1)])
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("kp-rf3", 0), ("kp-rf1", 0)]
    finally:
        admin.close()
    ck = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    for f in ck.create_topics([CNewTopic("ck-rf3", 30, 3), CNewTopic("ck-rf1", 6, 1)],
                              operation_timeout=20).values():
        assert f.result(30) is None
    with ThreadPoolExecutor(2) as pool:  # two JVMs at once
        outs = list(pool.map(lambda args: kafka_topics(brokers[2], "--create", *args), [
            ("--topic", "jv-rf3", "--partitions", "30", "--replication-factor", "3"),
            ("--topic", "jv-rf1", "--partitions", "6", "--replication-factor", "1", "--config",
             "cleanup.policy=compact"),
        ]))
    assert [o.strip() for o in outs] == ["Created topic jv-rf3.", "Created topic jv-rf1."]

    topics = {"kp-rf3": 3, "kp-rf1": 1, "ck-rf3": 3, "ck-rf1": 1, "jv-rf3": 3, "jv-rf1": 1}
    views = wait_for_metadata(brokers, lambda vs: all(v == vs[0] for v in vs) and set(vs[0]["topics"]) == set(topics)
                              and all(s[1] > 0 for t in vs[0]["topics"].values() for s in t[2].values()),
                              "six topics with leaders, the same on every broker")
    view = views[0]
    assert len({view["topics"][t][1] for t in topics}) == 6  # six topic ids
    for topic, rf in topics.items():
        error, _, parts = view["topics"][topic]
        assert error == 0
        replicas = {p: s[3] for p, s in parts.items()}
        assert_kafka_assignment(topic, replicas, rf)
        led = [s[1] for s in parts.values()]
        assert sorted(led.count(b) for b in (1, 2, 3)) == [len(parts) // 3] * 3, (topic, led)  # 10 each of 30
        assert all(s[1] == s[3][0] and s[4] == s[3] and s[2] == 0 for s in parts.values()), (topic, parts)
        check_topic_znodes(zookeeper, view, topic, {"cleanup.policy": "compact"} if topic == "jv-rf1" else {})
        for b, i in zip(brokers, (1, 2, 3), strict=True):  # each replica's log, the followers' too
            hosted = {d.name for d in b.log_dir.iterdir() if d.name.startswith(f"{topic}-")}
            assert hosted == {f"{topic}-{p}" for p, s in parts.items() if i in s[3]}, (topic, i)

    # kafka-topics --describe shows every partition as Metadata does
    described: dict[str, dict[int, tuple[int, list[int], list[int]]]] = {}
    headers: dict[str, str] = {}
    for line in kafka_topics(brokers[1], "--describe").splitlines():
        if m := re.match(r"Topic: (\S+)\tTopicId: (\S+)\tPartitionCount: (\d+)\tReplicationFactor: (\d+)\tConfigs: (.*)",
                         line):
            headers[m[1]] = line
            assert (m[2], int(m[3]), int(m[4])) == (kafka_uuid(view["topics"][m[1]][1]), len(view["topics"][m[1]][2]),
                                                    topics[m[1]]), line
            # the topic's /config/topics override, as DescribeConfigs reports it
            assert ("cleanup.policy=compact" in m[5]) == (m[1] == "jv-rf1"), line
        elif m := re.match(r"\tTopic: (\S+)\tPartition: (\d+)\tLeader: (\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", line):
            described.setdefault(m[1], {})[int(m[2])] = (int(m[3]), [int(x) for x in m[4].split(",")],
                                                         [int(x) for x in m[5].split(",")])
        else:
            raise AssertionError(f"unexpected line of kafka-topics --describe: {line!r}")
    assert set(headers) == set(topics)
    assert described == {t: {p: (s[1], s[3], s[4]) for p, s in view["topics"][t][2].items()} for t in topics}

    # --alter --partitions: CreatePartitions continues Kafka's round robin
    before = {p: s[3] for p, s in view["topics"]["kp-rf1"][2].items()}
    assert kafka_topics(brokers[2], "--alter", "--topic", "kp-rf1", "--partitions", "9").strip() == ""
    view = wait_for_metadata(brokers, lambda vs: all(v == vs[0] for v in vs) and len(vs[0]["topics"]["kp-rf1"][2]) == 9
                             and all(s[1] > 0 for s in vs[0]["topics"]["kp-rf1"][2].values()),
                             "kp-rf1 with 9 partitions on every broker")[0]
    after = {p: s[3] for p, s in view["topics"]["kp-rf1"][2].items()}
    assert {p: after[p] for p in range(6)} == before  # existing partitions do not move
    start = [1, 2, 3].index(before[0][0])  # AdminZkClient: the round robin starts at partition 0's leader
    assert after == kafka_rack_unaware(9, 1, [1, 2, 3], start, start)
    check_topic_znodes(zookeeper, view, "kp-rf1", {})
    for b, i in zip(brokers, (1, 2, 3), strict=True):
        hosted = {d.name for d in b.log_dir.iterdir() if d.name.startswith("kp-rf1-")}
        assert hosted == {f"kp-rf1-{p}" for p, r in after.items() if r == [i]}

    # --delete: the controller deletes the replicas (their directories, on all three brokers as
    # checked above, renamed <tp>.<id>-delete, removed file.delete.delay.ms later) and then the znodes
    assert kafka_topics(brokers[0], "--delete", "--topic", "ck-rf3").strip() == ""
    wait_for_metadata(brokers, lambda vs: all("ck-rf3" not in v["topics"] and len(v["topics"]) == 5 for v in vs),
                      "ck-rf3 gone from every broker's Metadata")
    gone = ["/brokers/topics/ck-rf3", "/config/topics/ck-rf3", "/admin/delete_topics/ck-rf3"]
    deadline = time.monotonic() + WAIT
    while any(s is not None for _, s in asyncio.run(read_znodes(zookeeper, gone)).values()):
        assert time.monotonic() < deadline, "ck-rf3's znodes not deleted"
        time.sleep(0.1)
    for b in brokers:
        left = [d.name for d in b.log_dir.iterdir() if d.name.startswith("ck-rf3-") and not d.name.endswith("-delete")]
        assert left == [], (b.log_dir, left)
    ck_rf1 = view["topics"]["ck-rf1"][2]  # the other topics stay
    assert all((brokers[s[1] - 1].log_dir / f"ck-rf1-{p}").is_dir() for p, s in ck_rf1.items())


# ---------------------------------------------------------------------------------------------
# A consumer group whose coordinator restarts


def offsets_partition(group_id: str, partitions: int) -> int:
    """Kafka's GroupCoordinator.partitionFor: Utils.abs(groupId.hashCode) % partitions, with
    Java's String.hashCode."""
    h = 0
    for ch in group_id.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def test_a_kafka_python_group_consumes_through_its_coordinators_restart(cluster, tmp_path):
    """A kafka-python group whose coordinator (the leader of its __consumer_offsets partition, RF 1)
    is the broker that restarts: the consumer reads every acknowledged record at least once (its
    commits wait while the coordinator is away), and after the coordinator restarts once more the
    group's committed offsets are the last ones committed."""
    from protocol.messages import FindCoordinatorRequest

    brokers = cluster
    controller = metadata(brokers[0])["controller_id"]
    target_id = next(i for i in (1, 2, 3) if i != controller)
    target = brokers[target_id - 1]
    survivors = [b for b in brokers if b is not target]
    admin = KafkaAdminClient(bootstrap_servers=survivors[0].bootstrap, request_timeout_ms=20_000)
    try:
        assert admin.create_topics([NewTopic("grouped", PARTITIONS, 1)])["topics"][0]["error_code"] == 0
    finally:
        admin.close()
    with RawConnection(survivors[0].port) as conn:  # the first FindCoordinator creates __consumer_offsets
        conn.call(10, 3, FindCoordinatorRequest(key="probe", key_type=0))
    view = wait_for_metadata(brokers, lambda vs: all(v == vs[0] for v in vs) and all(
        t in vs[0]["topics"] and len(leaders(vs[0], t)) == PARTITIONS and min(leaders(vs[0], t).values()) > 0
        for t in ("grouped", "__consumer_offsets")), "grouped and __consumer_offsets on every broker")[0]
    offsets_leaders = leaders(view, "__consumer_offsets")
    group = next(g for g in (f"group-{n}" for n in range(100))
                 if offsets_leaders[offsets_partition(g, PARTITIONS)] == target_id)
    with RawConnection(survivors[0].port) as conn:
        assert conn.call(10, 3, FindCoordinatorRequest(key=group, key_type=0)).node_id == target_id

    producer = KafkaProducer(bootstrap_servers=survivors[0].bootstrap, acks="all", delivery_timeout_ms=60_000,
                             request_timeout_ms=15_000)
    consumer = KafkaConsumer("grouped", group_id=group, bootstrap_servers=survivors[1].bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    seen: Consumed = Consumed()
    stop = threading.Event()
    commit_errors: list[str] = []

    def consume() -> None:
        while not stop.is_set():
            polled = consumer.poll(timeout_ms=200)
            for records in polled.values():
                for r in records:
                    seen.add(r.partition, r.offset, r.value.decode())
            if polled:
                try:
                    consumer.commit()
                except Exception as e:  # retriable while the coordinator is away: the next poll commits again
                    commit_errors.append(repr(e))

    futures = []
    thread = threading.Thread(target=consume, daemon=True)
    try:
        consumer.topics()  # metadata before the first join (kafka-python 3.0.12's lost rejoin otherwise)
        thread.start()

        def phase(start: int) -> None:
            for i in range(start, start + PER_PHASE):
                futures.append(producer.send("grouped", f"g-{i}".encode(), partition=i % PARTITIONS))

        phase(0)
        producer.flush(30)
        assert seen.wait_for({f"g-{i}" for i in range(PER_PHASE)}, WAIT), len(seen.records)
        assert target.stop() == 0
        phase(PER_PHASE)
        target.start()
        phase(2 * PER_PHASE)
        producer.flush(75)
        acked = {f"g-{i}" for i, f in enumerate(futures) if f.succeeded()}
        assert len(acked) == 3 * PER_PHASE
        assert seen.wait_for(acked, WAIT), f"read {len({r[2] for r in seen.records})} of {len(acked)}"
        stop.set()
        thread.join(10)
        consumer.commit()
        ends = consumer.end_offsets([TopicPartition("grouped", p) for p in range(PARTITIONS)])
    finally:
        stop.set()
        thread.join(10)
        consumer.close()
        producer.close(timeout=10)
    assert {tp.partition: o for tp, o in ends.items()} == dict.fromkeys(range(PARTITIONS), 3 * PER_PHASE // PARTITIONS)
    # the group's offsets as its coordinator reads them back from __consumer_offsets after one
    # more restart, answered to another member
    assert target.stop() == 0
    target.start()
    reader = KafkaConsumer(group_id=group, bootstrap_servers=survivors[0].bootstrap, enable_auto_commit=False)
    try:
        committed = {p: reader.committed(TopicPartition("grouped", p)) for p in range(PARTITIONS)}
    finally:
        reader.close()
    assert committed == dict.fromkeys(range(PARTITIONS), 3 * PER_PHASE // PARTITIONS), (committed, commit_errors[:5])


def test_producer_ids_come_from_disjoint_blocks_of_each_broker(cluster, zookeeper):
    """InitProducerId on every broker: each hands out ids from a block of 1,000 it took from
    /latest_producer_id_block (Kafka's ZkProducerIdManager), so no two brokers ever give an
    idempotent producer the same id; the znode records the last block taken, as Kafka's JSON."""
    from protocol.messages import InitProducerIdRequest

    def init_producer_id(b: BrokerProcess) -> int:
        with RawConnection(b.port) as conn:
            resp = conn.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                                          producer_id=-1, producer_epoch=-1))
        assert resp.error_code == 0, resp
        return resp.producer_id

    ids = {i: [init_producer_id(b) for _ in range(3)] for i, b in enumerate(cluster, 1)}
    blocks = {i: {pid // 1000 for pid in pids} for i, pids in ids.items()}
    assert all(len(bs) == 1 for bs in blocks.values()), ids  # one block per broker
    assert sorted(b for bs in blocks.values() for b in bs) == [0, 1, 2], ids  # three different blocks
    for pids in ids.values():  # consecutive within a broker's block
        assert pids == list(range(pids[0], pids[0] + 3)) and pids[0] % 1000 == 0, ids
    last = max(ids, key=lambda i: ids[i][0])
    data, _ = asyncio.run(read_znodes(zookeeper, ["/latest_producer_id_block"]))["/latest_producer_id_block"]
    # Kafka's ProducerIdBlockZNode writes the bounds as strings
    assert compact_json(data) == {"version": 1, "broker": last, "block_start": "2000", "block_end": "2999"}
