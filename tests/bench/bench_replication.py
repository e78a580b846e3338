"""Replication, measured: produce throughput with replication factor 3 and acks=all against
replication factor 1 on the same cluster, how far the high watermark trails the leader under
load, how long a leader's kill -9 keeps acks=all producers waiting, and the latency acks=all
costs -- Odradek's brokers and Apache Kafka 3.9's (ZooKeeper mode) side by side, each a fresh
3-broker cluster on the same real ZooKeeper (tests/bench/bench_cluster.py's start-up).

A round is one fresh cluster per system (own chroot, empty log dirs), with two one-partition
topics created through the controller with explicit assignments, both led by the same broker L
(not the controller, so a kill of L is not also a controller failover):

  rf1  replication factor 1 on L
  rf3  replication factor 3, L first (the preferred leader), min.insync.replicas=2

then, in this order, Kafka's own ProducerPerformance (`kafka-producer-perf-test`, the same JVM
client for both systems, producer defaults otherwise) sending RECORDS records of SIZE bytes:

  1. warm-up: RECORDS / 5 to each topic, acks=1 (not recorded)
  2. rf1 acks=1, rf1 acks=all, rf3 acks=1, rf3 acks=all, each at full speed (--throughput -1)
  3. rf3 acks=all at a fixed RATE records/s, for latency without the queueing of a full-speed run;
     then end-to-end latency with Kafka's own EndToEndLatency (`kafka-e2e-latency.sh`): one
     E2E_SIZE-byte record at a time, acks=all, sent and then polled by its consumer
     (fetch.max.wait.ms 0), E2E_RECORDS of them, on rf3 and on rf1 -- what one replication round
     costs a single record (issue #20 §5)
  4. replication lag: during another full-speed rf3 acks=1 run, a probe produces one record
     (acks=1, its own connection to L) every PROBE_EVERY_S, reads the leader's high watermark
     right away (ListOffsets latest, read_uncommitted) and polls it every PROBE_POLL_S until it
     passes the record: "records behind" is the record's offset + 1 minus that first high
     watermark (the leader's LEO at the ack minus its HW, i.e. what the slowest in-sync follower
     still lacks), "time to HW" when the HW covered it. The same probe idle, before the load, too.
  5. failover: acks=all records sent one at a time to L by this process, then kill -9 of L; timed
     from the kill (and from the session's expiry, /brokers/ids/L deleted, seen through a
     ZooKeeper watch) until the first acks=all produce acknowledged by another broker, found
     through Metadata polled every FAILOVER_POLL_S on the live brokers.

    python -m tests.bench.bench_replication [--rounds 3] [--records 100000] [--systems odradek,kafka]
                                            [--e2e-only] [--e2e-records 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from broker.logging_setup import configure_logging
from controller.zk.client import ZooKeeperClient
from protocol.messages import CreateTopicsRequest, ListOffsetsRequest, ProduceRequest
from protocol.messages import create_topics_request as ct
from protocol.messages import list_offsets_request as lo
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from tests.bench.bench_cluster import (
    BROKERS,
    SESSION_TIMEOUT_MS,
    SYSTEMS,
    BenchClient,
    Cluster,
    ZnodeWatch,
    alternating_rounds,
    controller_id,
    until_all,
    view,
)
from tests.bench.kafka_tools import PERF_TOOL_JVM, PRODUCER_TOTAL, ToolFailed, _run
from tests.broker_process import LoggedProcess
from tests.compat.jvm import compile_java, java_command, kafka_version
from tests.zookeeper import ZooKeeperServer

SIZE = 512
RATE = 2000
PROBE_EVERY_S = 0.1
PROBE_POLL_S = 0.002
FAILOVER_POLL_S = 0.02
TOOL_TIMEOUT_S = 180.0
WAIT_S = 60.0
BIG_BATCHES = {"batch.size": 131072, "linger.ms": 5}
E2E_RECORDS = 20_000
E2E_SIZE = 100
E2E_TOPICS = ("rf3", "rf1")
# EndToEndLatency.printResults
E2E_AVG = re.compile(r"Avg latency: (?P<avg>[\d.]+) ms")
E2E_PCT = re.compile(r"Percentiles: 50th = (?P<p50>\d+), 99th = (?P<p99>\d+), 99.9th = (?P<p999>\d+)")
# EndToEndLatency's loop printing microseconds (tests/bench/java), on the RF 3 topic
MICROS_CLASS = "EndToEndLatencyMicros"
MICROS_SOURCE = Path(__file__).parent / "java" / f"{MICROS_CLASS}.java"
E2E_US = re.compile(r"^(?P<label>us|produce|poll) p10 (?P<p10>\d+) p50 (?P<p50>\d+) p90 (?P<p90>\d+) p99 (?P<p99>\d+) "
                    r"p99.9 (?P<p999>\d+)$", re.M)
BIG_LABEL = "(batch.size 128 KiB, linger.ms 5)"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the load


@dataclass(frozen=True)
class PerfRun:
    """ProducerPerformance's final line."""

    rps: float
    mbps: float
    avg_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float


def producer_perf(bootstrap: str, topic: str, n: int, acks: str, throughput: int = -1,
                  props: dict[str, object] | None = None) -> PerfRun:
    """kafka-producer-perf-test with a fixed record size; --throughput -1 is full speed."""
    out = _run("org.apache.kafka.tools.ProducerPerformance",
               ["--topic", topic, "--num-records", str(n), "--record-size", str(SIZE),
                "--throughput", str(throughput), "--producer-props", f"bootstrap.servers={bootstrap}",
                f"acks={acks}", "request.timeout.ms=30000", "delivery.timeout.ms=120000",
                *(f"{k}={v}" for k, v in (props or {}).items())],
               TOOL_TIMEOUT_S)
    m = next(PRODUCER_TOTAL.finditer(out), None)
    if m is None or int(m["records"]) != n:
        raise ToolFailed(f"ProducerPerformance did not acknowledge {n} records:\n{out[-3000:]}")
    rps = float(m["rps"])
    return PerfRun(rps, rps * SIZE / 1e6, float(m["avg"]), float(m["p50"]), float(m["p99"]), float(m["max"]))


@dataclass(frozen=True)
class E2eRun:
    """EndToEndLatency's final lines (its percentiles are whole milliseconds, truncated)."""

    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float


def end_to_end_latency(bootstrap: str, topic: str, n: int, acks: str = "all") -> E2eRun:
    """`kafka-e2e-latency.sh bootstrap topic n acks E2E_SIZE`: n records, one at a time: send,
    wait for the acknowledgement, poll until the consumer has it; the time of each is one sample."""
    out = _run("org.apache.kafka.tools.EndToEndLatency", [bootstrap, topic, str(n), acks, str(E2E_SIZE)],
               TOOL_TIMEOUT_S + n / 100)
    avg, pct = E2E_AVG.search(out), E2E_PCT.search(out)
    if avg is None or pct is None:
        raise ToolFailed(f"no final report from EndToEndLatency:\n{out[-3000:]}")
    return E2eRun(float(avg["avg"]), float(pct["p50"]), float(pct["p99"]), float(pct["p999"]))


@dataclass(frozen=True)
class Percentiles:
    """Percentiles of one EndToEndLatencyMicros measure, in microseconds."""

    p10: int
    p50: int
    p90: int
    p99: int
    p999: int


@dataclass(frozen=True)
class MicrosRun:
    """EndToEndLatencyMicros' percentiles: the whole loop, and its two parts split at the
    producer's acknowledgement (the acks=all round, then the consumer's round trip)."""

    whole: Percentiles
    produce: Percentiles
    poll: Percentiles


def end_to_end_micros(bootstrap: str, topic: str, n: int, classes: str) -> MicrosRun:
    """EndToEndLatency's loop (same clients, same settings) timed in microseconds: its own tool
    truncates to whole milliseconds, which hides a median moving across 1 ms."""
    cmd = java_command(MICROS_CLASS, [bootstrap, topic, str(n)], classpath=classes, jvm_args=PERF_TOOL_JVM)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S + n / 100, check=False)
    except subprocess.TimeoutExpired as e:
        raise ToolFailed(f"{MICROS_CLASS} did not finish") from e
    parts = {m["label"]: Percentiles(**{k: int(v) for k, v in m.groupdict().items() if k != "label"})
             for m in E2E_US.finditer(proc.stdout)}
    if proc.returncode != 0 or set(parts) != {"us", "produce", "poll"}:
        raise ToolFailed(f"{MICROS_CLASS} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return MicrosRun(whole=parts["us"], produce=parts["produce"], poll=parts["poll"])


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine (/proc/stat)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)


T = TypeVar("T")


@dataclass(frozen=True)
class Cpu:
    """Broker CPU over one run: the leader's and the followers' (mean) seconds, and how many of
    the machine's cores were busy (everything on it, other people's work included)."""

    leader_s: float
    follower_s: float
    busy_cores: float


async def measured(cluster: Cluster, leader: int, fn: Callable[[], T]) -> tuple[T, Cpu]:
    pids = {b: cluster.brokers[b].proc.pid for b in cluster.live}  # type: ignore[union-attr]
    c0 = {b: process_cpu_s(p) for b, p in pids.items()}
    m0 = machine_cpu()
    run = await asyncio.to_thread(fn)
    m1 = machine_cpu()
    used = {b: process_cpu_s(p) - c0[b] for b, p in pids.items()}
    followers = [v for b, v in used.items() if b != leader]
    busy = (m1[0] - m0[0]) / max(1, m1[1] - m0[1]) * (os.cpu_count() or 1)
    return run, Cpu(used[leader], statistics.mean(followers), busy)


# ---------------------------------------------------------------------------- requests


async def produce_one(client: BenchClient, topic: str, acks: int) -> tuple[int, int]:
    """(error code, base offset) of one SIZE-byte record."""
    batch = build_batch([Record(value=b"p" * SIZE)])
    req = ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[pr.TopicProduceData(
        name=topic, partition_data=[pr.PartitionProduceData(index=0, records=batch)])])
    part = (await client.send(req, 9)).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


async def high_watermark(client: BenchClient, topic: str) -> int:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[lo.ListOffsetsTopic(
        name=topic, partitions=[lo.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    part = (await client.send(req, 7)).topics[0].partitions[0]
    if part.error_code:
        raise RuntimeError(f"ListOffsets {topic}: error {part.error_code}")
    return part.offset


async def create_topic(admin: BenchClient, name: str, replicas: list[int], configs: dict[str, str]) -> None:
    resp = await admin.send(CreateTopicsRequest(timeout_ms=30_000, topics=[ct.CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[ct.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
        configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])]))
    if resp.topics[0].error_code:
        raise RuntimeError(f"CreateTopics {name}: error {resp.topics[0].error_code}")


async def lag_probe(client: BenchClient, topic: str, stop: asyncio.Event, samples: int | None = None
                    ) -> tuple[list[int], list[float]]:
    """Records behind and seconds until the HW covered a probe record, one probe per PROBE_EVERY_S
    until `stop` (or `samples` probes)."""
    behind: list[int] = []
    covered: list[float] = []
    while not stop.is_set() and (samples is None or len(covered) < samples):
        err, offset = await produce_one(client, topic, 1)
        t0 = time.perf_counter()
        if err:
            raise RuntimeError(f"probe produce: error {err}")
        hw = await high_watermark(client, topic)
        behind.append(offset + 1 - hw)
        while hw <= offset:
            if time.perf_counter() - t0 > WAIT_S:
                raise TimeoutError(f"HW stuck at {hw} below probe offset {offset}")
            await asyncio.sleep(PROBE_POLL_S)
            hw = await high_watermark(client, topic)
        covered.append(time.perf_counter() - t0)
        try:
            await asyncio.wait_for(stop.wait(), PROBE_EVERY_S)
        except TimeoutError:
            pass
    return behind, covered


# ---------------------------------------------------------------------------- a round


@dataclass
class Round:
    perf: dict[str, PerfRun] = field(default_factory=dict)
    e2e: dict[str, E2eRun] = field(default_factory=dict)
    cpu: dict[str, Cpu] = field(default_factory=dict)
    e2e_cpu: dict[str, tuple[Cpu, int]] = field(default_factory=dict)  # topic -> (CPU, records)
    e2e_us: dict[str, MicrosRun] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)


def bootstrap(cluster: Cluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in sorted(cluster.live))  # type: ignore[attr-defined]


async def run_round(system: str, make: Callable[[Path, str, int], LoggedProcess], zk_server: ZooKeeperServer,
                    work: Path, chroot: str, records: int, logs: Path | None, e2e_records: int = E2E_RECORDS,
                    e2e_only: bool = False, micros_classes: str | None = None) -> Round:
    r = Round()
    zk = await ZooKeeperClient(zk_server.connect_string(chroot), session_timeout_ms=30_000,
                               request_timeout_ms=30_000).start(create_chroot=True)
    cluster = Cluster(make, work, zk_server.connect_string(chroot))
    try:
        await cluster.start(BROKERS)
        await until_all(cluster.clients, [], lambda v: v.brokers == set(BROKERS) and v.controller_id in BROKERS,
                        "three brokers and a controller")
        ctrl = await controller_id(zk)
        leader = next(b for b in BROKERS if b != ctrl)
        followers = [b for b in BROKERS if b != leader]
        admin = cluster.clients[ctrl]
        await create_topic(admin, "rf1", [leader], {})
        await create_topic(admin, "rf3", [leader, *followers], {"min.insync.replicas": "2"})
        await until_all(cluster.clients, ["rf1", "rf3"],
                        lambda v: v.leaders.get("rf1") == {0: leader} and v.leaders.get("rf3") == {0: leader},
                        "rf1 and rf3 led by L")
        boot = bootstrap(cluster)
        probe = BenchClient(cluster.brokers[leader].port)  # type: ignore[attr-defined]
        try:
            log(f"  {system}: warm-up (leader {leader}, controller {ctrl})")
            for topic in ("rf1", "rf3"):
                await asyncio.to_thread(producer_perf, boot, topic, max(1000, records // 5), "1")
            if e2e_only:
                await e2e_runs(r, system, cluster, leader, boot, e2e_records, micros_classes)
                return r
            for topic, acks, big in (("rf1", "1", False), ("rf1", "all", False), ("rf3", "1", False),
                                     ("rf3", "all", False), ("rf1", "1", True), ("rf3", "all", True)):
                key = f"{topic} acks={acks}" + (f" {BIG_LABEL}" if big else "")
                run, r.cpu[key] = await measured(cluster, leader, functools.partial(
                    producer_perf, boot, topic, records * (2 if big else 1), acks, -1, BIG_BATCHES if big else None))
                r.perf[key] = run
                log(f"  {system}: {key}: {run.rps:,.0f} rec/s, p99 {run.p99_ms:.0f} ms, {r.cpu[key]}")
            n_rate = min(records, RATE * 10)
            run, r.cpu[f"rf3 acks=all {RATE}/s"] = await measured(
                cluster, leader, functools.partial(producer_perf, boot, "rf3", n_rate, "all", RATE))
            r.perf[f"rf3 acks=all {RATE}/s"] = run
            log(f"  {system}: rf3 acks=all at {RATE}/s: p50 {run.p50_ms:.0f} ms, p99 {run.p99_ms:.0f} ms")
            await e2e_runs(r, system, cluster, leader, boot, e2e_records, micros_classes)

            # replication lag, idle then under a full-speed acks=1 load
            idle_stop = asyncio.Event()
            behind, covered = await lag_probe(probe, "rf3", idle_stop, samples=20)
            r.values["idle_behind"], r.values["idle_covered"] = [float(x) for x in behind], covered
            stop = asyncio.Event()
            prober = asyncio.ensure_future(lag_probe(probe, "rf3", stop))
            load = asyncio.ensure_future(asyncio.to_thread(producer_perf, boot, "rf3", records, "1"))
            try:
                run = await load
            finally:
                stop.set()
                behind, covered = await prober
            r.perf["rf3 acks=1 (lag run)"] = run
            r.values["load_behind"], r.values["load_covered"] = [float(x) for x in behind], covered
            log(f"  {system}: lag under load: {len(covered)} probes, behind median "
                f"{statistics.median(behind)} records, HW after {statistics.median(covered) * 1000:.1f} ms")

            # failover
            for _ in range(20):
                err, _off = await produce_one(probe, "rf3", -1)
                if err:
                    raise RuntimeError(f"acks=all before the kill: error {err}")
        finally:
            await probe.close()
        reg = ZnodeWatch(zk, f"/brokers/ids/{leader}")
        assert await reg.arm()
        log(f"  {system}: kill -9 leader {leader}")
        t_kill = await cluster.kill(leader)
        expiry = asyncio.ensure_future(reg.wait("deleted", t_kill))
        t_ack, attempts, new_leader = await first_ack_after(cluster, leader, t_kill)
        t_exp = await expiry
        reg.close()
        r.values["fail_from_kill"] = [t_ack - t_kill]
        r.values["fail_expiry"] = [t_exp - t_kill]
        r.values["fail_after_expiry"] = [t_ack - t_exp]
        r.notes["failover"] = f"new leader {new_leader}, {attempts} refused/failed attempts"
        log(f"  {system}: first acks=all ack {t_ack - t_kill:.2f} s after the kill "
            f"({t_ack - t_exp:.2f} s after expiry), {r.notes['failover']}")
    finally:
        await cluster.close(logs, chroot.strip("/"))
        await zk.close()
    return r


async def e2e_runs(r: Round, system: str, cluster: Cluster, leader: int, boot: str, n: int,
                   micros_classes: str | None = None) -> None:
    """EndToEndLatency with acks=all on each of E2E_TOPICS, one after the other, with the
    brokers' CPU per record (its consumer runs with fetch.max.wait.ms=0, so the leader also
    answers the consumer's empty fetches while a record replicates)."""
    for topic in E2E_TOPICS:
        e, cpu = await measured(cluster, leader, functools.partial(end_to_end_latency, boot, topic, n))
        r.e2e[topic] = e
        r.e2e_cpu[topic] = (cpu, n)
        log(f"  {system}: e2e {topic} acks=all: avg {e.avg_ms:.2f} / p50 {e.p50_ms:.0f} / p99 {e.p99_ms:.0f} / "
            f"p99.9 {e.p999_ms:.0f} ms; CPU per record: leader {cpu.leader_s / n * 1e6:.0f} us, "
            f"followers {cpu.follower_s / n * 1e6:.0f} us")
    if micros_classes is not None:
        u = r.e2e_us["rf3"] = await asyncio.to_thread(end_to_end_micros, boot, "rf3", n, micros_classes)
        w = u.whole
        log(f"  {system}: e2e rf3 acks=all in us: p10 {w.p10} / p50 {w.p50} / p90 {w.p90} / p99 {w.p99} / "
            f"p99.9 {w.p999}; p50 of the produce round {u.produce.p50}, of the poll {u.poll.p50}")


async def first_ack_after(cluster: Cluster, dead: int, t_kill: float) -> tuple[float, int, int]:
    """Poll the live brokers' Metadata for rf3's leader; produce acks=all to it until one is
    acknowledged. (time of that ack, attempts that failed, the new leader)."""
    attempts = 0
    clients: dict[int, BenchClient] = {}
    try:
        while time.perf_counter() - t_kill < WAIT_S + SESSION_TIMEOUT_MS / 1000:
            for bid in list(cluster.live):
                try:
                    led = (await view(cluster.clients[bid], ["rf3"])).leaders.get("rf3", {}).get(0, -1)
                except Exception:  # a broker mid-change may fail a request: poll again
                    continue
                if led in cluster.live:
                    if led not in clients:
                        clients[led] = BenchClient(cluster.brokers[led].port)  # type: ignore[attr-defined]
                    try:
                        err, _ = await produce_one(clients[led], "rf3", -1)
                    except Exception:
                        err = -1
                    if err == 0:
                        return time.perf_counter(), attempts, led
                    attempts += 1
                    break
            await asyncio.sleep(FAILOVER_POLL_S)
        raise TimeoutError("no acks=all produce acknowledged after the leader's kill")
    finally:
        for c in clients.values():
            await c.close()


# ---------------------------------------------------------------------------- report


PERF_ROWS = ["rf1 acks=1", "rf1 acks=all", "rf3 acks=1", "rf3 acks=all", f"rf3 acks=all {RATE}/s",
             f"rf1 acks=1 {BIG_LABEL}", f"rf3 acks=all {BIG_LABEL}", "rf3 acks=1 (lag run)"]


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def rng(xs: list[float], fmt: str) -> str:
    if not xs:
        return "-"
    return f"{format(med(xs), fmt)} ({format(min(xs), fmt)}-{format(max(xs), fmt)})"


def p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.99 * len(s)))] if s else float("nan")


def report(results: dict[str, list[Round]], records: int, rounds: int) -> list[str]:
    systems = list(results)
    names = [SYSTEMS[s][0] for s in systems]
    out = [f"Three brokers on one ZooKeeper per system, {rounds} round(s) each on a fresh cluster "
           f"(systems alternate); ProducerPerformance, {records:,} records of {SIZE} B per run "
           f"(the fixed-rate run: {min(records, RATE * 10):,} at {RATE:,}/s; the 128 KiB-batch runs: {records * 2:,}); median (min-max) "
           f"over the rounds. Both topics have one partition led by the same broker.", "",
           "### Produce throughput and latency (ProducerPerformance)", "",
           "| workload | " + " | ".join(f"{n} rec/s | {n} MB/s | {n} avg / p50 / p99 ms" for n in names) + " |",
           "|---|" + "---:|---:|---:|" * len(systems)]
    for key in PERF_ROWS:
        cells = []
        for s in systems:
            runs = [r.perf[key] for r in results[s] if key in r.perf]
            if not runs:
                cells += ["-", "-", "-"]
                continue
            cells.append(rng([x.rps for x in runs], ",.0f"))
            cells.append(f"{med([x.mbps for x in runs]):.1f}")
            cells.append(f"{med([x.avg_ms for x in runs]):.1f} / {med([x.p50_ms for x in runs]):.0f} / "
                         f"{med([x.p99_ms for x in runs]):.0f}")
        out.append(f"| {key} | " + " | ".join(cells) + " |")
    out += ["", "| ratio | " + " | ".join(names) + " |", "|---|" + "---:|" * len(systems)]
    for label, a, b in (("RF 3 acks=all / RF 1 acks=1 throughput", "rf3 acks=all", "rf1 acks=1"),
                        ("RF 3 acks=all / RF 1 acks=all throughput", "rf3 acks=all", "rf1 acks=all"),
                        ("RF 3 acks=1 / RF 1 acks=1 throughput", "rf3 acks=1", "rf1 acks=1"),
                        ("RF 3 acks=all / RF 1 acks=1 throughput, 128 KiB batches, linger.ms 5",
                         f"rf3 acks=all {BIG_LABEL}", f"rf1 acks=1 {BIG_LABEL}")):
        cells = []
        for s in systems:
            ra = [r.perf[a].rps for r in results[s] if a in r.perf]
            rb = [r.perf[b].rps for r in results[s] if b in r.perf]
            cells.append(f"{med(ra) / med(rb):.2f}" if ra and rb else "-")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    if len(systems) == 2:
        out += ["", f"| {names[0]} / {names[1]} | rec/s ratio |", "|---|---:|"]
        for key in PERF_ROWS[:7]:
            a = [r.perf[key].rps for r in results[systems[0]] if key in r.perf]
            b = [r.perf[key].rps for r in results[systems[1]] if key in r.perf]
            if a and b:
                out.append(f"| {key} | {med(a) / med(b):.2f} |")

    out += ["", f"### End-to-end latency, one record at a time (EndToEndLatency, acks=all, {E2E_SIZE} B)", "",
            "| topic | " + " | ".join(f"{n} avg / p50 / p99 / p99.9 ms | {n} p99.9 over the rounds" for n in names)
            + " |", "|---|" + "---:|---:|" * len(systems)]
    for topic in E2E_TOPICS:
        cells = []
        for s in systems:
            runs = [r.e2e[topic] for r in results[s] if topic in r.e2e]
            if not runs:
                cells += ["-", "-"]
                continue
            cells.append(f"{med([x.avg_ms for x in runs]):.2f} / {med([x.p50_ms for x in runs]):.0f} / "
                         f"{med([x.p99_ms for x in runs]):.0f} / {med([x.p999_ms for x in runs]):.0f}")
            cells.append(", ".join(f"{x.p999_ms:.0f}" for x in runs))
        out.append(f"| {topic} | " + " | ".join(cells) + " |")
    out += ["", f"The same loop timed in microseconds ({MICROS_CLASS}, rf3), median over the rounds:", "",
            "| topic | " + " | ".join(f"{n} p10 / p50 / p90 / p99 / p99.9 µs" for n in names) + " |",
            "|---|" + "---:|" * len(systems)]
    for label, part in (("rf3", "whole"), ("rf3, the produce round (send().get())", "produce"),
                        ("rf3, the consumer's poll after it", "poll")):
        cells = []
        for s in systems:
            us = [getattr(r.e2e_us["rf3"], part) for r in results[s] if "rf3" in r.e2e_us]
            cells.append(" / ".join(f"{med([getattr(u, f) for u in us]):,.0f}" for f in ("p10", "p50", "p90", "p99", "p999"))
                         if us else "-")
        out.append(f"| {label} | " + " | ".join(cells) + " |")

    out += ["", "### Broker CPU per record (from /proc, whole processes) and the machine", "",
            "| workload | " + " | ".join(f"{n} leader µs/rec | {n} follower µs/rec (mean of 2) | {n} busy cores"
                                         for n in names) + " |",
            "|---|" + "---:|---:|---:|" * len(systems)]
    for key in PERF_ROWS[:7]:
        cells = []
        for s in systems:
            got = [(r.cpu[key], r.perf[key]) for r in results[s] if key in r.cpu]
            if not got:
                cells += ["-", "-", "-"]
                continue
            n = records * 2 if BIG_LABEL in key else (min(records, RATE * 10) if "/s" in key else records)
            cells.append(f"{med([c.leader_s / n * 1e6 for c, _ in got]):.1f}")
            cells.append(f"{med([c.follower_s / n * 1e6 for c, _ in got]):.1f}" if key.startswith("rf3") else "-")
            cells.append(f"{med([c.busy_cores for c, _ in got]):.2f}")
        out.append(f"| {key} | " + " | ".join(cells) + " |")
    for topic in E2E_TOPICS:
        cells = []
        for s in systems:
            e2e = [r.e2e_cpu[topic] for r in results[s] if topic in r.e2e_cpu]
            if not e2e:
                cells += ["-", "-", "-"]
                continue
            cells.append(f"{med([c.leader_s / n * 1e6 for c, n in e2e]):.1f}")
            cells.append(f"{med([c.follower_s / n * 1e6 for c, n in e2e]):.1f}" if topic.startswith("rf3") else "-")
            cells.append(f"{med([c.busy_cores for c, _ in e2e]):.2f}")
        out.append(f"| e2e {topic} acks=all, one at a time | " + " | ".join(cells) + " |")

    out += ["", "### Replication lag and failover", "",
            "| measure | " + " | ".join(names) + " |", "|---|" + "---:|" * len(systems)]

    def pooled(s: str, key: str) -> list[float]:
        return [v for r in results[s] for v in r.values.get(key, [])]

    for label, key, scale, fmt in (
            ("idle: records behind the leader's LEO at the ack (median)", "idle_behind", 1, ".0f"),
            ("idle: ms until the HW covers a record, median", "idle_covered", 1000, ".1f"),
            ("under full-speed acks=1 load: records behind the leader's LEO at the ack, median", "load_behind", 1,
             ",.0f"),
            ("... same, p99 over the probes", "load_behind@p99", 1, ",.0f"),
            ("under load: ms until the HW covers a record, median", "load_covered", 1000, ".1f"),
            ("... same, p99 over the probes", "load_covered@p99", 1000, ".1f")):
        cells = []
        for s in systems:
            base, _, agg = key.partition("@")
            xs = pooled(s, base)
            v = p99(xs) if agg else med(xs)
            cells.append(f"{format(v * scale, fmt)} (n={len(xs)})" if xs else "-")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    for label, key in (("leader kill -9 -> its session expires, s", "fail_expiry"),
                       ("... expiry -> first acks=all acknowledged by the new leader, s", "fail_after_expiry"),
                       ("leader kill -9 -> first acks=all acknowledged, s", "fail_from_kill")):
        out.append(f"| {label} | " + " | ".join(rng(pooled(s, key), ".2f") for s in systems) + " |")
    out += ["", "| per round | " + " | ".join(names) + " |", "|---|" + "---:|" * len(systems)]
    for label, key in (("load average (1 min) at the round's start / end", "load"),
                       ("failover", "failover")):
        out.append(f"| {label} | " + " | ".join("; ".join(str(r.notes.get(key, "")) for r in results[s])
                                                for s in systems) + " |")
    return out


NOTES = """\
How: each round starts a fresh 3-broker cluster per system (bench_cluster's start-up, its own
ZooKeeper chroot, empty log dirs, zookeeper.session.timeout.ms 6000) and creates two one-partition
topics through the controller with explicit assignments, both led by the same broker, which is not
the controller: rf1 (replication factor 1) and rf3 (replication factor 3, min.insync.replicas=2).
Load is Kafka's own ProducerPerformance (kafka-producer-perf-test) for both systems: fixed
512-byte records, full speed (--throughput -1) unless a rate is given, producer defaults besides
acks (batch.size 16 KiB, linger.ms 0, max.in.flight 5), except the two rows with 128 KiB batches and
linger.ms 5. Its rec/s, MB/s and latencies are its own final line; at full speed its latency is
mostly the time a record queues in the producer's 32 MiB buffer, so the latency row that says
what acks=all costs is the one at a fixed 2,000 records/s. End-to-end latency is Kafka's own
EndToEndLatency (`kafka-e2e-latency.sh`) for both systems: one 100-byte record at a time, acks=all,
the producer waits for the acknowledgement and its consumer (fetch.max.wait.ms 0) polls until it has
the record; its percentiles are whole milliseconds, truncated (p50 1 means under 2 ms), so the
same loop with the same client settings (tests/bench/java/EndToEndLatencyMicros.java) runs after
it on rf3 and prints microseconds. The CPU
table's e2e rows are the brokers' CPU over those runs per record (the leader also answers the
consumer's empty fetches meanwhile). Broker CPU is utime+stime of each broker
process from /proc over the run (JVM threads included for Kafka), divided by the records; "busy
cores" is the whole machine's (/proc/stat), other people's work included. Replication lag: a probe
on its own connection produces one record with acks=1 every 100 ms to the leader, reads the
leader's high watermark (ListOffsets latest) at once -- "records behind" is the probe's offset + 1
minus that HW, what the slowest in-sync follower still lacked -- and polls it every 2 ms until it
passes the record ("ms until the HW covers"); 20 probes idle, then during a full-speed rf3 acks=1
run. Failover: 20 acks=all records to the leader, kill -9 of the leader, then Metadata polled on
the live brokers every 20 ms and one acks=all record sent to whichever live broker they name as
leader until one is acknowledged; the expiry is the deletion of /brokers/ids/N seen through a
ZooKeeper watch. Rounds alternate between the systems. Regenerate alone with
`python -m tests.bench.bench_replication` (`--logs DIR` keeps every broker's log)."""


async def run(systems: list[str], rounds: int, records: int, base: Path, logs: Path | None,
              e2e_records: int = E2E_RECORDS, e2e_only: bool = False) -> dict[str, list[Round]]:
    micros_classes = compile_java([MICROS_SOURCE], base / "java")
    runs = await alternating_rounds(systems, rounds, base, "repl", lambda s, make, zk_server, work, chroot: run_round(
        s, make, zk_server, work, chroot, records, logs, e2e_records, e2e_only, micros_classes))
    results: dict[str, list[Round]] = {}
    for s, done in runs.items():
        for r, load in done:
            r.notes["load"] = load
            results.setdefault(s, []).append(r)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--systems", default="odradek,kafka")
    ap.add_argument("--logs", type=Path, default=None, help="write every broker's log lines here")
    ap.add_argument("--e2e-records", type=int, default=E2E_RECORDS, help="records per EndToEndLatency run")
    ap.add_argument("--e2e-only", action="store_true",
                    help="only the warm-up and the EndToEndLatency runs of each round (no failover)")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)),
                    help="below 1: one round of a tenth of the records (a smoke run)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    configure_logging("WARNING")
    rounds, records = args.rounds, args.records
    e2e_records = args.e2e_records
    if args.scale < 1:
        rounds, records, e2e_records = 1, max(2000, records // 10), max(1000, e2e_records // 10)
    systems = [s for s in args.systems.split(",") if s]
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-repl-"))
    try:
        results = asyncio.run(run(systems, rounds, records, base, args.logs, e2e_records, args.e2e_only))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = [*report(results, records, rounds), "", NOTES]
    jvm = " ".join(PERF_TOOL_JVM)
    out.append(f"\nProducerPerformance from Kafka {kafka_version()} (JVM `{jvm}`), producer defaults "
               f"besides acks; Kafka brokers ZooKeeper mode, -Xmx512m, serial GC; "
               f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}; all on the same 2 cores.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
