"""Transactions, measured (issue #22): transactional produce throughput with a commit every 100 ms
and every 10,000 records, the cost of a commit, and end-to-end latency to a read_committed
consumer -- Odradek's brokers and Apache Kafka 3.9's (ZooKeeper mode) side by side, each a fresh
3-broker cluster on the same real ZooKeeper (tests/bench/bench_cluster.py's start-up).

A round is one fresh cluster per system with one topic of 3 partitions, replication factor 3 and
min.insync.replicas=2, each broker leading one partition (so every transaction's markers go to
all three brokers); `__transaction_state` is created by the first transactional producer, with
both systems' defaults (50 partitions, RF 3, min ISR 2). The client is one Java program
(tests/bench/java/TxnBench.java, Kafka 3.9's producer and consumer, defaults otherwise):

  1. warm-up: RECORDS / 5 records, a commit every 10,000 (not recorded)
  2. RECORDS records of SIZE bytes from one transactional producer as fast as it takes them,
     committed every 100 ms, then every 10,000 records; and the same records from an idempotent
     non-transactional producer (ProducerPerformance, acks=all) for the difference transactions
     make. Each with the three brokers' CPU (together) per record.
  3. E2E_TXNS transactions of one 100-byte record, one at a time: begin, send, commit, then a
     read_committed consumer (fetch.max.wait.ms 0) polls until it has the record; the time of the
     commitTransaction call, and from its return until the consumer had the record (Kafka answers
     EndTxn once PrepareCommit is written, before the markers: this second part is the markers'
     write and the last stable offset moving).

    python -m tests.bench.bench_transactions [--rounds 3] [--records 200000] [--e2e-txns 2000]
                                             [--systems odradek,kafka]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.logging_setup import configure_logging
from controller.zk.client import ZooKeeperClient
from protocol.messages import CreateTopicsRequest
from protocol.messages import create_topics_request as ct
from tests.bench.bench_cluster import (
    BROKERS,
    SESSION_TIMEOUT_MS,
    SYSTEMS,
    BenchClient,
    Cluster,
    alternating_rounds,
    controller_id,
    until_all,
)
from tests.bench.bench_replication import (
    SIZE,
    TOOL_TIMEOUT_S,
    bootstrap,
    log,
    process_cpu_s,
    producer_perf,
    rng,
)
from tests.bench.kafka_tools import PERF_TOOL_JVM, ToolFailed
from tests.broker_process import LoggedProcess
from tests.compat.jvm import compile_java, java_command, kafka_version
from tests.zookeeper import ZooKeeperServer

TOPIC = "txn"
PARTITIONS = 3
RECORDS = 200_000
E2E_TXNS = 2_000
BENCH_CLASS = "TxnBench"
BENCH_SOURCE = Path(__file__).parent / "java" / f"{BENCH_CLASS}.java"
THROUGHPUT = re.compile(r"throughput records (?P<n>\d+) seconds (?P<s>[\d.]+) commits (?P<commits>\d+) "
                        r"commit-us p50 (?P<c50>\d+) p99 (?P<c99>\d+)")
PCT = r"p10 (?P<p10>\d+) p50 (?P<p50>\d+) p90 (?P<p90>\d+) p99 (?P<p99>\d+) p99.9 (?P<p999>\d+)"
E2E = {k: re.compile(rf"{k}-us {PCT}") for k in ("e2e", "commit", "visible")}
# (row label, TxnBench's commit-policy arguments; None: the non-transactional baseline)
WORKLOADS: list[tuple[str, tuple[str, str] | None]] = [
    ("transactional, commit every 100 ms", ("ms", "100")),
    ("transactional, commit every 10,000 records", ("records", "10000")),
    ("idempotent, no transactions (ProducerPerformance acks=all)", None),
]


@dataclass(frozen=True)
class Throughput:
    rps: float
    commits: int
    commit_p50_ms: float
    commit_p99_ms: float
    cpu_us: float  # the three brokers' CPU per record


@dataclass
class Round:
    throughput: dict[str, Throughput] = field(default_factory=dict)
    e2e: dict[str, dict[str, int]] = field(default_factory=dict)  # e2e/commit/visible -> percentiles (µs)
    load: str = ""


def txn_bench(classes: str, boot: str, args: list[str], timeout: float) -> str:
    cmd = java_command(BENCH_CLASS, [boot, TOPIC, *args], classpath=classes, jvm_args=PERF_TOOL_JVM)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise ToolFailed(f"{BENCH_CLASS} {' '.join(args)} did not finish within {timeout:.0f} s") from e
    if proc.returncode != 0:
        raise ToolFailed(f"{BENCH_CLASS} {' '.join(args)} exited {proc.returncode}:\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def brokers_cpu_s(cluster: Cluster) -> float:
    return sum(process_cpu_s(cluster.brokers[b].proc.pid) for b in cluster.live)  # type: ignore[union-attr]


async def throughput_run(cluster: Cluster, classes: str, boot: str, records: int,
                         policy: tuple[str, str] | None) -> Throughput:
    c0 = brokers_cpu_s(cluster)
    if policy is None:
        run = await asyncio.to_thread(producer_perf, boot, TOPIC, records, "all")
        rps, commits, c50, c99 = run.rps, 0, float("nan"), float("nan")
    else:
        out = await asyncio.to_thread(txn_bench, classes, boot, ["throughput", str(records), str(SIZE), *policy],
                                      TOOL_TIMEOUT_S + records / 500)
        m = THROUGHPUT.search(out)
        if m is None:
            raise ToolFailed(f"no throughput line from {BENCH_CLASS}:\n{out[-2000:]}")
        rps, commits = int(m["n"]) / float(m["s"]), int(m["commits"])
        c50, c99 = int(m["c50"]) / 1000, int(m["c99"]) / 1000
    used = brokers_cpu_s(cluster) - c0
    return Throughput(rps, commits, c50, c99, used / records * 1e6)


async def create_topic(admin: BenchClient, cluster_brokers: tuple[int, ...]) -> None:
    assignments = [ct.CreatableReplicaAssignment(
        partition_index=p, broker_ids=[cluster_brokers[(p + i) % len(cluster_brokers)] for i in range(3)])
        for p in range(PARTITIONS)]
    resp = await admin.send(CreateTopicsRequest(timeout_ms=30_000, topics=[ct.CreatableTopic(
        name=TOPIC, num_partitions=-1, replication_factor=-1, assignments=assignments,
        configs=[ct.CreatableTopicConfig(name="min.insync.replicas", value="2")])]))
    if resp.topics[0].error_code:
        raise RuntimeError(f"CreateTopics {TOPIC}: error {resp.topics[0].error_code}")


async def run_round(system: str, make: Callable[[Path, str, int], LoggedProcess], zk_server: ZooKeeperServer,
                    work: Path, chroot: str, records: int, e2e_txns: int, classes: str,
                    logs: Path | None) -> Round:
    r = Round()
    zk = await ZooKeeperClient(zk_server.connect_string(chroot), session_timeout_ms=30_000,
                               request_timeout_ms=30_000).start(create_chroot=True)
    cluster = Cluster(make, work, zk_server.connect_string(chroot))
    try:
        await cluster.start(BROKERS)
        await until_all(cluster.clients, [], lambda v: v.brokers == set(BROKERS) and v.controller_id in BROKERS,
                        "three brokers and a controller")
        ctrl = await controller_id(zk)
        await create_topic(cluster.clients[ctrl], BROKERS)
        want = {p: BROKERS[p % len(BROKERS)] for p in range(PARTITIONS)}
        await until_all(cluster.clients, [TOPIC], lambda v: v.leaders.get(TOPIC) == want,
                        f"{TOPIC}'s partitions led one per broker")
        boot = bootstrap(cluster)
        log(f"  {system}: warm-up (creates __transaction_state)")
        await asyncio.to_thread(txn_bench, classes, boot, ["throughput", str(max(2000, records // 5)), str(SIZE),
                                                          "records", "10000"], TOOL_TIMEOUT_S * 2)
        for label, policy in WORKLOADS:
            t = r.throughput[label] = await throughput_run(cluster, classes, boot, records, policy)
            log(f"  {system}: {label}: {t.rps:,.0f} rec/s, {t.commits} commits p50 {t.commit_p50_ms:.1f} / "
                f"p99 {t.commit_p99_ms:.1f} ms, brokers' CPU {t.cpu_us:.0f} us/record")
        out = await asyncio.to_thread(txn_bench, classes, boot, ["e2e", str(e2e_txns)], TOOL_TIMEOUT_S + e2e_txns / 20)
        for key, pattern in E2E.items():
            m = pattern.search(out)
            if m is None:
                raise ToolFailed(f"no {key}-us line from {BENCH_CLASS}:\n{out[-2000:]}")
            r.e2e[key] = {k: int(v) for k, v in m.groupdict().items()}
        log(f"  {system}: e2e read_committed {r.e2e['e2e']}, commit {r.e2e['commit']}, visible {r.e2e['visible']}")
    finally:
        await cluster.close(logs, chroot.strip("/"))
        await zk.close()
    return r


def report(results: dict[str, list[Round]], records: int, e2e_txns: int, rounds: int) -> list[str]:
    systems = list(results)
    names = [SYSTEMS[s][0] for s in systems]
    out = [f"Three brokers on one ZooKeeper per system, {rounds} round(s) each on a fresh cluster (systems "
           f"alternate); topic of {PARTITIONS} partitions, RF 3, min.insync.replicas 2, one partition led by "
           f"each broker; {records:,} records of {SIZE} B per run; median (min-max) over the rounds.", "",
           "### Transactional produce throughput", "",
           "| workload | " + " | ".join(f"{n} rec/s | {n} commit p50 / p99 ms | {n} brokers' CPU us/record"
                                        for n in names) + " |",
           "|---|" + "---:|---:|---:|" * len(systems)]
    for label, policy in WORKLOADS:
        cells = []
        for s in systems:
            ts = [r.throughput[label] for r in results[s]]
            commit = "-" if policy is None else (f"{rng([t.commit_p50_ms for t in ts], '.1f')} / "
                                                 f"{rng([t.commit_p99_ms for t in ts], '.1f')}")
            cells += [rng([t.rps for t in ts], ",.0f"), commit, rng([t.cpu_us for t in ts], ".0f")]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out += ["", f"### One-record transactions to a read_committed consumer ({e2e_txns:,} per round, microseconds)", "",
            "| measure | " + " | ".join(f"{n} p10 / p50 / p90 / p99 / p99.9" for n in names) + " |",
            "|---|" + "---:|" * len(systems)]
    rows = {"e2e": "begin, send, commit → consumed (read_committed)", "commit": "commitTransaction call",
            "visible": "commitTransaction's return → consumed (markers written, LSO moved)"}
    for key, label in rows.items():
        cells = []
        for s in systems:
            per = [r.e2e[key] for r in results[s]]
            cells.append(" / ".join(rng([float(p[q]) for p in per], ",.0f") for q in ("p10", "p50", "p90", "p99", "p999")))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Load average before / after each round: " + "; ".join(
        f"{SYSTEMS[s][0]} " + ", ".join(r.load for r in results[s]) for s in systems) + ".")
    return out


NOTES = f"""The transactional client is tests/bench/java/TxnBench.java on Kafka 3.9's producer and consumer
(JVM `{' '.join(PERF_TOOL_JVM)}`), producer defaults besides transactional.id (so acks=all and
idempotence); the non-transactional row is Kafka's ProducerPerformance with acks=all. CPU is the
three brokers' user + system time over the run, divided by the records. Kafka brokers ZooKeeper
mode, -Xmx512m, serial GC; zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}; all on the same 2 cores.
Regenerate alone with `python -m tests.bench.bench_transactions` (`--logs DIR` keeps every broker's log)."""


async def run(systems: list[str], rounds: int, records: int, e2e_txns: int, base: Path,
              logs: Path | None) -> dict[str, list[Round]]:
    classes = compile_java([BENCH_SOURCE], base / "java")
    runs = await alternating_rounds(systems, rounds, base, "txn", lambda s, make, zk_server, work, chroot: run_round(
        s, make, zk_server, work, chroot, records, e2e_txns, classes, logs))
    results: dict[str, list[Round]] = {}
    for s, done in runs.items():
        for r, load in done:
            r.load = load
            results.setdefault(s, []).append(r)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=RECORDS)
    ap.add_argument("--e2e-txns", type=int, default=E2E_TXNS)
    ap.add_argument("--systems", default="odradek,kafka")
    ap.add_argument("--logs", type=Path, default=None, help="write every broker's log lines here")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)),
                    help="below 1: one round of a tenth of the records (a smoke run)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    configure_logging("WARNING")
    rounds, records, e2e_txns = args.rounds, args.records, args.e2e_txns
    if args.scale < 1:
        rounds, records, e2e_txns = 1, max(20_000, records // 10), max(200, e2e_txns // 10)
    systems = [s for s in args.systems.split(",") if s]
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-txn-"))
    try:
        results = asyncio.run(run(systems, rounds, records, e2e_txns, base, args.logs))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = [*report(results, records, e2e_txns, rounds), "", NOTES]
    out.append(f"\nKafka {kafka_version()}.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
