"""`make bench`: run every benchmark module and write docs/benchmarks.md.

Each `tests/bench/bench_*.py` prints its own markdown when run as a module; this collects them
under one header that records the machine and the date, so numbers are never read without the
context they were measured in.

    python -m tests.bench [--only protocol,storage] [--out docs/benchmarks.md] [--scale 0.01]
                          [--compare docs/benchmarks.json]

Modules that write files next to the page (plots under img/, raw JSON) or scale their sizes read
ODRADEK_BENCH_OUT / ODRADEK_BENCH_SCALE / ODRADEK_BENCH_COMPARE, which this sets from --out,
--scale and --compare. --compare names a previous run's raw results: the run is refused
(exit 2, nothing measured or written) if they come from a different machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCHES = {
    "protocol": ("Protocol codecs", "tests.bench.bench_protocol"),
    "storage": ("Storage: append and read vs raw file I/O", "tests.bench.bench_storage"),
    "validation": ("Per-record checks on the produce path (compacted topics, timestamp bounds)",
                   "tests.bench.bench_record_validation"),
    "cleaner": ("Log compaction: cleaner throughput vs the disk, produce latency while it cleans",
                "tests.bench.bench_cleaner"),
    "timer": ("Timing wheel vs heapq timer", "tests.bench.bench_timer"),
    "metrics": ("The cost of /metrics: throughput and broker CPU per record with metrics off and on",
                "tests.bench.bench_metrics"),
    "broker": ("Side by side with Apache Kafka 3.9: throughput, broker CPU per record, latency",
               "tests.bench.bench_broker"),
    "tls": ("TLS and SASL side by side with Apache Kafka 3.9: SSL and SASL_SSL (SCRAM-SHA-256) throughput and "
            "broker CPU per record, and the cost of TLS over PLAINTEXT", "tests.bench.bench_tls"),
    "rebalance": ("Consumer group rebalance time", "tests.bench.bench_rebalance"),
    "cluster": ("ZooKeeper cluster (control plane): controller failover, leader election, topic creation, "
                "metadata propagation, side by side with Kafka 3.9", "tests.bench.bench_cluster"),
    "deletion": ("Topic deletion (ZooKeeper cluster): 1,000 topics in one DeleteTopics, and a topic created meanwhile, "
                 "side by side with Kafka 3.9", "tests.bench.bench_topic_deletion"),
    "hops": ("Replication round: CPU time per hop, in-process", "tests.bench.bench_replication_hops"),
    "replication": ("Replication (ZooKeeper cluster): RF 3 vs RF 1 produce, replication lag, failover, acks=all "
                    "latency, side by side with Kafka 3.9", "tests.bench.bench_replication"),
    "transactions": ("Transactions (ZooKeeper cluster): transactional produce throughput, commit cost, latency to a "
                     "read_committed consumer, side by side with Kafka 3.9", "tests.bench.bench_transactions"),
    "compose": ("docker-compose: time to healthy, image sizes, acks=all throughput vs host processes",
                "tests.bench.bench_compose"),
    "spark": ("Spark batch read through the odradek data source", "tests.bench.bench_spark"),
    "peers": ("Side by side: Redis Streams, NATS JetStream and the machine's limits", "tests.bench.bench_peers"),
    "txn-verification": ("Transactional produce: what KIP-890 verification costs",
                         "tests.bench.bench_txn_verification"),
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} x {cpu}{mem}; Python {platform.python_version()} on {platform.system()} {platform.release()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(BENCHES))
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="size factor for modules that take one (0.01 for a smoke run)")
    ap.add_argument("--compare", type=Path,
                    help="previous raw results (JSON) from this machine to compare against")
    args = ap.parse_args(argv)
    if args.compare is not None:
        from tests.bench.results import MachineMismatch, load_comparable

        try:
            load_comparable(args.compare)
        except MachineMismatch as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    env = {**os.environ, "ODRADEK_BENCH_OUT": str(args.out.resolve()),
           "ODRADEK_BENCH_SCALE": str(args.scale)}
    if args.compare is not None:
        env["ODRADEK_BENCH_COMPARE"] = str(args.compare.resolve())
    parts = [
        "# Benchmarks",
        "",
        f"Measured {dt.date.today().isoformat()} on {machine()}.",
        "Regenerate with `make bench`. Ratios are measured side by side in the same run.",
        "",
    ]
    failed = False
    for name in args.only.split(","):
        title, module = BENCHES[name]
        print(f"running {module} ...", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, "-m", module], cwd=REPO, capture_output=True, text=True,
                              env=env)
        if proc.returncode != 0:
            failed = True
            body = f"failed:\n\n```\n{proc.stderr[-2000:]}\n```"
        else:
            body = proc.stdout.strip()
        parts += [f"## {title}", "", body, ""]
    args.out.write_text("\n".join(parts))
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
