"""Odradek side by side with Redis Streams and NATS JetStream, and with the machine's limits.

One run starts all three servers (each on a free loopback port with its data in one temp dir,
stopped on every path), then measures every workload on each system in turn, interleaved so
that background load hits all three alike:

  records     100 B and 1 KiB       partitions  1 and 8       acks  1 and all
  workloads   produce only; consume only (what the acks=1 produce wrote); produce + consume
              at once; end-to-end latency at fixed rates (1 partition, 100 B)
  limits      sequential disk write (fsync'd, same filesystem) and loopback TCP, in MB/s

For every workload it reads the server's CPU time before and after (tests/bench/peers.py's
`cpu_seconds`: the on-CPU nanoseconds of every thread from /proc/<pid>/task/*/schedstat, lifted
to the utime+stime tick count of /proc/<pid>/stat where exited threads or reaped children make
that larger), and reports it per record and per MB: that figure stays meaningful when the client
is the bottleneck, which with Python clients for the peers (redis-py, nats-py) it may well be,
so the client's own CPU time (this process, all threads) is reported too. How partitions and
acks map onto the peers is in tests/bench/systems.py and repeated under the tables.

Results: markdown on stdout (ratios first, raw figures after), PNG plots in <out dir>/img/ and
the raw figures with the machine's fingerprint in <out>.json. `--compare OLD.json` adds a
then/now table and refuses (exit 2) if OLD.json comes from a different machine.

    python -m tests.bench.bench_peers [--records 200000] [--scale 1.0] [--out docs/benchmarks.md]
                                      [--compare docs/benchmarks.json]

Run by `python -m tests.bench --only peers`, which passes --scale/--out/--compare through the
environment (ODRADEK_BENCH_SCALE, ODRADEK_BENCH_OUT, ODRADEK_BENCH_COMPARE).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench import limits  # noqa: E402
from tests.bench.results import (  # noqa: E402
    MachineMismatch,
    describe,
    fingerprint,
    load_comparable,
    save,
)
from tests.bench.systems import SYSTEMS, Run, System, jitter  # noqa: E402

SIZES = (100, 1024)
PARTITIONS = (1, 8)
ACKS = ("1", "all")
KINDS = ("produce", "consume", "produce+consume")
MB = 1e6

Row = dict[str, Any]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure(system: System, fn: Callable[[], Run]) -> Row:
    """Run one workload; `seconds` is the workload's own timing (first send to last ack or
    record), the CPU figures cover the whole call (`window_s`: client start-up and close too)."""
    cpu0, client0, t0 = system.cpu_seconds(), time.process_time(), time.perf_counter()
    run = fn()
    cpu1, client1, t1 = system.cpu_seconds(), time.process_time(), time.perf_counter()
    return {"system": system.name, "records": run.records, "bytes": run.bytes,
            "seconds": run.seconds, "window_s": t1 - t0, "broker_cpu_s": cpu1 - cpu0,
            "client_cpu_s": client1 - client0}


@contextlib.contextmanager
def running(names: list[str], workdir: Path) -> Iterator[list[System]]:
    systems: list[System] = []
    with contextlib.ExitStack() as stack:
        for name in names:
            s = SYSTEMS[name]()
            stack.callback(s.stop)  # registered first: a half-started server is stopped too
            s.start(workdir)
            systems.append(s)
        yield systems


def run_all(names: list[str], n: int, rates: list[float], e2e_seconds: float,
            limit_bytes: int, workdir: Path) -> dict[str, Any]:
    rows: list[Row] = []
    e2e: list[Row] = []
    with running(names, workdir) as systems:
        for size in SIZES:
            for partitions in PARTITIONS:
                keys = {}
                for acks in ACKS:
                    key = keys[acks] = f"w{size}-p{partitions}-a{acks}-{jitter()}"
                    for s in systems:
                        s.prepare(key, partitions)
                        log(f"  produce {size} B x {n}, {partitions} partitions, "
                            f"acks={acks}: {s.name}")
                        row = measure(s, partial(s.produce, key, n, size, partitions, acks))
                        rows.append({**row, "kind": "produce", "size": size,
                                     "partitions": partitions, "acks": acks})
                for s in systems:
                    log(f"  consume {size} B x {n}, {partitions} partitions: {s.name}")
                    row = measure(s, partial(s.consume, keys["1"], n, size, partitions))
                    rows.append({**row, "kind": "consume", "size": size, "partitions": partitions,
                                 "acks": "-"})
                    for key in keys.values():
                        s.drop(key, partitions)
                for acks in ACKS:
                    key = f"b{size}-p{partitions}-a{acks}-{jitter()}"
                    for s in systems:
                        s.prepare(key, partitions)
                        log(f"  produce+consume {size} B x {n}, {partitions} partitions, "
                            f"acks={acks}: {s.name}")
                        row = measure(s, partial(s.produce_consume, key, n, size, partitions,
                                                 acks))
                        rows.append({**row, "kind": "produce+consume", "size": size,
                                     "partitions": partitions, "acks": acks})
                        s.drop(key, partitions)
        for rate in rates:
            count = max(50, round(rate * e2e_seconds))
            key = f"lat-{rate:g}-{jitter()}"
            for s in systems:
                s.prepare(key, 1)
                log(f"  e2e {count} records at {rate:g}/s: {s.name}")
                e2e.append(s.e2e_row(key, rate, count, 100))
        log("  limits: disk write, loopback TCP")
        lim = {"disk_write_mb_s": limits.disk_write_mb_s(workdir, limit_bytes),
               "loopback_tcp_mb_s": limits.loopback_tcp_mb_s(limit_bytes * 2),
               "limit_bytes": limit_bytes}
    return {"records": n, "rows": rows, "e2e": e2e, "limits": lim, "versions": versions()}


def versions() -> dict[str, str]:
    def cmd(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    import confluent_kafka

    redis_v = cmd("redis-server", "--version").split()
    redis_v = next((w[2:] for w in redis_v if w.startswith("v=")), "?")
    nats_v = cmd("nats-server", "--version").rsplit("v", 1)[-1]
    return {"redis": redis_v, "nats": nats_v, "librdkafka": confluent_kafka.libversion()[0],
            "redis-py": importlib.metadata.version("redis"),
            "nats-py": importlib.metadata.version("nats-py")}


# ---------------------------------------------------------------------------- report


def per_second(row: Row) -> float:
    return row["records"] / row["seconds"] if row["seconds"] > 0 else 0.0


def mb_per_second(row: Row) -> float:
    return row["bytes"] / MB / row["seconds"] if row["seconds"] > 0 else 0.0


CPU_METHOD = (
    "Broker CPU time is the server process's on-CPU time, read before and after each workload "
    "to the nanosecond from `/proc/<pid>/task/*/schedstat` (every live thread); a reading is "
    "raised to the utime+stime+cutime+cstime tick count of `/proc/<pid>/stat` less one tick "
    "(10 ms ticks, which also count exited threads and reaped children) where that is larger.")


def cpu_us_per_record(row: Row) -> float:
    return row["broker_cpu_s"] / row["records"] * 1e6 if row["records"] else 0.0


def cpu_ms_per_mb(row: Row) -> float:
    return row["broker_cpu_s"] / (row["bytes"] / MB) * 1e3 if row["bytes"] else 0.0


def ratio(a: float, b: float) -> float | None:
    return a / b if a > 0 and b > 0 else None


def fx(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.2f}x"


def geomean(values: list[float]) -> float | None:
    vs = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else None


def workloads(rows: list[Row]) -> list[tuple[str, int, int, str]]:
    seen: dict[tuple[str, int, int, str], None] = {}
    for r in rows:
        seen[(r["kind"], r["size"], r["partitions"], r["acks"])] = None
    return list(seen)


def grid(rows: list[Row]) -> dict[tuple[str, int, int, str], dict[str, Row]]:
    g: dict[tuple[str, int, int, str], dict[str, Row]] = {}
    for r in rows:
        g.setdefault((r["kind"], r["size"], r["partitions"], r["acks"]), {})[r["system"]] = r
    return g


def size_label(size: int) -> str:
    return "1 KiB" if size == 1024 else f"{size} B"


def table(headers: list[str], rows: list[list[str]], align: str) -> list[str]:
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def summary(res: dict[str, Any], peers: list[str]) -> list[str]:
    g = grid(res["rows"])
    lim = res["limits"]
    out = ["| Odradek vs | throughput, geometric mean (min - max) | broker CPU per record, "
           "geometric mean (min - max) |", "|---|---:|---:|"]
    for peer in peers:
        for kinds, label in ((KINDS, "all workloads"), *(((k,), k) for k in KINDS)):
            tput = [ratio(per_second(c["Odradek"]), per_second(c[peer]))
                    for w, c in g.items() if w[0] in kinds and peer in c and "Odradek" in c]
            cpu = [ratio(cpu_us_per_record(c["Odradek"]), cpu_us_per_record(c[peer]))
                   for w, c in g.items() if w[0] in kinds and peer in c and "Odradek" in c]
            t = [v for v in tput if v]
            cp = [v for v in cpu if v]
            if not t:
                continue
            cpu_cell = f"{fx(geomean(cp))} ({fx(min(cp))} - {fx(max(cp))})" if cp else "n/a"
            out.append(f"| {peer}, {label} | {fx(geomean(t))} ({fx(min(t))} - {fx(max(t))}) | "
                       f"{cpu_cell} |")
    best = {k: max((mb_per_second(c["Odradek"]) for w, c in g.items()
                    if w[0] == k and "Odradek" in c), default=0.0) for k in KINDS}
    for k in ("produce", "consume"):
        if best[k]:
            out.append(f"| sequential disk write, best {k} | "
                       f"{fx(ratio(best[k], lim['disk_write_mb_s']))} | |")
            out.append(f"| loopback TCP, best {k} | "
                       f"{fx(ratio(best[k], lim['loopback_tcp_mb_s']))} | |")
    return out


def client_bound(row: Row) -> bool:
    """The client process used >= 90% of a core over the call: it, not the server, is probably
    what limited the rate."""
    return row["window_s"] > 0 and row["client_cpu_s"] / row["window_s"] >= 0.9


def system_names(res: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["system"] for r in res["rows"]))


def report(res: dict[str, Any], img: dict[str, str], previous: dict[str, Any] | None,
           date: str, fp: dict[str, Any]) -> str:
    names = system_names(res)
    peers = [n for n in names if n != "Odradek"]
    g = grid(res["rows"])
    lim = res["limits"]
    v = res["versions"]
    lines = [
        f"Measured {date} on {describe(fp)}; {res['records']:,} records "
        f"per workload. Servers: Odradek (client librdkafka {v['librdkafka']}), Redis "
        f"{v['redis']} (redis-py {v['redis-py']}), NATS {v['nats']} JetStream (nats-py "
        f"{v['nats-py']}). Raw figures and the machine fingerprint are in the JSON file next to "
        "this page; `python -m tests.bench --compare OLD.json` refuses results from another "
        "machine.",
        "",
        "Ratios are Odradek / peer. Throughput: above 1 means Odradek moves more records per "
        "second. Broker CPU per record: below 1 means Odradek's server process spends less CPU "
        "on each record. Every ratio comes from measurements taken minutes apart in the same "
        "run on the same machine.",
        "",
        "### Ratio summary",
        "",
        *summary(res, peers),
        "",
        "Reading these: a Kafka produce request carries a batch of records that the broker "
        "appends as one blob, and a fetch returns such batches; an XADD or a JetStream publish "
        "is one command per record. Both per-record throughput and per-record CPU therefore "
        "favour the Kafka protocol, and with Python clients the peers' rates are mostly the "
        "clients' (rows marked † below): the peer servers were not saturated (see broker CPU / "
        "wall in the raw figures). Odradek / disk can exceed 1: Odradek, like Kafka, "
        "acknowledges once records are in the page cache, while the disk figure includes fsync.",
        "",
        "### Throughput (records/s)",
        "",
    ]
    head = ["workload", "record", "partitions", "acks", *(f"{n} rec/s" for n in names),
            *(f"Odradek / {p}" for p in peers), "Odradek MB/s", "Odradek / disk",
            "Odradek / loopback"]
    body = []
    for w in workloads(res["rows"]):
        c = g[w]
        o = c.get("Odradek")
        body.append([w[0], size_label(w[1]), str(w[2]), w[3],
                     *(f"{per_second(c[n]):,.0f}" + (" †" if client_bound(c[n]) else "")
                       if n in c else "n/a" for n in names),
                     *(fx(ratio(per_second(o), per_second(c[p]))) if o and p in c else "n/a"
                       for p in peers),
                     f"{mb_per_second(o):,.1f}" if o else "n/a",
                     fx(ratio(mb_per_second(o), lim["disk_write_mb_s"])) if o else "n/a",
                     fx(ratio(mb_per_second(o), lim["loopback_tcp_mb_s"])) if o else "n/a"])
    lines += table(head, body, "lllr" + "r" * (len(head) - 4))
    lines += ["", "† the client used at least 90% of a core during the run: it, not the server, "
              "probably set the rate.", "", "### Broker CPU per record (µs) and per MB (ms)", ""]
    head = ["workload", "record", "partitions", "acks", *(f"{n} µs/rec" for n in names),
            *(f"Odradek / {p}" for p in peers), *(f"{n} ms/MB" for n in names)]
    body = []
    for w in workloads(res["rows"]):
        c = g[w]
        o = c.get("Odradek")
        body.append([w[0], size_label(w[1]), str(w[2]), w[3],
                     *(f"{cpu_us_per_record(c[n]):.2f}" if n in c else "n/a" for n in names),
                     *(fx(ratio(cpu_us_per_record(o), cpu_us_per_record(c[p])))
                       if o and p in c else "n/a" for p in peers),
                     *(f"{cpu_ms_per_mb(c[n]):.2f}" if n in c else "n/a" for n in names)])
    lines += table(head, body, "lllr" + "r" * (len(head) - 4))
    lines += ["", "### End-to-end latency (1 partition, 100 B records)", ""]
    head = ["rate/s", "system", "received", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms",
            "Odradek / system p50", "Odradek / system p99", "broker CPU µs/rec",
            "broker CPU ms/MB"]
    body = []
    by_rate: dict[float, dict[str, Row]] = {}
    for e in res["e2e"]:
        by_rate.setdefault(e["rate"], {})[e["system"]] = e
    for rate, rs in by_rate.items():
        o = rs.get("Odradek")
        for name, e in rs.items():
            body.append([f"{rate:,.0f}", name, f"{e['received']:,} / {e['sent']:,}",
                         *(f"{e[k]:.2f}" for k in ("p50_ms", "p95_ms", "p99_ms", "p999_ms",
                                                    "max_ms")),
                         fx(ratio(o["p50_ms"], e["p50_ms"])) if o else "n/a",
                         fx(ratio(o["p99_ms"], e["p99_ms"])) if o else "n/a",
                         f"{e['broker_cpu_s'] / max(1, e['sent']) * 1e6:.2f}",
                         f"{e['broker_cpu_s'] / (max(1, e['sent']) * 100 / MB) * 1e3:.2f}"])
    lines += table(head, body, "rlrrrrrrrrrr")
    lines += [
        "", "Latency ratios: below 1 means Odradek is faster.", "",
        "### Physical limits (same run, same filesystem)", "",
        *table(["limit", "MB/s"], [
            ["sequential disk write, 1 MiB write()s + fsync", f"{lim['disk_write_mb_s']:,.0f}"],
            ["loopback TCP, one socket pair", f"{lim['loopback_tcp_mb_s']:,.0f}"]], "lr"),
        "", "### Raw figures", "",
    ]
    head = ["workload", "record", "partitions", "acks", "system", "records", "MB", "seconds",
            "broker CPU s", "broker CPU / wall", "client CPU / wall"]
    body = []
    for r in res["rows"]:
        s = r["window_s"] or float("nan")
        body.append([r["kind"], size_label(r["size"]), str(r["partitions"]), r["acks"],
                     r["system"], f"{r['records']:,}", f"{r['bytes'] / MB:,.1f}",
                     f"{r['seconds']:.3f}", f"{r['broker_cpu_s']:.2f}",
                     f"{r['broker_cpu_s'] / s:.0%}", f"{r['client_cpu_s'] / s:.0%}"])
    lines += table(head, body, "lllrlrrrrrr")
    lines += [
        "",
        "`seconds` is the workload's own timing (first send to last acknowledgement or record); "
        "the CPU columns cover the whole call including client start-up and close, and CPU / "
        "wall divides by that call's elapsed time (100% = one core busy; the machine has "
        f"{fp['cores']}). A client near 100% (a Python client is one core) is the bottleneck of "
        "that row and its throughput ratio says more about the clients than the servers; the "
        "broker CPU per record does not depend on that. MB = 10^6 bytes of record values. "
        + CPU_METHOD,
        "",
    ]
    lines += [f"![{alt}]({path})" for alt, path in img.items()]
    lines += ["", "How the Kafka workloads map onto the peers:", ""]
    lines += [
        "- partitions: N partitions = N Redis streams / N JetStream streams (one subject each); "
        "producers send each batch of 1,000 records to the next one (sticky, as librdkafka does "
        "for records without keys), consumers read all N.",
        "- acks: one node has no followers, so acks=1 and acks=all promise the same thing: the "
        "record is in the server's log (page cache, fsync'd later). An XADD reply (AOF "
        "`appendfsync everysec`) and a JetStream PubAck (file storage) promise exactly that, so "
        "for both rows every record's reply is waited for, pipelined (Redis: pipelines of 1,000 "
        "XADDs; NATS: async publish, up to 4,000 PubAcks outstanding). Waiting for each reply "
        "before the next send would measure round trips; librdkafka does not do that either.",
        "- consume: Odradek assigns all partitions without a group; Redis `XREAD COUNT 10000` "
        "over all streams; NATS an ephemeral pull consumer per stream with AckPolicy.NONE.",
        "- produce+consume: the consumer starts first on an empty topic, timed until it has "
        "every record. Peer clients run in this one Python process (threads for Redis, one "
        "asyncio loop for NATS), librdkafka's I/O threads run outside the GIL.",
        "- e2e: records carry their send time; Odradek linger.ms=0, acks=1; Redis one XADD per "
        "record and `XREAD BLOCK`; NATS publish_async and an ordered push consumer.",
        "- durability: Odradek and Kafka write to the page cache and leave fsync to the OS "
        "(log.flush.* unset); Redis AOF fsyncs every second (RDB snapshots and AOF rewrites off "
        "so no fork lands in a measurement); NATS JetStream file storage.",
    ]
    if previous is not None:
        lines += ["", f"### Against the run of {previous['date']} (same machine)", ""]
        old = grid(previous["results"]["rows"])
        head = ["workload", "record", "partitions", "acks", *(f"{n} now / then" for n in names)]
        body = []
        for w in workloads(res["rows"]):
            if w not in old:
                continue
            body.append([w[0], size_label(w[1]), str(w[2]), w[3],
                         *(fx(ratio(per_second(g[w][n]), per_second(old[w][n])))
                           if n in g[w] and n in old[w] else "n/a" for n in names)])
        lines += table(head, body, "lllr" + "r" * len(names))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plots


COLORS = {"Odradek": "#4c72b0", "Kafka": "#8172b2", "Redis": "#c44e52", "NATS": "#55a868"}


def plot_bars(res: dict[str, Any], names: list[str], value: Callable[[Row], float],
              ylabel: str, title: str, path: Path) -> None:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    g = grid(res["rows"])
    fig = Figure(figsize=(14, 10), layout="constrained")
    axes = fig.subplots(len(KINDS), 1)
    for ax, kind in zip(axes, KINDS, strict=True):
        ws = [w for w in workloads(res["rows"]) if w[0] == kind]
        width = 0.8 / max(1, len(names))
        for i, name in enumerate(names):
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(ws))]
            ys = [value(g[w][name]) if name in g[w] else 0.0 for w in ws]
            ax.bar(xs, ys, width, label=name, color=COLORS.get(name))
        ax.set_xticks(range(len(ws)), labels=[
            f"{size_label(w[1])}\n{w[2]} part." + ("" if w[3] == "-" else f"\nacks={w[3]}")
            for w in ws])
        ax.yaxis.set_major_formatter(
            FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:g}"))
        ax.set_ylabel(ylabel)
        ax.set_title(kind)
        ax.grid(True, axis="y", alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper right", ncols=len(names))
    fig.suptitle(title)
    fig.savefig(path, dpi=80)


def plot_latency(res: dict[str, Any], names: list[str], path: Path) -> None:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator

    rates = sorted({e["rate"] for e in res["e2e"]})
    fig = Figure(figsize=(5 * max(1, len(rates)), 4.5), layout="constrained")
    axes = fig.subplots(1, max(1, len(rates)), squeeze=False)[0]
    keys = (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"))
    for ax, rate in zip(axes, rates, strict=False):
        rs = {e["system"]: e for e in res["e2e"] if e["rate"] == rate}
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(keys))]
            ys = [rs[name][k] if name in rs else 0.0 for k, _ in keys]
            ax.bar(xs, ys, width, label=name, color=COLORS.get(name))
        ax.set_xticks(range(len(keys)), labels=[label for _, label in keys])
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_ylabel("end-to-end latency (ms)")
        ax.set_title(f"{rate:,.0f} records/s")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("End-to-end latency, 1 partition, 100 B records (lower is better)")
    fig.savefig(path, dpi=80)


def plots(res: dict[str, Any], names: list[str], img_dir: Path, rel: str) -> dict[str, str]:
    img_dir.mkdir(parents=True, exist_ok=True)
    made = {}
    plot_bars(res, names, per_second, "records/s",
              "Throughput (records/s, higher is better)", img_dir / "peers-throughput.png")
    made["throughput per workload"] = f"{rel}/peers-throughput.png"
    plot_bars(res, names, cpu_us_per_record, "broker CPU µs/record",
              "Server CPU per record (µs, lower is better)", img_dir / "peers-cpu.png")
    made["broker CPU per record"] = f"{rel}/peers-cpu.png"
    if res["e2e"]:
        plot_latency(res, names, img_dir / "peers-e2e-latency.png")
        made["end-to-end latency"] = f"{rel}/peers-e2e-latency.png"
    return made


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="records per workload at scale 1")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)),
                    help="multiplies records, e2e durations and limit sizes (0.01 = smoke test)")
    ap.add_argument("--out", type=Path,
                    default=Path(os.environ.get("ODRADEK_BENCH_OUT",
                                                REPO / "docs" / "benchmarks.md")),
                    help="the markdown page: plots go to its dir's img/, raw JSON next to it")
    ap.add_argument("--compare", type=Path, default=os.environ.get("ODRADEK_BENCH_COMPARE") or None,
                    help="a previous results JSON from this machine to compare with")
    ap.add_argument("--systems", default="odradek,redis,nats")
    ap.add_argument("--rates", default="1000,10000", help="end-to-end latency rates, records/s")
    ap.add_argument("--e2e-seconds", type=float, default=5.0, help="per rate, at scale 1")
    ap.add_argument("--limit-mb", type=int, default=1024, help="disk write size at scale 1")
    ap.add_argument("--render", type=Path, metavar="RESULTS.json",
                    help="measure nothing: re-render the page and plots from raw results of a "
                    "run on this machine")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the servers' context managers stop them
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    previous = None
    if args.compare is not None:
        try:
            previous = load_comparable(args.compare)
        except MachineMismatch as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    out: Path = args.out
    if args.render is not None:
        try:
            doc = load_comparable(args.render)
        except MachineMismatch as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        res = doc["results"]
        img = plots(res, system_names(res), out.parent / "img", "img")
        print(report(res, img, previous, doc["date"][:10], doc["fingerprint"]))
        return 0
    names = [s for s in args.systems.split(",") if s]
    if "odradek" not in names:
        print("error: --systems must include odradek (every ratio is Odradek / something)",
              file=sys.stderr)
        return 2
    n = max(500, round(args.records * args.scale))
    rates = [float(r) for r in args.rates.split(",") if r]
    limit_bytes = max(16, round(args.limit_mb * args.scale)) * 1_000_000
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        res = run_all(names, n, rates, args.e2e_seconds * args.scale, limit_bytes, Path(tmp))
    log(f"  measured in {time.perf_counter() - started:.0f} s")
    save(out.with_suffix(".json"), res)
    img = plots(res, system_names(res), out.parent / "img", "img")
    print(report(res, img, previous, dt.date.today().isoformat(), fingerprint()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
