"""A cluster of real `odradek serve` processes in ZooKeeper mode for the tests of tests/cluster/:
ZooKeeper (the `zookeeper` fixture) and brokers 1-3 on fixed ports (a restarted broker keeps its
address), with Metadata read from each and polled until they agree."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from controller.zk.client import ZooKeeperClient
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest
from tests.broker_process import BrokerProcess, free_port
from tests.cluster.control_requests import metadata_view
from tests.raw_client import RawConnection
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

CHROOT = "/odradek"
SESSION_MS = 4000  # this ZooKeeper's largest session (20 ticks of 200 ms)
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
PROMISE_S = SESSION_MS / 1000 + 2  # issue #14: a new leader/controller within session timeout + 2 s
WAIT = 30.0
IDS = (1, 2, 3)
# rf3-p: preferred leader 1, 2, 3, 1, 2, 3; rf1-p: on broker p+1 alone
RF3 = {p: [IDS[(p + i) % 3] for i in range(3)] for p in range(6)}
RF1 = {p: [IDS[p]] for p in range(3)}


class Cluster:
    """ZooKeeper + brokers 1-3 (their ports fixed, so a restarted broker keeps its address)."""

    def __init__(self, zookeeper: ZooKeeperServer, root: Path, overrides: tuple[str, ...] = (),
                 per_broker: dict[int, tuple[str, ...]] | None = None) -> None:
        self.overrides = overrides  # broker settings of the test, for every broker
        self.per_broker = per_broker or {}  # and for one broker (its broker.rack, say)
        self.connect = zookeeper.connect_string(CHROOT)
        self.root = root
        self.ports = {i: free_port() for i in IDS}
        self.brokers: dict[int, BrokerProcess] = {}
        self.zk: KafkaZkClient | None = None

    def broker_process(self, i: int) -> BrokerProcess:
        """Broker i's process, not started (a test's subclass may give it other log dirs)."""
        return BrokerProcess(self.root / f"broker-{i}", port=self.ports[i], zookeeper_connect=self.connect,
                             broker_id=i, overrides=[f"zookeeper.session.timeout.ms={SESSION_MS}",
                                                     "offsets.topic.replication.factor=1",
                                                     "controlled.shutdown.retry.backoff.ms=500", *self.overrides,
                                                     *self.per_broker.get(i, ())])

    async def start(self, i: int) -> BrokerProcess:
        b = self.broker_process(i)
        self.brokers[i] = b
        return await asyncio.to_thread(b.start)

    async def open(self) -> KafkaZkClient:
        for i in IDS:
            await self.start(i)
        client = await ZooKeeperClient(self.connect, session_timeout_ms=SESSION_MS, connection_timeout_ms=10_000,
                                       request_timeout_ms=10_000).start()
        self.zk = KafkaZkClient(client)
        await asyncio.to_thread(self._create_topics)
        await self.until_all_agree(lambda m: all(t in m["topics"] for t in ("rf3", "rf1")), "the topics' leaders")
        return self.zk

    def _create_topics(self) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.brokers[2].bootstrap, request_timeout_ms=20_000)
        try:
            result = admin.create_topics([NewTopic("rf3", -1, -1, replica_assignments=RF3),
                                          NewTopic("rf1", -1, -1, replica_assignments=RF1)])
            assert [t["error_code"] for t in result["topics"]] == [0, 0], result
        finally:
            admin.close()

    async def close(self) -> None:
        if self.zk is not None:
            await self.zk.zk.close()
        for i, b in self.brokers.items():
            if b.proc is not None and b.proc.poll() is None:
                b.proc.send_signal(signal.SIGCONT)  # a paused one must be able to stop
            await asyncio.to_thread(b.kill)
            # for a post-mortem of a failed run: the log of each broker's last incarnation
            (self.root / f"broker-{i}.log").write_text(b.log_text() + "\n")

    def client_settings(self, i: int) -> dict[str, Any]:
        """kafka-python settings of a client of broker i (a subclass's clients may use another
        listener, with TLS and SASL)."""
        return {"bootstrap_servers": self.brokers[i].bootstrap}

    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None]

    def metadata(self, i: int) -> dict[str, Any]:
        with RawConnection(self.ports[i]) as conn:
            return metadata_view(conn.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)))

    async def until_all_agree(self, check: Callable[[dict[str, Any]], bool], what: str, *,
                              among: list[int] | None = None, timeout: float = WAIT) -> dict[str, Any]:
        """Poll Metadata from each broker in `among` (default: every live one) until all answer
        the same view and `check` holds for it; that view."""
        among = among or self.live()
        deadline = time.monotonic() + timeout
        views: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            views = await asyncio.to_thread(lambda: [self.metadata(i) for i in among])
            if all(v == views[0] for v in views) and check(views[0]):
                return views[0]
            await asyncio.sleep(0.05)
        raise AssertionError(f"{what}: brokers {among} did not agree within {timeout}s: {views}")

    async def controller(self) -> tuple[int, int]:
        assert self.zk is not None
        cid = await self.zk.get_controller_id()
        epoch, _ = await self.zk.get_controller_epoch()
        assert cid is not None
        return cid, epoch

    async def until_controller_other_than(self, old: int, timeout: float) -> int:
        """Wait (on a watch of /controller) until a broker other than `old` holds it."""
        assert self.zk is not None
        zk = self.zk.zk
        changed = asyncio.Event()

        class Watch:
            path = "/controller"

            def handle_creation(self) -> None:
                changed.set()

            handle_deletion = handle_data_change = handle_creation

        zk.register_znode_change_handler(Watch())
        try:
            async def wait() -> int:
                while True:
                    changed.clear()
                    data, _stat = await zk.get_data("/controller", watch=True) if await zk.exists(
                        "/controller", watch=True) else (None, None)
                    if data is not None and json.loads(data)["brokerid"] != old:
                        return int(json.loads(data)["brokerid"])
                    await changed.wait()
            return await asyncio.wait_for(wait(), timeout)
        finally:
            zk.unregister_znode_change_handler("/controller")


def partitions(view: dict[str, Any], topic: str) -> dict[int, tuple[Any, ...]]:
    """partition -> (error, leader, leader epoch, replicas, isr, offline replicas)"""
    return view["topics"][topic][2]


def led_by(view: dict[str, Any], broker: int) -> set[tuple[str, int]]:
    return {(t, p) for t in ("rf3", "rf1") for p, s in partitions(view, t).items() if s[1] == broker}


@contextlib.asynccontextmanager
async def running_cluster(zookeeper: ZooKeeperServer, tmp_path: Path, overrides: tuple[str, ...] = (),
                          per_broker: dict[int, tuple[str, ...]] | None = None) -> AsyncIterator[Cluster]:
    """A Cluster whose processes are all stopped at the end (the tests' fixture)."""
    c = Cluster(zookeeper, tmp_path, overrides, per_broker)
    try:
        yield c
    finally:
        await c.close()


def cluster_fixture(*overrides: str) -> Any:
    """A per-test ``cluster`` fixture: a started-on-demand `Cluster` with ``overrides`` for every
    broker, all its processes stopped at teardown. ``cluster = cluster_fixture("a=b")`` in a module
    (any name: the fixture takes the name it is assigned to)."""

    @pytest.fixture
    async def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> AsyncIterator[Cluster]:
        async with running_cluster(zookeeper, tmp_path, overrides) as c:
            yield c

    return cluster


def subclass_fixture(cls: Callable[[ZooKeeperServer, Path], Cluster]) -> Any:
    """A per-test ``cluster`` fixture of a Cluster subclass built from (zookeeper, root) (its
    brokers' listeners, TLS, SASL), all its processes stopped at teardown."""

    @pytest.fixture
    async def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> AsyncIterator[Cluster]:
        c = cls(zookeeper, tmp_path)
        try:
            yield c
        finally:
            await c.close()

    return cluster


def rf3_moved_off(broker: int) -> Callable[[dict[str, Any]], bool]:
    """Every rf3 partition led by another broker, with `broker` out of its ISR."""
    def check(m: dict[str, Any]) -> bool:
        return all(s[0] == 0 and s[1] not in (broker, -1) and broker not in s[4]
                   for s in partitions(m, "rf3").values())
    return check


def rf1_offline_on(broker: int) -> Callable[[dict[str, Any]], bool]:
    def check(m: dict[str, Any]) -> bool:
        mine = [s for s in partitions(m, "rf1").values() if s[3] == [broker]]
        return bool(mine) and all(s[0] == ErrorCode.LEADER_NOT_AVAILABLE and s[1] == -1 and s[5] == [broker]
                                  for s in mine)
    return check


def cluster_until(check: Callable[[], bool], timeout: float) -> None:
    """Poll `check` (another thread's progress) until true, bounded."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout}s")
        time.sleep(0.05)


def odradek(*args: str) -> str:
    """The `odradek` command's stdout (it must succeed)."""
    proc = subprocess.run([sys.executable, "-m", "clients.cli", *args], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
