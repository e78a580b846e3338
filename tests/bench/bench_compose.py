"""docker-compose.yml, measured: the time from `docker compose up -d` to every container healthy,
the images' sizes, and acks=all produce throughput of the compose cluster against the same
cluster as host processes (`odradek cluster up --brokers 3`), one after the other on this machine.

Both clusters: ZooKeeper (Debian's package) and three brokers, a topic of 3 partitions with
replication factor 3 and min.insync.replicas=2 (each broker leads one), loaded by Kafka's own
ProducerPerformance from the host (SIZE-byte records, --throughput -1, acks=all); the compose
cluster through its published ports (docker-proxy and the bridge on the path), the host cluster
over loopback. A warm-up run (acks=1, not recorded) first, then TRIALS runs.

The Docker engine is started if none answers and stopped afterwards (tests/compose/docker.py);
the images are built first (cached builds take seconds), on the local base image.

    python -m tests.bench.bench_compose [--trials 5] [--records 100000] [--up-rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient, NewTopic

from tests.bench.bench_replication import SIZE, PerfRun, producer_perf
from tests.broker_process import REPO, free_port
from tests.compose.docker import ComposeProject, DockerEngine, build_base_image, run

TOPIC = "bench-acks-all"
IMAGES = ("odradek:latest", "odradek-zookeeper:latest", "odradek-pipeline:latest", "odradek-base:bookworm")
SERVICES = ["zookeeper", "broker-1", "broker-2", "broker-3"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic], operation_timeout=30)[TOPIC].result(60)
    deadline = time.monotonic() + 60
    while True:  # every partition led and fully in sync before the load
        parts = admin.list_topics(TOPIC, timeout=20).topics[TOPIC].partitions.values()
        if parts and all(p.leader >= 0 and len(p.isrs) == 3 for p in parts):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{TOPIC}: ISRs not full in 60 s")
        time.sleep(0.2)


def alternate(bootstraps: dict[str, str], trials: int, records: int) -> dict[str, list[PerfRun]]:
    """The topic and a warm-up on each cluster, then `trials` runs on each, taking turns, so a
    slower or faster spell of the machine falls on both alike."""
    for bootstrap in bootstraps.values():
        create_topic(bootstrap)
        producer_perf(bootstrap, TOPIC, records // 5, "1")  # warm-up
    runs: dict[str, list[PerfRun]] = {name: [] for name in bootstraps}
    for i in range(trials):
        for name, bootstrap in bootstraps.items():
            runs[name].append(producer_perf(bootstrap, TOPIC, records, "all"))
            log(f"  {name} trial {i + 1}: {runs[name][-1].rps:,.0f} records/s, p99 {runs[name][-1].p99_ms:.0f} ms")
    return runs


def compose_up_rounds(project: ComposeProject, up_rounds: int) -> list[float]:
    """Seconds from `up -d` to all healthy, per round, each from empty volumes; the last round's
    cluster is left running."""
    ups = []
    for i in range(up_rounds):
        if i:
            project.compose("down", "-v", timeout=300)
        started = time.monotonic()
        project.compose("up", "-d", timeout=300)
        project.wait_healthy(SERVICES, timeout=180)
        ups.append(time.monotonic() - started)
        log(f"compose round {i + 1}: all healthy {ups[-1]:.1f} s after up -d")
    return ups


HOST_CLI = [sys.executable, "-m", "clients.cli", "cluster"]


def host_up(directory: str) -> tuple[float, str]:
    """`odradek cluster up --brokers 3` with the compose file's replication defaults: seconds
    until it returned (every broker logged 'broker started'), and its bootstrap string."""
    started = time.monotonic()
    out = run([*HOST_CLI, "up", "--brokers", "3", "--dir", directory, "--port", str(free_port()),
               "--zookeeper-port", str(free_port()), "--override", "default.replication.factor=3",
               "--override", "offsets.topic.replication.factor=3"], timeout=180).stdout
    took = time.monotonic() - started
    log(f"odradek cluster up: returned after {took:.1f} s")
    return took, next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("bootstrap: "))


def image_sizes() -> dict[str, int]:
    sizes = {}
    for image in IMAGES:
        proc = run(["docker", "image", "inspect", image], check=False)
        if proc.returncode == 0:
            sizes[image] = json.loads(proc.stdout)[0]["Size"]
    return sizes


def report(ups: list[float], host_up: float, compose_runs: list[PerfRun], host_runs: list[PerfRun],
           sizes: dict[str, int], records: int) -> list[str]:
    def med(runs: list[PerfRun], f: str) -> float:
        return statistics.median(getattr(r, f) for r in runs)

    out = [
        "`docker compose up -d` until ZooKeeper and the three brokers are healthy (images built, "
        "empty volumes), one figure per round:",
        "",
        f"- compose: {', '.join(f'{u:.1f}' for u in ups)} s (median {statistics.median(ups):.1f} s); "
        "the health checks run every 2 s (ZooKeeper) and 3 s (brokers), so a figure includes up to "
        "one interval of each waiting for the next probe",
        f"- host processes, `odradek cluster up --brokers 3` until it returns (brokers logged started): {host_up:.1f} s",
        "",
        "| image | size |",
        "|---|---:|",
        *(f"| `{name}` | {size / 1e6:,.0f} MB |" for name, size in sizes.items()),
        "",
        f"acks=all produce, Kafka's ProducerPerformance from the host, {records:,} records of {SIZE} B, "
        "3 partitions, RF 3, min.insync.replicas=2, both clusters up at once and the trials taking "
        "turns (median of the trials; every trial below):",
        "",
        "| cluster | records/s | MB/s | avg ms | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, runs in (("docker compose (published ports)", compose_runs), ("host processes (loopback)", host_runs)):
        out.append(f"| {name} | {med(runs, 'rps'):,.0f} | {med(runs, 'mbps'):.1f} | {med(runs, 'avg_ms'):.1f} "
                   f"| {med(runs, 'p50_ms'):.0f} | {med(runs, 'p99_ms'):.0f} |")
    ratio = med(compose_runs, "rps") / med(host_runs, "rps")
    out += ["", f"Compose / host throughput: {ratio:.2f}.", "",
            "Trials (records/s): compose " + ", ".join(f"{r.rps:,.0f}" for r in compose_runs)
            + "; host " + ", ".join(f"{r.rps:,.0f}" for r in host_runs) + "."]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--records", type=int, default=int(100_000 * float(os.environ.get("ODRADEK_BENCH_SCALE", "1"))))
    ap.add_argument("--up-rounds", type=int, default=3)
    args = ap.parse_args(argv)
    engine = DockerEngine(REPO / "build" / "docker").start()
    project = ComposeProject(f"odradek-bench-{os.getpid()}")
    try:
        build_base_image()
        project.compose("build", timeout=1800)
        sizes = image_sizes()
        ups = compose_up_rounds(project, args.up_rounds)
        with tempfile.TemporaryDirectory(prefix="bench-compose-host-") as tmp:
            host_took, host_bootstrap = host_up(tmp)
            try:
                runs = alternate({"compose": project.bootstrap, "host": host_bootstrap}, args.trials, args.records)
            finally:
                run([*HOST_CLI, "down", "--dir", tmp], timeout=180, check=False)
    finally:
        project.compose("down", "-v", timeout=300, check=False)
        engine.stop()
    print("\n".join(report(ups, host_took, runs["compose"], runs["host"], sizes, args.records)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
