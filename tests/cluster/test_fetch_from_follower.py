"""KIP-392, fetch from the closest replica, on three `odradek serve` brokers in racks r1, r2, r3
with `replica.selector.class` = Kafka's RackAwareReplicaSelector (issue #20 §3).

Kafka's Java consumer (kafka-clients 3.9) and librdkafka (confluent-kafka) with `client.rack=r2`
read every record of an RF 3 topic, and the brokers' logs prove where from: the leaders (1, 3)
sent them to broker 2 for every partition they lead, and broker 2 served them those partitions'
records as a follower. Then broker 2 is killed: the leaders drop it from the ISR, stop sending the
consumers there (they log it), and the consumers read everything produced since from the leaders.
Between the two, what a follower answers a consumer over the wire is checked against Kafka's
rules (raw requests): Fetch v11 up to its high watermark with its leader epoch checked, before
v11 NOT_LEADER_OR_FOLLOWER; ListOffsets and OffsetForLeaderEpoch only from a leader, the epoch
checked first; the leader's answer names the follower, without records, only for r2's clients.

Every wait is bounded and on an event (a record read, a log line) or polled Metadata."""

from __future__ import annotations

import asyncio
import re
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from protocol.messages.fetch_request import FetchPartition, FetchTopic
from protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from tests.broker_process import BrokerProcess
from tests.cluster.processes import IDS, PROMISE_S, RF3, WAIT, partitions, running_cluster
from tests.cluster.test_cluster_clients import Consumed, LineProcess
from tests.compat.jvm import compile_java, java_command, kafka_version
from tests.raw_client import RawConnection
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
    from confluent_kafka import TopicPartition as CTP

JAVA = Path(__file__).parent / "java"
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LAG_MS = 800  # the leaders drop a dead follower from the ISR well before its session expires
SETTINGS = (f"replica.selector.class={RACK_AWARE}", f"replica.lag.time.max.ms={LAG_MS}")
RACKS = {i: (f"broker.rack=r{i}",) for i in IDS}
FOLLOWER = 2  # in the consumers' rack
CLIENTS = ("rack-java", "rack-rdkafka")  # their client.id
PER_PARTITION = 40  # records per partition and phase

SERVED = "Serving a consumer's fetches as a follower"
SENT = "Sending a consumer to its preferred read replica"
BACK = "A consumer reads from the leader again"


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    assert kafka_version().startswith("3.9."), kafka_version()
    return compile_java([JAVA / "FollowLeaders.java"], tmp_path_factory.mktemp("follow-leaders") / "classes")


def logged(broker: BrokerProcess, event: str, **fields: Any) -> set[tuple[str, int]]:
    """(client id, partition) of the broker's log lines of `event` on topic rf3 with `fields`."""
    out = set()
    for line in broker.lines:
        if f"event={event!r}" in line and "topic='rf3'" in line and all(f"{k}={v!r}" in line for k, v in fields.items()):
            client = re.search(r"client_id='([^']*)'", line)
            partition = re.search(r" partition=(\d+)", line)
            assert client and partition, line
            out.add((client.group(1), int(partition.group(1))))
    return out


async def logged_by(broker: BrokerProcess, event: str, want: set[tuple[str, int]],
                    **fields: Any) -> set[tuple[str, int]]:
    """logged(), once it has every pair of `want` (woken by each new line) or after 10 s."""
    await asyncio.to_thread(broker.wait_until, lambda: want <= logged(broker, event, **fields), 10.0)
    return logged(broker, event, **fields)


def produce(bootstrap: str, prefix: str) -> dict[str, tuple[int, int]]:
    """PER_PARTITION records to each rf3 partition with acks=all: value -> (partition, offset)."""
    acked: dict[str, tuple[int, int]] = {}
    errors: list[str] = []

    def done(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 40_000, "linger.ms": 5})
    for i in range(PER_PARTITION * len(RF3)):
        producer.produce("rf3", f"{prefix}{i:04d}".encode(), partition=i % len(RF3), on_delivery=done)
    assert producer.flush(45) == 0 and not errors, errors
    return acked


class RdkafkaConsumer:
    """confluent-kafka (librdkafka) with client.rack, every rf3 partition assigned from the start."""

    def __init__(self, bootstrap: str) -> None:
        self.consumed = Consumed()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                                  "client.id": CLIENTS[1], "client.rack": "r2", "enable.auto.commit": False,
                                  "enable.auto.offset.store": False})
        self.consumer.assign([CTP("rf3", p, OFFSET_BEGINNING) for p in RF3])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._consume, daemon=True)
        self._thread.start()

    def _consume(self) -> None:
        while not self._stop.is_set():
            m = self.consumer.poll(0.2)
            if m is not None and m.error() is None:
                self.consumed.add(m.partition(), m.offset(), m.value().decode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


class JavaConsumer:
    """tests/cluster/java/FollowLeaders consume, with client.rack."""

    def __init__(self, bootstrap: str, classes: str, tmp: Path) -> None:
        self.consumed = Consumed()
        self.proc = LineProcess(java_command("FollowLeaders", ["consume", bootstrap, "rf3", "client.rack=r2",
                                                               f"client.id={CLIENTS[0]}"], classpath=classes),
                                self._record, tmp / "java-consumer.stderr")

    def _record(self, line: str) -> None:
        if line.startswith("rec "):
            p, o, value = line[4:].split(" ", 2)
            self.consumed.add(int(p), int(o), value)

    def close(self) -> None:
        rc = self.proc.finish(20)
        assert rc == 0, self.proc.stderr()


@pytest.fixture
def consumers(java_classes: str, tmp_path: Path) -> Iterator[list[Any]]:
    """Started by the test (once the cluster is up) into this list; stopped at the end."""
    started: list[Any] = []
    try:
        yield started
    finally:
        for c in started:
            if isinstance(c, JavaConsumer):
                c.proc.kill()
            else:
                c.close()


async def wait_for_all(consumed: list[Consumed], acked: dict[str, tuple[int, int]], what: str) -> None:
    for c in consumed:
        got = await asyncio.to_thread(c.wait_for, set(acked), WAIT + PROMISE_S)
        missing = sorted(set(acked) - {r[2] for r in c.records})
        assert got, f"{what}: {len(missing)} records never read, e.g. {missing[:5]}"


def fetch(conn: RawConnection, version: int, partition: int, offset: int, epoch: int, rack: str = "r2") -> Any:
    """A consumer's sessionless Fetch of one rf3 partition; its partition answer."""
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, rack_id=rack,
                       topics=[FetchTopic(topic="rf3", partitions=[FetchPartition(
                           partition=partition, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=-1,
                           partition_max_bytes=1 << 20)])])
    return conn.call(1, version, req).responses[0].partitions[0]


def list_offsets(conn: RawConnection, partition: int, epoch: int, replica_id: int = -1) -> Any:
    req = ListOffsetsRequest(replica_id=replica_id, isolation_level=0, topics=[ListOffsetsTopic(
        name="rf3", partitions=[ListOffsetsPartition(partition_index=partition, current_leader_epoch=epoch,
                                                     timestamp=-1)])])
    return conn.call(2, 7, req).topics[0].partitions[0]


def end_of_epoch(conn: RawConnection, partition: int, epoch: int) -> int:
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(topic="rf3", partitions=[
        OffsetForLeaderPartition(partition=partition, current_leader_epoch=epoch, leader_epoch=epoch)])])
    return conn.call(23, 4, req).topics[0].partitions[0].error_code


def check_wire_answers(ports: dict[int, int], leader: int, partition: int, epoch: int, high_watermark: int) -> None:
    """What a follower and its leader answer a consumer (Kafka 3.9's rules, module docstring)."""
    with RawConnection(ports[FOLLOWER], client_id="raw-r2") as follower:
        r = fetch(follower, 11, partition, 0, epoch)
        assert r.error_code == 0 and r.records and r.high_watermark == high_watermark, r
        assert fetch(follower, 11, partition, 0, epoch + 1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert fetch(follower, 11, partition, high_watermark + 100, epoch).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch(follower, 10, partition, 0, epoch).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # no KIP-392
        assert list_offsets(follower, partition, epoch).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert list_offsets(follower, partition, epoch + 1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        debugging = list_offsets(follower, partition, epoch, replica_id=-2)  # a debugging client reads any replica
        assert (debugging.error_code, debugging.offset) == (0, high_watermark)
        assert end_of_epoch(follower, partition, epoch) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert end_of_epoch(follower, partition, epoch + 1) == ErrorCode.UNKNOWN_LEADER_EPOCH
    with RawConnection(ports[leader], client_id="raw-leader") as conn:
        sent = fetch(conn, 12, partition, 0, epoch)  # r2: go to broker 2, no records
        assert (sent.error_code, sent.preferred_read_replica, sent.records) == (0, FOLLOWER, b""), sent
        assert sent.high_watermark == high_watermark
        for own in (fetch(conn, 12, partition, 0, epoch, rack=f"r{leader}"), fetch(conn, 12, partition, 0, epoch, ""),
                    fetch(conn, 10, partition, 0, epoch)):  # the leader's rack, none, before KIP-392
            assert (own.error_code, own.preferred_read_replica) == (0, -1) and own.records, own


async def test_consumers_fetch_from_the_follower_in_their_rack_and_fall_back_to_the_leader(
        zookeeper: ZooKeeperServer, tmp_path: Path, java_classes: str, consumers: list[Any]) -> None:
    async with running_cluster(zookeeper, tmp_path, SETTINGS, RACKS) as cluster:
        await cluster.open()
        view = cluster.metadata(1)
        assert [(b[0], b[3]) for b in view["brokers"]] == [(1, "r1"), (2, "r2"), (3, "r3")]  # Metadata has racks
        state = partitions(view, "rf3")
        followed = {p for p, s in state.items() if s[1] != FOLLOWER}  # broker 2 follows these
        assert len(followed) == 4
        bootstrap = cluster.brokers[1].bootstrap
        first = await asyncio.to_thread(produce, bootstrap, "a")

        consumers.append(JavaConsumer(bootstrap, java_classes, tmp_path))
        consumers.append(RdkafkaConsumer(bootstrap))
        await wait_for_all([c.consumed for c in consumers], first, "before the kill")
        # the brokers' side: each leader sent both clients to broker 2, which served them records
        # (their lines may reach us after the records: the brokers' stderr is read by a thread)
        want = {(c, p) for c in CLIENTS for p in followed}
        for leader in (1, 3):
            led = {(c, p) for c, p in want if state[p][1] == leader}
            sent = await logged_by(cluster.brokers[leader], SENT, led, preferred_read_replica=FOLLOWER)
            assert led <= sent, (leader, sorted(led - sent))
        served = await logged_by(cluster.brokers[FOLLOWER], SERVED, want)
        assert want <= served, sorted(want - served)
        assert not any(BACK in line for i in (1, 3) for line in cluster.brokers[i].lines)

        p = min(followed)
        hw = max(o for q, o in first.values() if q == p) + 1
        await asyncio.to_thread(check_wire_answers, cluster.ports, state[p][1], p, state[p][2], hw)

        # the follower leaves: killed, out of the ISR (and, at its session's end, the cluster)
        cluster.brokers[FOLLOWER].kill()
        second = await asyncio.to_thread(produce, bootstrap, "b")
        await wait_for_all([c.consumed for c in consumers], second, "after the kill")
        for leader in (1, 3):
            led = {(c, p) for c, p in want if state[p][1] == leader}
            back = await logged_by(cluster.brokers[leader], BACK, led, previous_read_replica=FOLLOWER)
            assert led <= back, (leader, sorted(led - back))

        acked = {**first, **second}
        for c in consumers:  # every record read once, where it was acknowledged
            records = c.consumed.records
            assert sorted(records) == sorted((p, o, v) for v, (p, o) in acked.items())
        for c in list(consumers):
            c.close()
            consumers.remove(c)
