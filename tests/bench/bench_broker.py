"""Odradek side by side with Apache Kafka 3.9: the same workloads, through the same clients,
against both brokers in one run.

Both brokers run at once on loopback (Odradek as `odradek serve`; Kafka 3.9 as one KRaft node
from the jars in build/java/kafka, with kafka-server-start.sh's 1 GiB heap and G1 settings: see
tests/bench/systems.py's `Kafka`), and every workload is run on each in turn, interleaved, so
background load hits both alike:

  clients     librdkafka through `odradek perf`'s functions (clients/perf_run.py), and Kafka's
              own Java tools ProducerPerformance / ConsumerPerformance (tests/bench/kafka_tools.py)
  produce     100 B records, 1 and 8 partitions, acks=1 and acks=all; linger.ms=5,
              batch.size=1 MiB, idempotence off, for both clients
  consume     the records the acks=1 produce wrote, from the earliest offset (librdkafka:
              assign, no group; Java: ConsumerPerformance's group member)
  e2e         end-to-end latency p50/p99 at 1,000 and 10,000 records/s (librdkafka, 1 partition,
              acks=1, linger.ms=0; `odradek perf e2e`'s measurement)

Each broker's CPU time is read before and after every workload (tests/bench/peers.py's
`cpu_seconds`: on-CPU ns of every thread from /proc/<pid>/task/*/schedstat, the JVM's GC and JIT
threads included) and reported per record. Unrecorded warm-ups at a fifth of the size come
first (every librdkafka workload, each Java tool once, then the e2e rates: the JVM's JIT,
__consumer_offsets, the group path); then every workload runs `--trials` times, alternating which
broker goes first, and the tables show the median.

Results: markdown on stdout (ratios first, raw figures last), PNG plots in <out dir>/img/kafka-*
and the raw figures with the machine's fingerprint in <out dir>/benchmarks-kafka.json.

    python -m tests.bench.bench_broker [--records 500000] [--trials 3] [--scale 1.0]
                                       [--out docs/benchmarks.md] [--render RESULTS.json]

Run by `python -m tests.bench --only broker`, which passes --scale/--out through the environment
(ODRADEK_BENCH_SCALE, ODRADEK_BENCH_OUT). A quick run for a smoke test: --scale 0.002.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_peers import (  # noqa: E402
    COLORS,
    CPU_METHOD,
    geomean,
    plot_latency,
    ratio,
    running,
    table,
)
from tests.bench.bench_peers import fx as fx2  # noqa: E402
from tests.bench.kafka_tools import (  # noqa: E402
    PERF_TOOL_JVM,
    consumer_performance,
    producer_performance,
)
from tests.bench.results import MachineMismatch, describe, fingerprint, load_comparable, save  # noqa: E402
from tests.bench.systems import Kafka, Run, System, jitter  # noqa: E402

SIZE = 100
PARTITIONS = (1, 8)
ACKS = ("1", "all")
CLIENTS = ("librdkafka", "java")
CLIENT_LABEL = {"librdkafka": "librdkafka", "java": "Java tools"}
KINDS = ("produce", "consume")
BROKERS = ("Odradek", "Kafka")
# the same producer settings for both clients (librdkafka's are systems.Odradek.props)
JAVA_PRODUCER = {"linger.ms": 5, "batch.size": 1 << 20, "enable.idempotence": "false"}
MB = 1e6

Row = dict[str, Any]
Key = tuple[str, str, int, str]  # client, kind, partitions, acks


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ helpers bench_spark shares


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    p = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20,
        "enable.idempotence": False,
    })
    value = b"x" * size
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    assert p.flush(120) == 0
    return time.perf_counter() - start


# ---------------------------------------------------------------------------- measuring


def children_cpu() -> float:
    """CPU seconds of this process's reaped children: a Java tool once it has exited (the
    brokers are still running, so they are not in it)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure(system: System, fn: Callable[[], Run]) -> Row:
    """One workload: `seconds` is the client's own timing; broker and client CPU cover the whole
    call (`window_s`), a Java tool's JVM start included."""
    cpu0, client0, t0 = system.cpu_seconds(), time.process_time() + children_cpu(), time.perf_counter()
    run = fn()
    cpu1, client1, t1 = system.cpu_seconds(), time.process_time() + children_cpu(), time.perf_counter()
    return {"broker": system.name, "records": run.records, "bytes": run.bytes,
            "seconds": run.seconds, "window_s": t1 - t0, "broker_cpu_s": cpu1 - cpu0,
            "client_cpu_s": client1 - client0}


def produce_fn(client: str, system: System, topic: str, n: int, partitions: int,
               acks: str) -> Callable[[], Run]:
    if client == "librdkafka":
        return lambda: system.produce(topic, n, SIZE, partitions, acks)

    def java() -> Run:
        r = producer_performance(system.bootstrap, topic, n, SIZE, acks, JAVA_PRODUCER)
        return Run(r.records, r.bytes, r.seconds)

    return java


def consume_fn(client: str, system: System, topic: str, n: int,
               partitions: int) -> Callable[[], Run]:
    if client == "librdkafka":
        return lambda: system.consume(topic, n, SIZE, partitions)

    def java() -> Run:
        r = consumer_performance(system.bootstrap, topic, n, SIZE, group=f"perf-{topic}")
        return Run(r.records, r.bytes, r.seconds)

    return java


def run_trial(systems: list[System], n: int, trial: int, rows: list[Row],
              clients: tuple[str, ...] = CLIENTS, partition_counts: tuple[int, ...] = PARTITIONS,
              acks_settings: tuple[str, ...] = ACKS) -> None:
    """Every produce and consume workload once on each broker; the order of the brokers flips
    from one trial to the next. Consume reads what the acks=1 produce wrote."""
    order = systems if trial % 2 == 0 else systems[::-1]
    for client in clients:
        for partitions in partition_counts:
            topics: dict[tuple[str, str], str] = {}
            for acks in acks_settings:
                for s in order:
                    topic = topics[s.name, acks] = f"{client}-p{partitions}-a{acks}-{jitter()}"
                    s.prepare(topic, partitions)
                    log(f"  trial {trial}: {client} produce {n:,} x {SIZE} B, {partitions} "
                        f"partitions, acks={acks}: {s.name}")
                    row = measure(s, produce_fn(client, s, topic, n, partitions, acks))
                    rows.append({**row, "trial": trial, "client": client, "kind": "produce",
                                 "partitions": partitions, "acks": acks})
            for s in order:
                log(f"  trial {trial}: {client} consume {n:,}, {partitions} partitions: {s.name}")
                row = measure(s, consume_fn(client, s, topics[s.name, "1"], n, partitions))
                rows.append({**row, "trial": trial, "client": client, "kind": "consume",
                             "partitions": partitions, "acks": "-"})
                for acks in acks_settings:
                    s.drop(topics[s.name, acks], partitions)


def run_e2e_rates(systems: list[System], rates: list[float], seconds: float,
                  e2e: list[Row]) -> None:
    """End-to-end latency at each rate on each broker, a fresh 1-partition topic each time."""
    for rate in rates:
        count = max(50, round(rate * seconds))
        for s in systems:
            topic = f"lat-{rate:g}-{jitter()}"
            s.prepare(topic, 1)
            log(f"  e2e {count:,} records at {rate:g}/s: {s.name}")
            e2e.append(s.e2e_row(topic, rate, count, SIZE))


def idle_cpu(systems: list[System], seconds: float) -> dict[str, float]:
    """Each broker's CPU use at rest, as a fraction of one core over `seconds` (background
    threads: the part of every workload's broker CPU that does not depend on the records)."""
    before = {s.name: s.cpu_seconds() for s in systems}
    t0 = time.perf_counter()
    time.sleep(seconds)  # a measurement interval, not a wait for an event
    wall = time.perf_counter() - t0
    return {s.name: (s.cpu_seconds() - before[s.name]) / wall for s in systems}


def run_all(n: int, trials: int, rates: list[float], e2e_seconds: float, idle_s: float,
            workdir: Path) -> dict[str, Any]:
    rows: list[Row] = []
    e2e: list[Row] = []
    with running(["odradek", "kafka"], workdir) as systems:
        servers = {s.name: {"pid": s.pid} for s in systems}
        # warm-up, not recorded: the brokers' JIT and caches, __consumer_offsets and the group
        # path; every librdkafka workload, the Java tools once each (a JVM start per run)
        warm = max(500, n // 5)
        log(f"  warm-up, {warm:,} records per workload (not recorded)")
        run_trial(systems, warm, -1, [], clients=("librdkafka",))
        run_trial(systems, warm, -1, [], clients=("java",), partition_counts=(8,),
                  acks_settings=("1",))
        for trial in range(trials):
            run_trial(systems, n, trial, rows)
        log("  e2e warm-up (not recorded)")
        run_e2e_rates(systems, rates, e2e_seconds / 5, [])
        run_e2e_rates(systems, rates, e2e_seconds, e2e)
        log(f"  idle CPU over {idle_s:g} s")
        idle = idle_cpu(systems, idle_s)
    return {"records": n, "size": SIZE, "trials": trials, "rows": rows, "e2e": e2e,
            "idle_cpu": idle, "servers": servers, "versions": versions()}


def versions() -> dict[str, str]:
    import confluent_kafka

    from tests.compat.jvm import java, kafka_version

    try:
        jv = subprocess.run([java(), "-version"], capture_output=True, text=True,
                            timeout=30).stderr.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        jv = "?"
    return {"kafka": kafka_version(), "librdkafka": confluent_kafka.libversion()[0],
            "java": jv, "kafka_jvm": " ".join(Kafka.JVM), "tool_jvm": " ".join(PERF_TOOL_JVM)}


# ---------------------------------------------------------------------------- report


def per_second(row: Row) -> float:
    return row["records"] / row["seconds"] if row["seconds"] > 0 else 0.0


def cpu_us(row: Row) -> float:
    return row["broker_cpu_s"] / row["records"] * 1e6 if row["records"] else 0.0


def medians(rows: list[Row]) -> dict[Key, dict[str, dict[str, float]]]:
    """Per workload and broker: the median over trials of records/s, MB/s and CPU µs/record."""
    by: dict[Key, dict[str, list[Row]]] = {}
    for r in rows:
        by.setdefault((r["client"], r["kind"], r["partitions"], r["acks"]), {}).setdefault(
            r["broker"], []).append(r)
    out: dict[Key, dict[str, dict[str, float]]] = {}
    for key, brokers in by.items():
        out[key] = {b: {"rps": statistics.median(per_second(r) for r in rs),
                        "mbps": statistics.median(r["bytes"] / MB / r["seconds"] for r in rs),
                        "cpu_us": statistics.median(cpu_us(r) for r in rs),
                        "trials": len(rs)} for b, rs in brokers.items()}
    return out


def fx(r: float | None) -> str:
    """A ratio with two decimals, or two significant digits below 0.1 (0.0021x, not 0.00x)."""
    if r is not None and r < 0.1:
        return f"{r:.2g}x"
    return fx2(r)


def both(m: dict[str, dict[str, float]]) -> bool:
    return all(b in m for b in BROKERS)


def workload_label(key: Key) -> str:
    _client, kind, partitions, acks = key
    return f"{kind}, {partitions} part." + ("" if acks == "-" else f", acks={acks}")


def summary(med: dict[Key, dict[str, dict[str, float]]], e2e: list[Row]) -> list[str]:
    out = ["| client | workload | throughput, geometric mean (min - max) | broker CPU per "
           "record, geometric mean (min - max) |", "|---|---|---:|---:|"]
    groups = [(c, k) for c in CLIENTS for k in KINDS] + [(None, None)]
    for client, kind in groups:
        ms = [m for key, m in med.items() if both(m) and client in (None, key[0])
              and kind in (None, key[1])]
        t = [v for m in ms if (v := ratio(m["Odradek"]["rps"], m["Kafka"]["rps"]))]
        c = [v for m in ms if (v := ratio(m["Odradek"]["cpu_us"], m["Kafka"]["cpu_us"]))]
        if not t:
            continue
        cell_t = f"{fx(geomean(t))} ({fx(min(t))} - {fx(max(t))})"
        cell_c = f"{fx(geomean(c))} ({fx(min(c))} - {fx(max(c))})" if c else "n/a"
        out.append(f"| {CLIENT_LABEL.get(client or '', 'both')} | {kind or 'all'} | {cell_t} | "
                   f"{cell_c} |")
    by_rate = e2e_by_rate(e2e)
    for rate, rs in by_rate.items():
        if all(b in rs for b in BROKERS):
            o, k = rs["Odradek"], rs["Kafka"]
            out.append(f"| librdkafka | e2e latency at {rate:,.0f}/s: p50, p99 | "
                       f"{fx(ratio(o['p50_ms'], k['p50_ms']))}, "
                       f"{fx(ratio(o['p99_ms'], k['p99_ms']))} | "
                       f"{fx(ratio(e2e_cpu_us(o), e2e_cpu_us(k)))} |")
    return out


def e2e_by_rate(e2e: list[Row]) -> dict[float, dict[str, Row]]:
    by: dict[float, dict[str, Row]] = {}
    for e in e2e:
        by.setdefault(e["rate"], {})[e["system"]] = e
    return by


def e2e_cpu_us(e: Row) -> float:
    return e["broker_cpu_s"] / max(1, e["sent"]) * 1e6


def client_bound(row: Row) -> bool:
    return row["window_s"] > 0 and row["client_cpu_s"] / row["window_s"] >= 0.9


def report(res: dict[str, Any], img: dict[str, str], date: str, fp: dict[str, Any]) -> str:
    v = res["versions"]
    med = medians(res["rows"])
    lines = [
        f"Measured {date} on {describe(fp)}; {res['records']:,} records of {res['size']} B per "
        f"workload, median of {res['trials']} trial(s) after an unrecorded warm-up. Brokers: "
        f"Odradek and Apache Kafka {v['kafka']} (one KRaft node; JVM `{v['kafka_jvm']}`, "
        f"{v['java']}), both on loopback in the same run. Clients: librdkafka "
        f"{v['librdkafka']} (`odradek perf`'s produce / consume / e2e) and Kafka {v['kafka']}'s "
        f"ProducerPerformance / ConsumerPerformance (JVM `{v['tool_jvm']}`). Raw figures and the "
        "machine fingerprint: benchmarks-kafka.json next to this page.",
        "",
        "Ratios are Odradek / Kafka. Throughput above 1: Odradek moves more records per second. "
        "Broker CPU per record below 1: Odradek's process spends less CPU on each record. "
        "Latency below 1: Odradek is faster.",
        "",
        "### Ratio summary",
        "",
        *summary(med, res["e2e"]),
        "",
        "### Throughput and broker CPU per record (median of the trials)",
        "",
    ]
    head = ["client", "workload", "partitions", "acks", "Odradek rec/s", "Kafka rec/s",
            "Odradek / Kafka", "Odradek MB/s", "Kafka MB/s", "Odradek CPU µs/rec",
            "Kafka CPU µs/rec", "Odradek / Kafka CPU"]
    body = []
    for key, m in med.items():
        if not both(m):
            continue
        o, k = m["Odradek"], m["Kafka"]
        body.append([CLIENT_LABEL[key[0]], key[1], str(key[2]), key[3],
                     f"{o['rps']:,.0f}", f"{k['rps']:,.0f}", fx(ratio(o["rps"], k["rps"])),
                     f"{o['mbps']:,.1f}", f"{k['mbps']:,.1f}", f"{o['cpu_us']:.2f}",
                     f"{k['cpu_us']:.2f}", fx(ratio(o["cpu_us"], k["cpu_us"]))])
    lines += table(head, body, "llrl" + "r" * (len(head) - 4))
    lines += ["", "### End-to-end latency (librdkafka, 1 partition, 100 B records, acks=1)", ""]
    head = ["rate/s", "broker", "received", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms",
            "Odradek / Kafka p50", "Odradek / Kafka p99", "broker CPU µs/rec"]
    body = []
    for rate, rs in e2e_by_rate(res["e2e"]).items():
        for name, e in rs.items():
            k = rs.get("Kafka")
            body.append([f"{rate:,.0f}", name, f"{e['received']:,} / {e['sent']:,}",
                         *(f"{e[c]:.2f}" for c in ("p50_ms", "p95_ms", "p99_ms", "p999_ms",
                                                    "max_ms")),
                         fx(ratio(e["p50_ms"], k["p50_ms"])) if k else "n/a",
                         fx(ratio(e["p99_ms"], k["p99_ms"])) if k else "n/a",
                         f"{e2e_cpu_us(e):.2f}"])
    lines += table(head, body, "rlrrrrrrrrr")
    load = "; ".join(
        f"{rate:,.0f}/s: " + ", ".join(f"{name} {rate * e2e_cpu_us(e) / 1e6:.0%}" for name, e in rs.items())
        for rate, rs in e2e_by_rate(res["e2e"]).items())
    lines += [
        "",
        "The end-to-end producer sends every record as its own request (linger.ms=0) and the "
        "consumer polls with fetch.wait.max.ms=5, so besides one produce request per record each "
        "broker answers about 200 fetches a second: at these rates that request handling, not the "
        "records, is most of the broker CPU per record. Broker CPU as a share of one core: "
        f"{load}. Producer, consumer and broker share the machine's 2 cores: a broker that needs "
        "most of a core also delays both clients, the likely cause of the high percentiles at "
        "10,000/s (not profiled further).",
    ]
    idle = res["idle_cpu"]
    lines += [
        "",
        "At rest after the workloads the brokers used "
        + ", ".join(f"{name} {idle[name]:.1%}" for name in BROKERS if name in idle)
        + " of a core (background threads; part of every window's broker CPU).",
        "",
        "### Raw figures (every trial)",
        "",
    ]
    head = ["trial", "client", "workload", "partitions", "acks", "broker", "records",
            "seconds", "rec/s", "broker CPU s", "broker CPU / wall", "client CPU / wall"]
    body = []
    for r in res["rows"]:
        w = r["window_s"] or float("nan")
        body.append([str(r["trial"]), CLIENT_LABEL[r["client"]], r["kind"], str(r["partitions"]),
                     r["acks"], r["broker"], f"{r['records']:,}", f"{r['seconds']:.3f}",
                     f"{per_second(r):,.0f}" + (" †" if client_bound(r) else ""),
                     f"{r['broker_cpu_s']:.3f}", f"{r['broker_cpu_s'] / w:.0%}",
                     f"{r['client_cpu_s'] / w:.0%}"])
    lines += table(head, body, "rlllllrrrrrr")
    lines += [
        "",
        "† the client used at least 90% of a core over the call: it, not the broker, probably "
        "set that rate.",
        "",
        "How it is measured: the same client program against each broker, one after the other, "
        "in the same run. librdkafka produce is timed from the first send to the last "
        "acknowledgement, consume from the partition assignment to the last record; "
        "ProducerPerformance and ConsumerPerformance report their own timing (the first send "
        "to the last acknowledgement; fetch.time.ms: from the group's assignment to the last "
        "record). `seconds` is that timing; the CPU columns cover the whole call, the client's "
        "start-up (a JVM for the Java tools) and close included, and CPU / wall divides by the "
        f"call's elapsed time (100% = one core; the machine has {fp['cores']}). "
        "Producers: linger.ms=5, batch.size=1 MiB, no idempotence, no compression, random "
        "upper-case payloads; MB = 10^6 bytes of record values. Both brokers write to the page "
        "cache and leave fsync to the OS (log.flush.* unset); Kafka logs at WARN. " + CPU_METHOD,
        "",
    ]
    lines += [f"![{alt}]({path})" for alt, path in img.items()]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plots


def plot_ratios(med: dict[Key, dict[str, dict[str, float]]], path: Path) -> None:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    keys = [k for k, m in med.items() if both(m)]
    fig = Figure(figsize=(12, 0.45 * len(keys) + 2), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    labels = [f"{CLIENT_LABEL[k[0]]}: {workload_label(k)}" for k in keys]
    for ax, (metric, title, better) in zip(axes, (
            ("rps", "throughput, Odradek / Kafka", "higher is better"),
            ("cpu_us", "broker CPU per record, Odradek / Kafka", "lower is better")),
            strict=True):
        values = [ratio(med[k]["Odradek"][metric], med[k]["Kafka"][metric]) or math.nan
                  for k in keys]
        good = [(v >= 1) == (metric == "rps") for v in values]
        ax.barh(range(len(keys)), values, color=["#55a868" if g else "#c44e52" for g in good])
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
        ax.set_title(f"{title} ({better})")
        ax.grid(True, axis="x", alpha=0.3)
        for i, val in enumerate(values):
            if not math.isnan(val):
                ax.annotate(f"{val:.2f}x", (val, i), xytext=(3, 0), textcoords="offset points",
                            va="center", fontsize="small")
    axes[0].set_yticks(range(len(keys)), labels=labels)
    axes[0].invert_yaxis()
    fig.suptitle("Odradek / Apache Kafka 3.9, same clients, same run")
    fig.savefig(path, dpi=80)


def plot_bars(med: dict[Key, dict[str, dict[str, float]]], metric: str, ylabel: str,
              title: str, path: Path) -> None:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(len(CLIENTS), 1)
    for ax, client in zip(axes, CLIENTS, strict=True):
        keys = [k for k, m in med.items() if k[0] == client and both(m)]
        width = 0.8 / len(BROKERS)
        for i, name in enumerate(BROKERS):
            xs = [j + (i - (len(BROKERS) - 1) / 2) * width for j in range(len(keys))]
            ax.bar(xs, [med[k][name][metric] for k in keys], width, label=name,
                   color=COLORS[name])
        ax.set_xticks(range(len(keys)), labels=[workload_label(k).replace(", ", "\n")
                                                for k in keys])
        ax.yaxis.set_major_formatter(
            FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:g}"))
        ax.set_ylabel(ylabel)
        ax.set_title(CLIENT_LABEL[client])
        ax.grid(True, axis="y", alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper right",
               ncols=len(BROKERS))
    fig.suptitle(title)
    fig.savefig(path, dpi=80)


def plots(res: dict[str, Any], img_dir: Path, rel: str) -> dict[str, str]:
    img_dir.mkdir(parents=True, exist_ok=True)
    med = medians(res["rows"])
    made = {}
    plot_ratios(med, img_dir / "kafka-ratios.png")
    made["Odradek / Kafka ratios per workload"] = f"{rel}/kafka-ratios.png"
    plot_bars(med, "rps", "records/s", "Throughput (records/s, higher is better)",
              img_dir / "kafka-throughput.png")
    made["throughput, Odradek and Kafka"] = f"{rel}/kafka-throughput.png"
    plot_bars(med, "cpu_us", "broker CPU µs/record",
              "Broker CPU per record (µs, lower is better)", img_dir / "kafka-cpu.png")
    made["broker CPU per record, Odradek and Kafka"] = f"{rel}/kafka-cpu.png"
    if res["e2e"]:
        plot_latency(res, list(BROKERS), img_dir / "kafka-e2e-latency.png")
        made["end-to-end latency, Odradek and Kafka"] = f"{rel}/kafka-e2e-latency.png"
    return made


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=500_000, help="records per workload at scale 1")
    ap.add_argument("--trials", type=int, default=None,
                    help="measured trials per workload (default 3; 1 below scale 0.3)")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)),
                    help="multiplies records, e2e durations and the idle window (0.002 = smoke)")
    ap.add_argument("--out", type=Path,
                    default=Path(os.environ.get("ODRADEK_BENCH_OUT",
                                                REPO / "docs" / "benchmarks.md")),
                    help="the markdown page: plots go to its dir's img/, raw JSON next to it")
    ap.add_argument("--rates", default="1000,10000", help="end-to-end latency rates, records/s")
    ap.add_argument("--e2e-seconds", type=float, default=5.0, help="per rate, at scale 1")
    ap.add_argument("--render", type=Path, metavar="RESULTS.json",
                    help="measure nothing: re-render the page and plots from raw results of a "
                    "run on this machine")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so `running` stops both brokers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out: Path = args.out
    if args.render is not None:
        try:
            doc = load_comparable(args.render)
        except MachineMismatch as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        res = doc["results"]
        print(report(res, plots(res, out.parent / "img", "img"), doc["date"][:10],
                     doc["fingerprint"]))
        return 0
    n = max(500, round(args.records * args.scale))
    trials = args.trials if args.trials is not None else (3 if args.scale >= 0.3 else 1)
    rates = [float(r) for r in args.rates.split(",") if r]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        res = run_all(n, trials, rates, args.e2e_seconds * args.scale,
                      max(0.2, 5.0 * args.scale), Path(tmp))
    log(f"  measured in {time.perf_counter() - started:.0f} s")
    save(out.with_name("benchmarks-kafka.json"), res)
    img = plots(res, out.parent / "img", "img")
    print(report(res, img, dt.date.today().isoformat(), fingerprint()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
