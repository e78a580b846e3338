"""`make bench`: run every benchmark module and write docs/benchmarks.md.

Each `tests/bench/bench_*.py` prints its own markdown when run as a module; this collects them
under one header that records the machine and the date, so numbers are never read without the
context they were measured in.

    python -m tests.bench [--only protocol,storage] [--out docs/benchmarks.md]
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
    "timer": ("Timing wheel vs heapq timer", "tests.bench.bench_timer"),
    "broker": ("Broker throughput, CPU per record and latency (confluent-kafka client)", "tests.bench.bench_broker"),
    "rebalance": ("Consumer group rebalance time", "tests.bench.bench_rebalance"),
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
    args = ap.parse_args(argv)
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
        proc = subprocess.run([sys.executable, "-m", module], cwd=REPO, capture_output=True, text=True)
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
