"""The peer benchmark harness works end to end at a tiny size: Odradek, redis-server and
nats-server started, every workload measured, tables with ratios, plots and raw JSON written
to a temp dir (never docs/). No timing assertions: this proves the harness, not the numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.results import MachineMismatch, fingerprint, load_comparable, save
from tests.broker_process import REPO

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def bench(*args: str, timeout: float = 180, only: str = "peers") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.bench", "--only", only, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)


def previous_run(path: Path, rps: float) -> None:
    """Raw results of an earlier run on this machine holding one Odradek produce row."""
    save(path, {"rows": [{"kind": "produce", "size": 100, "partitions": 1, "acks": "1",
                          "system": "Odradek", "records": 1000, "bytes": 100_000,
                          "seconds": 1000 / rps, "window_s": 1.0, "broker_cpu_s": 0.0,
                          "client_cpu_s": 0.0}]})


def md_table(md: str, heading: str) -> list[dict[str, str]]:
    """The rows of the table right under `heading`, each as {column header: cell}."""
    block = md.split(heading + "\n", 1)[1].lstrip("\n").split("\n\n", 1)[0].splitlines()

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    head = cells(block[0])
    return [dict(zip(head, cells(line), strict=True)) for line in block[2:]]


def assert_cpu_shown(us_cell: str, ms_cell: str, cpu_s: float, records: int,
                     nbytes: int) -> None:
    """The markdown's per-record (µs) and per-MB (ms) broker CPU cells for one workload: both
    positive, both the raw figure's, and consistent with each other: per MB = per record x
    records / MB, within the rounding of the two-decimal per-record cell."""
    us, ms = float(us_cell), float(ms_cell)
    assert us > 0 and ms > 0, (us_cell, ms_cell)
    assert us == pytest.approx(cpu_s / records * 1e6, abs=0.005)
    assert ms == pytest.approx(cpu_s / (nbytes / 1e6) * 1e3, abs=0.005)
    scale = records / (nbytes / 1e6) / 1e3  # µs/record -> ms/MB
    assert ms == pytest.approx(us * scale, abs=0.005 + 0.005 * scale)


def test_tiny_run_writes_tables_plots_and_raw_results(tmp_path: Path) -> None:
    out = tmp_path / "site" / "benchmarks.md"
    out.parent.mkdir()
    old = tmp_path / "previous.json"
    previous_run(old, rps=1.0)
    r = bench("--scale", "0.005", "--out", str(out), "--compare", str(old))
    assert r.returncode == 0, r.stderr[-3000:]
    md = out.read_text()
    assert "failed:" not in md
    assert "## Side by side: Redis Streams, NATS JetStream" in md
    for heading in ("### Ratio summary", "### Throughput (records/s)",
                    "### Broker CPU per record (µs) and per MB (ms)",
                    "### End-to-end latency", "### Physical limits", "### Raw figures"):
        assert heading in md, heading
    for ratio in ("| Redis, all workloads |", "| NATS, all workloads |",
                  "| sequential disk write, best produce |", "| loopback TCP, best produce |",
                  "Odradek / Redis", "Odradek / NATS", "Odradek / disk", "Odradek / loopback"):
        assert ratio in md, ratio

    raw = [line for line in md.splitlines()
           if line.startswith(("| produce", "| consume")) and "| Odradek |" in line]
    # 8 produce + 4 consume + 8 produce+consume workloads in the raw table, Odradek's rows
    assert len(raw) == 20
    for kind, count in (("produce", 8), ("consume", 4), ("produce+consume", 8)):
        assert sum(line.startswith(f"| {kind} |") for line in raw) == count
    e2e = [line for line in md.splitlines() if line.startswith(("| 1,000 |", "| 10,000 |"))]
    assert {line.split("|")[2].strip() for line in e2e} == {"Odradek", "Redis", "NATS"}
    assert len(e2e) == 6

    # the comparison with the earlier run (1 record/s then) is there, as a now/then ratio
    section = md.split("(same machine)", 1)[1].split("\n\n")[1].splitlines()
    assert section[0].startswith("| workload | record | partitions | acks | Odradek now / then |")
    assert len(section) == 3  # header, rule, the one workload both runs have
    cells = [c.strip() for c in section[2].strip("|").split("|")]
    assert cells[:4] == ["produce", "100 B", "1", "1"]
    assert float(cells[4].rstrip("x")) > 1 and cells[5:] == ["n/a", "n/a"]

    for name in ("peers-throughput.png", "peers-cpu.png", "peers-e2e-latency.png"):
        png = out.parent / "img" / name
        data = png.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 1000, name
        assert f"](img/{name})" in md

    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["fingerprint"] == fingerprint()
    # the page can be re-rendered from the raw results alone, measuring nothing
    again = subprocess.run([sys.executable, "-m", "tests.bench.bench_peers", "--render",
                            str(out.with_suffix(".json")), "--out", str(tmp_path / "again.md")],
                           cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split("### Ratio summary")[1] == md.split("### Ratio summary")[1].split(
        "### Against the run")[0].rstrip("\n") + "\n"
    assert (tmp_path / "img" / "peers-throughput.png").exists()
    rows = doc["results"]["rows"]
    assert len(rows) == 60  # 20 workloads x 3 systems
    assert {row["system"] for row in rows} == {"Odradek", "Redis", "NATS"}
    assert all(row["records"] == 1000 and row["seconds"] > 0 for row in rows)
    assert all(e["received"] == e["sent"] for e in doc["results"]["e2e"])

    # the broker's CPU time: measured (positive) for every workload and system, and shown per
    # record and per MB consistently with the raw figures and with each other
    size_label = {100: "100 B", 1024: "1 KiB"}
    cpu = {(r["workload"], r["record"], r["partitions"], r["acks"]): r
           for r in md_table(md, "### Broker CPU per record (µs) and per MB (ms)")}
    assert len(cpu) == 20
    by_workload: dict[tuple[str, str, str, str], dict[str, dict]] = {}
    for row in rows:
        assert row["broker_cpu_s"] > 0, row
        key = (row["kind"], size_label[row["size"]], str(row["partitions"]), row["acks"])
        by_workload.setdefault(key, {})[row["system"]] = row
        shown = cpu[key]
        assert_cpu_shown(shown[f"{row['system']} µs/rec"], shown[f"{row['system']} ms/MB"],
                         row["broker_cpu_s"], row["records"], row["bytes"])
    for key, systems in by_workload.items():
        mine = systems["Odradek"]["broker_cpu_s"] / systems["Odradek"]["records"]
        for peer in ("Redis", "NATS"):
            theirs = systems[peer]["broker_cpu_s"] / systems[peer]["records"]
            assert float(cpu[key][f"Odradek / {peer}"].rstrip("x")) == pytest.approx(
                mine / theirs, abs=0.005), (key, peer)
    latency = {(r["rate/s"], r["system"]): r
               for r in md_table(md, "### End-to-end latency (1 partition, 100 B records)")}
    assert len(latency) == len(doc["results"]["e2e"]) == 6
    for e in doc["results"]["e2e"]:
        assert e["broker_cpu_s"] > 0, e
        shown = latency[(f"{e['rate']:,.0f}", e["system"])]
        assert_cpu_shown(shown["broker CPU µs/rec"], shown["broker CPU ms/MB"],
                         e["broker_cpu_s"], e["sent"], e["sent"] * 100)
    assert "/task/*/schedstat" in md and "CPU time comes from /proc in 10 ms ticks" not in md
    assert doc["results"]["limits"]["disk_write_mb_s"] > 0
    assert doc["results"]["limits"]["loopback_tcp_mb_s"] > 0


def test_refuses_to_compare_with_another_machine(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    previous_run(other, rps=1000.0)
    doc = json.loads(other.read_text())
    doc["fingerprint"]["cpu"] = "Some Other CPU @ 1.00GHz"
    other.write_text(json.dumps(doc))
    out = tmp_path / "benchmarks.md"
    r = bench("--compare", str(other), "--out", str(out), timeout=60)
    assert r.returncode == 2
    assert "refusing to compare" in r.stderr and "Some Other CPU" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()  # nothing measured, nothing written
    r = subprocess.run([sys.executable, "-m", "tests.bench.bench_peers", "--render", str(other),
                        "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 2 and "refusing to compare" in r.stderr
    assert not (tmp_path / "img").exists()


def test_comparable_only_with_the_same_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    save(path, {"rows": []})
    assert load_comparable(path)["results"] == {"rows": []}
    doc = json.loads(path.read_text())
    doc["fingerprint"]["cores"] += 1
    path.write_text(json.dumps(doc))
    with pytest.raises(MachineMismatch, match="cores"):
        load_comparable(path)
    path.write_text("{not json")
    with pytest.raises(MachineMismatch, match="cannot read"):
        load_comparable(path)


def test_servers_are_stopped_when_a_workload_fails(tmp_path: Path) -> None:
    from tests.bench.bench_peers import running

    class Boom(Exception):
        pass

    with pytest.raises(Boom), running(["odradek", "redis", "nats"], tmp_path) as systems:
        procs = [getattr(s, "broker" if s.name == "Odradek" else "server").proc for s in systems]
        assert all(p is not None and p.poll() is None for p in procs)
        raise Boom
    assert all(p is not None and p.poll() is not None for p in procs)


def test_kafka_side_by_side_tiny_run(tmp_path: Path) -> None:
    """`make bench`'s Apache Kafka 3.9 section at a tiny size: both brokers started and stopped,
    every workload measured through both clients (librdkafka and Kafka's Java perf tools),
    ratio tables that match the raw JSON, plots, and a page that re-renders from the JSON."""
    out = tmp_path / "site" / "benchmarks.md"
    out.parent.mkdir()
    r = subprocess.run([sys.executable, "-m", "tests.bench", "--only", "broker", "--scale", "0.002",
                        "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=400,
                       check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    md = out.read_text()
    assert "failed:" not in md
    assert "## Side by side with Apache Kafka 3.9" in md
    doc = json.loads((out.parent / "benchmarks-kafka.json").read_text())
    assert doc["fingerprint"] == fingerprint()
    res = doc["results"]

    # both brokers are gone once the run is over (stopped, not orphaned)
    assert set(res["servers"]) == {"Odradek", "Kafka"}
    for server in res["servers"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(server["pid"], 0)

    # 2 clients x (4 produce + 2 consume) workloads x 2 brokers, every record moved, both
    # brokers' CPU measured, the Java tools' CPU (a reaped child) counted as the client's
    rows = res["rows"]
    assert len(rows) == 24
    assert all(row["records"] == 1000 and row["seconds"] > 0 and row["broker_cpu_s"] > 0
               for row in rows)
    assert {(row["client"], row["broker"]) for row in rows} == {
        (c, b) for c in ("librdkafka", "java") for b in ("Odradek", "Kafka")}
    assert all(row["client_cpu_s"] > 0.1 for row in rows if row["client"] == "java")

    # the table's ratios are the raw figures' (median of the one trial)
    shown = md_table(md, "### Throughput and broker CPU per record (median of the trials)")
    assert len(shown) == 12
    raw = {(row["client"], row["kind"], str(row["partitions"]), row["acks"], row["broker"]): row
           for row in rows}
    label = {"librdkafka": "librdkafka", "Java tools": "java"}
    for cells in shown:
        key = (label[cells["client"]], cells["workload"], cells["partitions"], cells["acks"])
        o, k = raw[(*key, "Odradek")], raw[(*key, "Kafka")]
        rps_o, rps_k = o["records"] / o["seconds"], k["records"] / k["seconds"]
        assert float(cells["Odradek rec/s"].replace(",", "")) == pytest.approx(rps_o, abs=1)
        assert float(cells["Kafka rec/s"].replace(",", "")) == pytest.approx(rps_k, abs=1)
        assert float(cells["Odradek / Kafka"].rstrip("x")) == pytest.approx(
            rps_o / rps_k, rel=0.01, abs=0.005), cells
        cpu_o, cpu_k = (x["broker_cpu_s"] / x["records"] for x in (o, k))
        assert float(cells["Odradek / Kafka CPU"].rstrip("x")) == pytest.approx(
            cpu_o / cpu_k, rel=0.01, abs=0.005), cells
    summary = md_table(md, "### Ratio summary")
    assert [(s["client"], s["workload"]) for s in summary[:5]] == [
        ("librdkafka", "produce"), ("librdkafka", "consume"), ("Java tools", "produce"),
        ("Java tools", "consume"), ("both", "all")]
    assert {s["workload"] for s in summary[5:]} == {
        "e2e latency at 1,000/s: p50, p99", "e2e latency at 10,000/s: p50, p99"}

    # end-to-end latency at both rates on both brokers, nothing lost
    e2e = res["e2e"]
    assert {(e["system"], e["rate"]) for e in e2e} == {
        (b, r) for b in ("Odradek", "Kafka") for r in (1000.0, 10000.0)}
    assert all(e["received"] == e["sent"] >= 50 and e["p50_ms"] > 0 and e["broker_cpu_s"] > 0
               for e in e2e)
    assert len(md_table(md, "### End-to-end latency (librdkafka, 1 partition, 100 B records, "
                            "acks=1)")) == 4

    for name in ("kafka-ratios.png", "kafka-throughput.png", "kafka-cpu.png",
                 "kafka-e2e-latency.png"):
        data = (out.parent / "img" / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 1000, name
        assert f"](img/{name})" in md

    # the page re-renders from the raw results alone, measuring nothing
    again = subprocess.run([sys.executable, "-m", "tests.bench.bench_broker", "--render",
                            str(out.parent / "benchmarks-kafka.json"),
                            "--out", str(tmp_path / "again.md")],
                           cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == md.split("## Side by side with Apache Kafka 3.9", 1)[1].split(
        "\n", 1)[1].strip()


def test_cleaner_tiny_run(tmp_path: Path) -> None:
    """`make bench`'s log compaction section at ~2 MiB: a real broker's cleaner cleans an
    uncompressed and an lz4 log (the bench fails by itself unless exactly one record per key is
    kept), beside disk limits measured on the same files, with produce latencies idle and while
    cleaning and the worker's and broker's CPU in the tables."""
    out = tmp_path / "benchmarks.md"
    r = bench("--scale", "0.002", "--out", str(out), only="cleaner")
    assert r.returncode == 0, r.stderr[-3000:]
    md = out.read_text()
    assert "failed:" not in md
    assert "## Log compaction: cleaner throughput vs the disk" in md

    rows = {row["log"]: row for row in md_table(md, "### Cleaner throughput")}
    assert set(rows) == {"none", "lz4"}
    for row in rows.values():
        written, kept = (int(x.replace(",", "")) for x in row["records -> kept"].split(" -> "))
        assert 0.09 * written <= kept <= 0.1 * written, row  # ~10 % live keys, all found
        mb, secs, rate = float(row["dirty MB"]), float(row["cleaner s"]), float(row["cleaner MB/s"])
        assert mb > 1 and secs > 0 and rate > 0
        assert rate == pytest.approx(mb / secs, rel=0.1), row
        assert float(row["after MB"]) < mb / 5
        disk = float(row["disk read + write MB/s"].replace(",", ""))
        assert float(row["cleaner / disk"]) == pytest.approx(rate / disk, rel=0.1, abs=0.002), row
        assert float(row["wall s"]) >= secs
    assert float(rows["lz4"]["dirty MB"]) < float(rows["none"]["dirty MB"])  # same records

    cpu = {row["log"]: row for row in md_table(md, "### Disk and CPU")}
    assert set(cpu) == {"none", "lz4"}
    for row in cpu.values():
        assert float(row["worker CPU s"]) > 0 and float(row["broker CPU % cleaning"]) > 0, row

    latency = md_table(md, "### Produce latency of another topic, idle and while cleaning")
    assert {(x["log cleaned"], x["phase"], x["acks"]) for x in latency} == {
        (log, phase, acks) for log in ("none", "lz4") for phase in ("idle", "cleaning")
        for acks in ("1", "all")}
    for x in latency:
        assert int(x["requests"].replace(",", "")) > 0, x
        assert 0 < float(x["p50 ms"]) <= float(x["p99 ms"]) <= float(x["max ms"]), x


def test_tls_side_by_side_tiny_run(tmp_path: Path) -> None:
    """`make bench`'s TLS section at a tiny size: both brokers with an SSL and a SASL_SSL
    (SCRAM-SHA-256) listener, every workload over SSL, SASL_SSL and PLAINTEXT measured on each,
    the table and the ratios written."""
    out = tmp_path / "benchmarks.md"
    r = bench("--scale", "0.005", "--out", str(out), only="tls", timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    md = out.read_text()
    assert "failed:" not in md
    assert "## TLS and SASL side by side with Apache Kafka 3.9" in md
    rows = md_table(md, "### TLS and SASL throughput and broker CPU per record")
    assert {(row["workload"], row["system"]) for row in rows} == {
        (w, s) for w in ("produce", "consume") for s in ("Odradek", "Kafka")}
    for row in rows:
        for protocol in ("SSL", "SASL_SSL"):
            assert float(row[f"{protocol} records/s"].replace(",", "")) > 0, row
            assert float(row[f"{protocol} broker CPU µs/record"]) > 0, row
    for line in ("- SSL produce: throughput", "- SSL consume: throughput", "- SASL_SSL produce: throughput",
                 "- SASL_SSL consume: throughput"):
        assert line in md, line


def test_replication_hops_tiny_run(tmp_path: Path) -> None:
    """The in-process replication round (tests/bench/bench_replication_hops.py) runs its rounds in
    an incremental fetch session -- the bench itself checks that every record reached both
    followers and the high watermark -- and reports each hop."""
    out = tmp_path / "benchmarks.md"
    r = bench("--scale", "0.01", "--out", str(out), only="hops")
    assert r.returncode == 0, r.stderr[-3000:]
    md = out.read_text()
    assert "failed:" not in md
    rows = md_table(md, "## Replication round: CPU time per hop, in-process")
    assert len(rows) == 8
    assert all(float(row["median µs"]) > 0 for row in rows)
