"""The ZooKeeper-mode control plane, timed: controller failover, leader election for the partitions
of a killed broker, creating a 1,000-partition topic, and how long a change takes to reach every
broker's Metadata -- Odradek's brokers and Apache Kafka 3.9's (ZooKeeper mode) side by side, each
on the same real ZooKeeper (Debian's package, tests/zookeeper.py) with the same settings.

A round is one fresh cluster (its own chroot, fresh log dirs): three brokers with
zookeeper.session.timeout.ms=6000, then in this order

  1. create: CreateTopics of one topic, 1,000 partitions, replication factor 3, sent to the
     controller (as Kafka's AdminClient does: a ZooKeeper-mode Kafka broker that is not the
     controller answers NOT_CONTROLLER); timed to its response and until every broker's Metadata shows a
     leader for all 1,000 partitions (first broker and last).
  2. propagation: CreatePartitions +1 on a small RF 3 topic, five times, each timed to its
     response and until every broker's Metadata shows the new partition with a leader.
  3. broker failure: kill -9 of the broker (not the controller) that leads the most partitions
     of the big topic (about a third). Timed from the kill and from the expiry of its session
     (the deletion of /brokers/ids/<id>, seen through a ZooKeeper watch) until every live
     broker's Metadata shows all 1,000 partitions led by a live broker. RF 3, so the ISR still
     holds two live replicas of each partition and the controller can elect from it. The broker
     is then started again and timed until every broker lists it.
  4. controller failover: kill -9 of the controller. Timed from the kill and from the expiry
     (/controller deleted) until a new /controller exists, until every live broker's Metadata
     names the new controller, and until all partitions are led by a live broker again (the
     dead controller led about a third of them too). The controller epoch must have grown by one.

The kill-to-expiry part is ZooKeeper's alone: the server expires a session that sent nothing for
the session timeout, and the client pings after a third of it idle, so a kill lands between 4 and
6 s (plus a 200 ms tick) before the expiry. The figures after the expiry are the controller's.

Metadata is polled (v12, the topics concerned only) every POLL_S seconds on one connection per
broker; a broker counts as done at the response that first satisfies the condition, so each time
is late by at most one poll and one round trip.

    python -m tests.bench.bench_cluster [--rounds 3] [--partitions 1000] [--systems odradek,kafka]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.logging_setup import configure_logging
from broker.network_client import NetworkClient, NetworkClientConfig
from controller.zk.client import ZooKeeperClient
from protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, MetadataRequest
from protocol.messages import create_partitions_request as cp
from protocol.messages import create_topics_request as ct
from protocol.messages import metadata_request as mr
from tests.broker_process import BrokerProcess, LoggedProcess, free_port
from tests.cluster.control_requests import Client
from tests.compat.jvm import java_command, kafka_version
from tests.zookeeper import ZooKeeperServer

SESSION_TIMEOUT_MS = 6000
BROKERS = (1, 2, 3)
POLL_S = 0.05
BIG, SMALL, WARMUP = "big", "grow", "warmup"
GROWS = 5
WAIT_S = 120.0  # bound of every wait for a state (a failing system fails the run, not hangs it)
COMMON = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "num.partitions": 1,
          "auto.create.topics.enable": "false", "offsets.topic.replication.factor": 1}
FINISHED_LAI = re.compile(r"Finished LeaderAndIsr request in (\d+)ms .* for (\d+) partitions")
KAFKA_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.controller.KafkaController=INFO
log4j.logger.state.change.logger=INFO
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the brokers


class ZkKafka(LoggedProcess):
    """An Apache Kafka 3.9 broker in ZooKeeper mode (`kafka.Kafka server.properties`), ready at its
    "[KafkaServer id=N] started" line; started again on the same log dir after a kill."""

    what = "Kafka 3.9 (ZooKeeper mode)"

    def __init__(self, work_dir: Path, zookeeper_connect: str, broker_id: int) -> None:
        super().__init__()
        self.work_dir, self.broker_id = work_dir, broker_id
        self.port = free_port()
        self.zookeeper_connect = zookeeper_connect

    def start(self, timeout: float = 180.0) -> ZkKafka:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = {"broker.id": self.broker_id, "zookeeper.connect": self.zookeeper_connect,
                 "listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": self.work_dir / "logs",
                 **COMMON}
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(KAFKA_LOG4J)
        cmd = [f"-Dlog4j.configuration=file:{log4j}" if a.startswith("-Dlog4j.configuration=") else a
               for a in java_command("kafka.Kafka", [str(config)], jvm_args=("-Xmx512m", "-XX:+UseSerialGC"))]
        self._spawn(cmd, f"[KafkaServer id={self.broker_id}] started", timeout)
        return self


def odradek_broker(work: Path, connect: str, broker_id: int) -> LoggedProcess:
    return BrokerProcess(work / f"broker-{broker_id}", overrides=[f"{k}={v}" for k, v in COMMON.items()],
                         zookeeper_connect=connect, broker_id=broker_id)


def kafka_broker(work: Path, connect: str, broker_id: int) -> LoggedProcess:
    return ZkKafka(work / f"kafka-{broker_id}", connect, broker_id)


SYSTEMS: dict[str, tuple[str, Callable[[Path, str, int], LoggedProcess]]] = {
    "odradek": ("Odradek", odradek_broker),
    "kafka": ("Kafka 3.9", kafka_broker),
}



async def alternating_rounds(
    systems: Sequence[str], rounds: int, base: Path, label: str,
    one_round: Callable[[str, Callable[[Path, str, int], LoggedProcess], ZooKeeperServer, Path, str], Awaitable[Any]],
) -> dict[str, list[tuple[Any, str]]]:
    """Rounds of every system on one real ZooKeeper, the systems alternating within a round, so
    a slow spell of the shared machine falls on both. `one_round(system, make, zk_server, work,
    chroot)` runs one fresh cluster in its own work dir (removed afterwards) and ZooKeeper chroot
    `/<label>-<system>-<i>`. Per system: (result, "load before / after") of each round."""
    zk_server = ZooKeeperServer(base / "zookeeper").start()
    results: dict[str, list[tuple[Any, str]]] = {}
    try:
        for i in range(rounds):
            for s in systems:
                log(f"{s}: round {i + 1}/{rounds}")
                work = base / f"{s}-{i}"
                l0 = os.getloadavg()[0]
                r = await one_round(s, SYSTEMS[s][1], zk_server, work, f"/{label}-{s}-{i}")
                results.setdefault(s, []).append((r, f"{l0:.1f} / {os.getloadavg()[0]:.1f}"))
                shutil.rmtree(work, ignore_errors=True)
    finally:
        zk_server.stop()
    return results

# ---------------------------------------------------------------------------- ZooKeeper


class ZnodeWatch:
    """When one znode was created and deleted, from a ZooKeeper watch re-armed after each event
    (a change between an event and the re-arm is recorded at the re-arm)."""

    def __init__(self, zk: ZooKeeperClient, path: str) -> None:
        self.zk, self.path = zk, path
        self.events: list[tuple[str, float]] = []
        self._new = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    async def arm(self) -> bool:
        self.zk.register_znode_change_handler(self)
        return await self.zk.exists(self.path, watch=True) is not None

    def close(self) -> None:
        self.zk.unregister_znode_change_handler(self.path)
        for t in self._tasks:
            t.cancel()

    def _record(self, kind: str, rearm: bool = True) -> None:
        self.events.append((kind, time.perf_counter()))
        self._new.set()
        if rearm:
            task = asyncio.ensure_future(self._rearm(kind))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _rearm(self, kind: str) -> None:
        exists = await self.zk.exists(self.path, watch=True) is not None
        if exists and kind == "deleted":
            self._record("created", rearm=False)
        elif not exists and kind in ("created", "changed"):
            self._record("deleted", rearm=False)

    def handle_creation(self) -> None:
        self._record("created")

    def handle_deletion(self) -> None:
        self._record("deleted")

    def handle_data_change(self) -> None:
        self._record("changed")

    async def wait(self, kind: str, since: float, timeout: float = WAIT_S) -> float:
        """The time of the first `kind` event at or after `since`."""
        deadline = time.perf_counter() + timeout
        while True:
            for k, t in self.events:
                if k == kind and t >= since:
                    return t
            self._new.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"{self.path} not {kind} within {timeout:.0f} s")
            try:
                await asyncio.wait_for(self._new.wait(), left)
            except TimeoutError:
                pass


async def controller_id(zk: ZooKeeperClient) -> int:
    data, _ = await zk.get_data("/controller")
    return int(json.loads(data or b"{}")["brokerid"])


async def controller_epoch(zk: ZooKeeperClient) -> int:
    data, _ = await zk.get_data("/controller_epoch")
    return int(data or b"0")


# ---------------------------------------------------------------------------- Metadata


class BenchClient(Client):
    """tests/cluster's client with the bench's request bound: Kafka takes more than the tests'
    10 s to answer a CreateTopics of 1,000 RF 3 partitions on this machine."""

    def __init__(self, port: int) -> None:
        self.client = NetworkClient(NetworkClientConfig(client_id="bench-cluster", request_timeout_ms=WAIT_S * 1000),
                                    {0: ("127.0.0.1", port)})

    async def send(self, request: Any, version: int | None = None) -> Any:
        return await asyncio.wait_for(self.client.send(0, request, version=version), WAIT_S + 5)


@dataclass
class View:
    """What one Metadata response says, reduced to what the conditions read."""

    controller_id: int
    brokers: set[int]
    leaders: dict[str, dict[int, int]]  # topic -> partition -> leader (-1: none / an error)


async def view(client: Client, topics: Sequence[str]) -> View:
    resp = await client.send(MetadataRequest(topics=[mr.MetadataRequestTopic(name=t) for t in topics],
                                             allow_auto_topic_creation=False), 12)
    leaders = {t.name: {p.partition_index: (p.leader_id if p.error_code == 0 else -1) for p in t.partitions}
               for t in resp.topics if t.error_code == 0}
    return View(resp.controller_id, {b.node_id for b in resp.brokers}, leaders)


async def until_all(clients: dict[int, Client], topics: Sequence[str], cond: Callable[[View], bool],
                    what: str, timeout: float = WAIT_S) -> dict[int, float]:
    """Poll every broker's Metadata until `cond` holds on each; the time each first held."""

    async def one(bid: int, client: Client) -> float:
        deadline = time.perf_counter() + timeout
        while True:
            v = await view(client, topics)
            t = time.perf_counter()
            if cond(v):
                return t
            if t > deadline:
                raise TimeoutError(f"broker {bid}: {what} not within {timeout:.0f} s (last: {v})")
            await asyncio.sleep(POLL_S)

    times = await asyncio.gather(*(one(b, c) for b, c in clients.items()))
    return dict(zip(clients, times, strict=True))


def all_led(topic: str, partitions: int, live: set[int]) -> Callable[[View], bool]:
    def cond(v: View) -> bool:
        parts = v.leaders.get(topic, {})
        return len(parts) == partitions and all(leader in live for leader in parts.values())
    return cond


async def create_topic(admin: Client, name: str, partitions: int) -> None:
    resp = await admin.send(CreateTopicsRequest(timeout_ms=60_000, topics=[
        ct.CreatableTopic(name=name, num_partitions=partitions, replication_factor=3)]))
    if resp.topics[0].error_code:
        raise RuntimeError(f"CreateTopics {name}: error {resp.topics[0].error_code}")


async def create_partitions(admin: Client, name: str, count: int) -> None:
    resp = await admin.send(CreatePartitionsRequest(timeout_ms=60_000, topics=[
        cp.CreatePartitionsTopic(name=name, count=count, assignments=None)]))
    if resp.results[0].error_code:
        raise RuntimeError(f"CreatePartitions {name} to {count}: error {resp.results[0].error_code}")


def leader_and_isr_ms(lines: list[str], partitions: int) -> float:
    """The broker's own duration of the LeaderAndIsr that brought the new topic (Kafka's
    state-change line, which Odradek logs too); 0 if none."""
    found = [int(m.group(1)) for line in lines if (m := FINISHED_LAI.search(line)) and int(m.group(2)) >= partitions]
    return max(found, default=0)


# ---------------------------------------------------------------------------- a round


@dataclass
class Round:
    """The seconds one round measured (keys as in the report's rows)."""

    values: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, seconds: float) -> None:
        self.values.setdefault(key, []).append(seconds)


class Cluster:
    def __init__(self, make: Callable[[Path, str, int], LoggedProcess], work: Path, connect: str) -> None:
        self.brokers = {b: make(work, connect, b) for b in BROKERS}
        self.live: set[int] = set()
        self.clients: dict[int, Client] = {}

    async def start(self, ids: Sequence[int]) -> None:
        await asyncio.gather(*(asyncio.to_thread(self.brokers[b].start) for b in ids))
        for b in ids:
            self.live.add(b)
            self.clients[b] = BenchClient(self.brokers[b].port)  # type: ignore[attr-defined]

    async def kill(self, b: int) -> float:
        """SIGKILL; the time just before the signal."""
        self.live.discard(b)
        client = self.clients.pop(b)
        proc = self.brokers[b].proc
        assert proc is not None
        t = time.perf_counter()
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(self.brokers[b].kill)  # reaps it
        await client.close()
        return t

    async def close(self, logs: Path | None, prefix: str) -> None:
        for c in self.clients.values():
            await c.close()
        for bid, b in self.brokers.items():
            b.kill()
            if logs is not None:
                logs.mkdir(parents=True, exist_ok=True)
                (logs / f"{prefix}-broker-{bid}.log").write_text(b.log_text() + "\n")


async def run_round(system: str, make: Callable[[Path, str, int], LoggedProcess], zk_server: ZooKeeperServer,
                    work: Path, chroot: str, partitions: int, logs: Path | None) -> Round:
    r = Round()
    zk = await ZooKeeperClient(zk_server.connect_string(chroot), session_timeout_ms=30_000,
                               request_timeout_ms=30_000).start(create_chroot=True)
    cluster = Cluster(make, work, zk_server.connect_string(chroot))
    try:
        t = time.perf_counter()
        await cluster.start(BROKERS)
        r.notes["start_s"] = time.perf_counter() - t
        await until_all(cluster.clients, [], lambda v: v.brokers == set(BROKERS) and v.controller_id in BROKERS,
                        "three brokers and a controller")
        ctrl = await controller_id(zk)
        other = next(b for b in BROKERS if b != ctrl)
        admin = cluster.clients[ctrl]  # Kafka's ZooKeeper mode answers NOT_CONTROLLER elsewhere

        # warm-up (JIT, first connections, code paths): a small topic, created and grown once
        await create_topic(admin, WARMUP, 30)
        await until_all(cluster.clients, [WARMUP], all_led(WARMUP, 30, set(BROKERS)), "warm-up topic")
        await create_partitions(admin, WARMUP, 31)
        await until_all(cluster.clients, [WARMUP], all_led(WARMUP, 31, set(BROKERS)), "warm-up partition")

        # 1. create the big topic
        log(f"  {system}: CreateTopics {partitions} partitions RF 3")
        marks = {b: len(p.lines) for b, p in cluster.brokers.items()}
        t0 = time.perf_counter()
        await create_topic(admin, BIG, partitions)
        r.add("create_response", time.perf_counter() - t0)
        seen = await until_all(cluster.clients, [BIG], all_led(BIG, partitions, set(BROKERS)), "all leaders")
        r.add("create_first", min(seen.values()) - t0)
        r.add("create_all", max(seen.values()) - t0)
        r.add("create_lai", max(leader_and_isr_ms(p.lines[marks[b]:], partitions)
                                for b, p in cluster.brokers.items()) / 1000)

        rtts = []
        for _ in range(10):  # what one poll costs: the Metadata round trip of the big topic
            t = time.perf_counter()
            await view(cluster.clients[other], [BIG])
            rtts.append(time.perf_counter() - t)
        r.notes["metadata_rtt_ms"] = statistics.median(rtts) * 1000

        # 2. propagation of small changes
        log(f"  {system}: CreatePartitions x{GROWS}")
        await create_topic(admin, SMALL, 1)
        await until_all(cluster.clients, [SMALL], all_led(SMALL, 1, set(BROKERS)), "small topic")
        for n in range(2, 2 + GROWS):
            t0 = time.perf_counter()
            await create_partitions(admin, SMALL, n)
            r.add("grow_response", time.perf_counter() - t0)
            seen = await until_all(cluster.clients, [SMALL], all_led(SMALL, n, set(BROKERS)), f"{n} partitions")
            r.add("grow_first", min(seen.values()) - t0)
            r.add("grow_all", max(seen.values()) - t0)

        # 3. a broker that is not the controller fails
        leaders = (await view(cluster.clients[ctrl], [BIG])).leaders[BIG]
        victim = max((b for b in BROKERS if b != ctrl), key=lambda b: sum(1 for x in leaders.values() if x == b))
        r.notes["victim_led"] = sum(1 for x in leaders.values() if x == victim)
        log(f"  {system}: kill -9 broker {victim} (leads {r.notes['victim_led']}; controller {ctrl})")
        reg = ZnodeWatch(zk, f"/brokers/ids/{victim}")
        assert await reg.arm()
        t_kill = await cluster.kill(victim)
        t_exp = await reg.wait("deleted", t_kill)
        reg.close()
        seen = await until_all(cluster.clients, [BIG], all_led(BIG, partitions, set(cluster.live)), "new leaders")
        r.add("fail_expiry", t_exp - t_kill)
        r.add("fail_first_after_expiry", min(seen.values()) - t_exp)
        r.add("fail_all_after_expiry", max(seen.values()) - t_exp)
        r.add("fail_all_from_kill", max(seen.values()) - t_kill)
        t0 = time.perf_counter()
        await cluster.start([victim])
        await until_all(cluster.clients, [], lambda v: v.brokers == set(BROKERS), "restarted broker listed")
        r.add("rejoin", time.perf_counter() - t0)

        # 4. the controller fails
        leaders = (await view(cluster.clients[other], [BIG])).leaders[BIG]
        r.notes["controller_led"] = sum(1 for x in leaders.values() if x == ctrl)
        epoch = await controller_epoch(zk)
        log(f"  {system}: kill -9 controller {ctrl} (leads {r.notes['controller_led']}, epoch {epoch})")
        seat = ZnodeWatch(zk, "/controller")
        assert await seat.arm()
        t_kill = await cluster.kill(ctrl)
        t_exp = await seat.wait("deleted", t_kill)
        t_new = await seat.wait("created", t_exp)
        new = await controller_id(zk)
        seat.close()
        if new == ctrl or new not in cluster.live:
            raise RuntimeError(f"controller {new} after killing {ctrl}")
        if (now := await controller_epoch(zk)) != epoch + 1:
            raise RuntimeError(f"controller epoch {epoch} -> {now}")
        seen_ctrl = await until_all(cluster.clients, [], lambda v: v.controller_id == new, "new controller")
        seen_led = await until_all(cluster.clients, [BIG], all_led(BIG, partitions, set(cluster.live)), "new leaders")
        r.add("ctrl_expiry", t_exp - t_kill)
        r.add("ctrl_elected_after_expiry", t_new - t_exp)
        r.add("ctrl_metadata_after_expiry", max(seen_ctrl.values()) - t_exp)
        rest = next(b for b in cluster.live if b != new)
        r.add("ctrl_metadata_own_after_expiry", seen_ctrl[new] - t_exp)
        r.add("ctrl_metadata_other_after_expiry", seen_ctrl[rest] - t_exp)
        r.add("ctrl_leaders_after_expiry", max(seen_led.values()) - t_exp)
        r.add("ctrl_all_from_kill", max(max(seen_ctrl.values()), max(seen_led.values())) - t_kill)
    finally:
        await cluster.close(logs, chroot.strip("/"))
        await zk.close()
    return r


# ---------------------------------------------------------------------------- report


ROWS = [
    ("create_response", "CreateTopics, {p} partitions RF 3: response"),
    ("create_first", "... all leaders in the first broker's Metadata"),
    ("create_all", "... all leaders in every broker's Metadata"),
    ("create_lai", "... of which the slowest broker's LeaderAndIsr (its own log line)"),
    ("grow_response", "CreatePartitions +1 (small RF 3 topic): response"),
    ("grow_first", "... new partition led in the first broker's Metadata"),
    ("grow_all", "... new partition led in every broker's Metadata"),
    ("fail_expiry", "broker kill -9 -> its session expires (/brokers/ids/N gone)"),
    ("fail_first_after_expiry", "... expiry -> its partitions led by live brokers, first broker's Metadata"),
    ("fail_all_after_expiry", "... expiry -> its partitions led by live brokers, every broker's Metadata"),
    ("fail_all_from_kill", "... kill -9 -> every broker's Metadata, in all"),
    ("rejoin", "restart of the killed broker -> listed in every broker's Metadata"),
    ("ctrl_expiry", "controller kill -9 -> its session expires (/controller gone)"),
    ("ctrl_elected_after_expiry", "... expiry -> new /controller"),
    ("ctrl_metadata_after_expiry", "... expiry -> every broker's Metadata names the new controller"),
    ("ctrl_metadata_own_after_expiry", "... of which the new controller's own broker"),
    ("ctrl_metadata_other_after_expiry", "... of which the other live broker"),
    ("ctrl_leaders_after_expiry", "... expiry -> the dead controller's partitions led by live brokers everywhere"),
    ("ctrl_all_from_kill", "... kill -9 -> all of the above, in all"),
]


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.2f} ({min(values):.2f}-{max(values):.2f})"


def report(results: dict[str, list[Round]], partitions: int, rounds: int) -> list[str]:
    systems = list(results)
    out = [f"Three brokers on one ZooKeeper 3.8 (Debian's package, tick 200 ms), "
           f"`zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}`, {rounds} rounds per system, each "
           f"on a fresh cluster; seconds as median (min-max) over all rounds"
           f"{' (CreatePartitions: ' + str(GROWS) + ' per round)' if GROWS > 1 else ''}. "
           f"Metadata polled every {POLL_S * 1000:.0f} ms per broker.", "",
           "| step | " + " | ".join(SYSTEMS[s][0] for s in systems) + " |",
           "|---|" + "---:|" * len(systems)]
    for key, label in ROWS:
        cells = []
        for s in systems:
            vals = [v for r in results[s] for v in r.values.get(key, [])]
            cells.append(cell(vals))
        out.append(f"| {label.format(p=f'{partitions:,}')} | " + " | ".join(cells) + " |")
    out += ["", "| per round | " + " | ".join(SYSTEMS[s][0] for s in systems) + " |",
            "|---|" + "---:|" * len(systems)]
    for key, label in (("start_s", "three brokers started, s"), ("victim_led", "partitions the killed broker led"),
                       ("controller_led", "partitions the killed controller led"),
                       ("metadata_rtt_ms", "Metadata round trip of the big topic, ms (median of 10)"),
                       ("load", "machine load average (1 min) at the round's start and end, mean")):
        cells = []
        for s in systems:
            vals = [r.notes[key] for r in results[s] if key in r.notes]
            cells.append(", ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in vals))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out += ["", NOTES]
    return out


NOTES = """\
How: a round starts a fresh cluster (own chroot, empty log dirs), warms it up with a 30-partition
topic grown by one, then (1) CreateTopics of the big topic (RF 3, Kafka's default assignment, so
every broker hosts all partitions and leads a third), sent to the controller as Kafka's
AdminClient does; (2) CreatePartitions +1 on a small RF 3 topic, five times; (3) kill -9 of the
broker, not the controller, that leads the most partitions, then its restart; (4) kill -9 of the
controller, whose new epoch is checked to be the old one plus one. "Expiry" is when ZooKeeper
deleted the dead broker's ephemeral znode (/brokers/ids/N, or /controller), seen through a watch
by this process; everything from the kill to the expiry is ZooKeeper's session timeout at work,
everything after it is the controller: reading the state, writing the new leaders and ISRs to
ZooKeeper, LeaderAndIsr and UpdateMetadata to the brokers. "Led by live brokers" requires every
partition of the big topic to name a live leader in that broker's Metadata (the dead broker's
partitions, about a third after (3), about half after (4) since the controller took over part of
the first victim's). A broker counts at the first Metadata response that shows the state, so the
times include up to one poll interval and one round trip (the round trip of the big topic's
Metadata is in the last table). The LeaderAndIsr row is the broker's own "Finished LeaderAndIsr
request in N ms ... for 1000 partitions" line (Kafka's state-change log line, which Odradek logs
too): creating the logs of the new partitions, most of the creation time on both systems. Both
systems run on the same two cores, one round of each in turn; the machine's load average is
shown because other work can share them. Regenerate alone with
`python -m tests.bench.bench_cluster` (`--logs DIR` keeps every broker's log)."""


async def alternate_rounds(systems: list[str], rounds: int, base: Path,
                           one_round: Callable[[str, ZooKeeperServer, Path, int], Awaitable[Round]],
                           ) -> dict[str, list[Round]]:
    """`rounds` rounds of each system, the systems taking turns on one ZooKeeper server (each
    round `one_round(system, zookeeper, work dir, round index)` in a fresh work dir, removed
    after), with the machine's mean load average over the round in its notes."""
    zk_server = ZooKeeperServer(base / "zookeeper").start()
    results: dict[str, list[Round]] = {}
    try:
        for i in range(rounds):  # systems alternate, so a slow minute of the machine hits both
            for s in systems:
                log(f"{s}: round {i + 1}/{rounds}")
                work = base / f"{s}-{i}"
                load = os.getloadavg()[0]
                r = await one_round(s, zk_server, work, i)
                r.notes["load"] = (load + os.getloadavg()[0]) / 2
                results.setdefault(s, []).append(r)
                log(f"  {s}: " + ", ".join(f"{k} {cell(v)}" for k, v in r.values.items()))
                shutil.rmtree(work, ignore_errors=True)
    finally:
        zk_server.stop()
    return results


async def run(systems: list[str], rounds: int, partitions: int, base: Path,
              logs: Path | None) -> dict[str, list[Round]]:
    return await alternate_rounds(systems, rounds, base, lambda s, zk_server, work, i: run_round(
        s, SYSTEMS[s][1], zk_server, work, f"/{s}-{i}", partitions, logs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--systems", default="odradek,kafka")
    ap.add_argument("--logs", type=Path, default=None, help="write every broker's log lines here")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)),
                    help="below 1: one round of a tenth of the partitions (a smoke run)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    configure_logging("WARNING")  # the clients' connection events would go to stdout, the report
    rounds, partitions = args.rounds, args.partitions
    if args.scale < 1:
        rounds, partitions = 1, max(10, partitions // 10)
    systems = [s for s in args.systems.split(",") if s]
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-cluster-"))
    try:
        results = asyncio.run(run(systems, rounds, partitions, base, args.logs))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = report(results, partitions, rounds)
    if "kafka" in systems:
        out.append(f"\nKafka {kafka_version()} from build/java/kafka, ZooKeeper mode, -Xmx512m, serial GC.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
