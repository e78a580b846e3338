"""A log dir whose disk fills, in a three-broker ZooKeeper-mode cluster of real processes (issue
#20 §1b), Kafka's log-dir failure path: the first I/O error takes the dir offline (one error line
naming it, no retry loop), its partitions stop on that broker, the controller is told through
/log_dir_event_notification and moves the leaderships and ISRs at once -- long before
replica.lag.time.max.ms, set to 60 s here so that only the log-dir path can explain it -- while
acks=all producing goes on and nothing acknowledged is lost; DescribeLogDirs and `odradek
cluster status` show the dir offline. A broker whose only log dir fails halts (exit 1).

Broker 1 has two log dirs, `good` and `small` (a private tmpfs the test fills); broker 2's only
log dir is a private tmpfs. Waits are bounded polls of other processes' metadata or logs."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.cluster.processes import Cluster, odradek, partitions
from tests.compat.jvm import run_tool
from tests.full_disk import fill, inside, tmpfs_prefix
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

LAG_MS = 60_000  # replica.lag.time.max.ms: the ISRs must move long before this
MOVED_WITHIN_S = 15.0
LOAD = {p: [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]][p] for p in range(4)}  # broker 1 in every one


class LogDirCluster(Cluster):
    """Brokers 1 and 2 with tmpfs log dirs (see the module docstring)."""

    def small_dir(self, i: int) -> Path:
        return self.root / f"broker-{i}" / "small"

    def broker_process(self, i: int) -> BrokerProcess:
        b = super().broker_process(i)
        if i == 1:
            b.log_dir = Path(f"{self.root / 'broker-1' / 'good'},{self.small_dir(1)}")
        elif i == 2:
            b.log_dir = self.small_dir(2)
        if i in (1, 2):
            b.prefix = tmpfs_prefix(self.small_dir(i), "8m")
        return b

    def fill(self, i: int) -> None:
        proc = self.brokers[i].proc
        assert proc is not None and proc.poll() is None
        fill(inside(proc.pid, self.small_dir(i)) / "filler")


@pytest.fixture
async def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> AsyncIterator[LogDirCluster]:
    c = LogDirCluster(zookeeper, tmp_path, (f"replica.lag.time.max.ms={LAG_MS}",))
    try:
        yield c
    finally:
        await c.close()


class Load:
    """An acks=all producer in a thread, bounded in count and time; what was acknowledged."""

    def __init__(self, bootstrap: str, limit: int = 50_000, max_s: float = 45.0) -> None:
        self.acked: list[bytes] = []
        self._stop = threading.Event()
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=1_000,
                                       retry_backoff_ms=100, request_timeout_ms=10_000,
                                       delivery_timeout_ms=30_000, max_in_flight_requests_per_connection=1)
        self._thread = threading.Thread(target=self._run, args=(limit, max_s), daemon=True)
        self._thread.start()

    def _run(self, limit: int, max_s: float) -> None:
        deadline = time.monotonic() + max_s
        for i in range(limit):
            if self._stop.is_set() or time.monotonic() > deadline:
                break
            value = b"v%d" % i
            future = self._producer.send("load", value=value, partition=i % len(LOAD))
            future.add_callback(lambda _md, v=value: self.acked.append(v))
            if i % 50 == 49:
                time.sleep(0.02)  # a steady trickle, not a flood on two shared cores

    def until_acked(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} of {count} acknowledged within {timeout}s"
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._producer.flush(timeout=40)
        self._producer.close(timeout=10)


def read_all(bootstrap: str) -> set[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5_000)
    try:
        tps = [TopicPartition("load", p) for p in LOAD]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: set[bytes] = set()
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.update(r.value for r in records)
        return got
    finally:
        consumer.close()


def log_dirs_of(bootstrap: str, broker: int) -> dict[str, dict[str, Any]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        (answer,) = admin.describe_log_dirs(brokers=[broker])
    finally:
        admin.close()
    return {d["log_dir"]: d for d in answer["log_dirs"]}


def on_dir(described: dict[str, Any]) -> set[tuple[str, int]]:
    return {(t["name"], p["partition_index"]) for t in described["topics"] for p in t["partitions"]}


async def test_a_full_log_dir_goes_offline_and_its_leaderships_and_isrs_move_at_once(cluster, tmp_path):
    await cluster.open()
    assert cluster.zk is not None
    assert await cluster.zk.get_children("/log_dir_event_notification") == []
    bootstrap = ",".join(cluster.brokers[i].bootstrap for i in (2, 3))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        result = admin.create_topics([NewTopic("load", -1, -1, replica_assignments=LOAD,
                                               topic_configs={"min.insync.replicas": "2"})])
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()
    await cluster.until_all_agree(lambda m: "load" in m["topics"] and all(
        s[1] == LOAD[p][0] and sorted(s[4]) == [1, 2, 3] for p, s in partitions(m, "load").items()),
        "the load topic's leaders and full ISRs")
    small = str(cluster.small_dir(1).resolve())
    before = await asyncio.to_thread(log_dirs_of, bootstrap, 1)
    assert {d["error_code"] for d in before.values()} == {0}, before
    doomed = on_dir(before[small])  # the partitions of broker 1 in the dir that fills
    assert {tp for tp in doomed if tp[0] == "load"}, f"no load partition in {small}: {before}"

    load = await asyncio.to_thread(Load, bootstrap + "," + cluster.brokers[1].bootstrap)
    try:
        await asyncio.to_thread(load.until_acked, 200, 30)
        filled = time.monotonic()
        await asyncio.to_thread(cluster.fill, 1)

        def moved(m: dict[str, Any]) -> bool:
            for topic, p in doomed:
                s = partitions(m, topic)[p]
                if len(s[3]) > 1 and (s[1] in (1, -1) or 1 in s[4] or 1 not in s[5]):
                    return False
            return True

        view = await cluster.until_all_agree(moved, "broker 1's replicas in the full dir offline, led elsewhere",
                                             timeout=MOVED_WITHIN_S)
        took = time.monotonic() - filled
        assert took < MOVED_WITHIN_S < LAG_MS / 1000, took
        # the controller read the broker's notification and deleted it
        assert cluster.zk is not None
        deadline = time.monotonic() + 10
        while await cluster.zk.get_children("/log_dir_event_notification"):
            assert time.monotonic() < deadline, "the log dir event notification was not deleted"
            await asyncio.sleep(0.05)
        for topic, p in doomed:
            if topic == "rf1":  # RF 1 on broker 1: no other replica to lead it
                assert partitions(view, "rf1")[p][:2] == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        # acks=all goes on (min.insync.replicas=2 of the two other replicas)
        acked_at_move = len(load.acked)
        await asyncio.to_thread(load.until_acked, acked_at_move + 300, 30)
    finally:
        await asyncio.to_thread(load.stop)
    acked = set(load.acked)
    got = await asyncio.to_thread(read_all, bootstrap)
    assert acked <= got, f"{len(acked - got)} acknowledged records lost, e.g. {sorted(acked - got)[:5]}"

    b1 = cluster.brokers[1]
    assert b1.proc is not None and b1.proc.poll() is None  # its other dir still serves
    errors = [line for line in b1.lines if "level='error'" in line or "level='critical'" in line]
    assert len([line for line in errors if small in line]) == 1, "\n".join(errors)
    assert "Traceback" not in b1.log_text(), b1.log_text()[-4000:]
    assert not [line for line in b1.lines if "periodic task failed" in line]
    # no retry loop: each follower partition of the dir is given up once, not every second
    given_up = [line for line in b1.lines if "it is no longer fetched" in line]
    assert len(given_up) <= len(doomed), "\n".join(given_up)

    after = await asyncio.to_thread(log_dirs_of, bootstrap, 1)
    assert after[small]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR and after[small]["topics"] == []
    good = str((cluster.root / "broker-1" / "good").resolve())
    assert after[good]["error_code"] == 0 and on_dir(after[good]) == on_dir(before[good])

    # what an operator sees: Kafka's kafka-log-dirs.sh ...
    out = await asyncio.to_thread(lambda: run_tool(
        "org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", bootstrap, "--describe", "--broker-list", "1",
        timeout=60).stdout)
    (reported,) = json.loads(out.splitlines()[-1])["brokers"]
    errors_by_dir = {d["logDir"]: d["error"] for d in reported["logDirs"]}
    assert errors_by_dir == {small: "org.apache.kafka.common.errors.KafkaStorageException", good: None}, out
    # ... and `odradek cluster status` over the running brokers: a directory naming this ZooKeeper,
    # whose /brokers/ids lead status to the brokers (found by their listening ports)
    state = tmp_path / "status"
    state.mkdir()
    zk_port = int(cluster.connect.split("/")[0].rsplit(":", 1)[1])
    (state / "cluster.json").write_text(json.dumps({
        "zookeeper": {"pid": -1, "port": zk_port, "connect": cluster.connect, "log": ""},
        "brokers": [], "bootstrap": bootstrap}))
    status = await asyncio.to_thread(odradek, "cluster", "status", "--dir", str(state))
    assert "log dirs: 4; offline: 1" in status, status  # broker 1: 2, brokers 2 and 3: 1 each
    assert f"offline log dir: broker 1 {small} (KAFKA_STORAGE_ERROR)" in status, status

    # a broker whose only log dir fails halts, saying why
    b2 = cluster.brokers[2]
    await asyncio.to_thread(cluster.fill, 2)
    assert b2.proc is not None
    code = await asyncio.to_thread(b2.proc.wait, 30)
    assert code == 1, b2.log_text()[-3000:]
    b2.wait_for_line("Shutdown broker because all log dirs in", timeout=5)
    assert "Traceback" not in b2.log_text(), b2.log_text()[-4000:]
