"""Log compaction: how fast a real broker's log cleaner cleans a 1 GiB dirty log, beside the
machine's sequential read + write limit on the same filesystem, and what a cleaning does to the
produce latency of the broker's other clients.

The dirty log: keyed records with ~100-byte JSON-like values in batches of 100, keys drawn
uniformly from records / 10 keys (so ~10 % of the records are the latest of their key), written
uncompressed to ~1 GiB (x ODRADEK_BENCH_SCALE), and the same records again as lz4 batches (fewer
bytes on disk). The partition directories are written in this process with ``storage.log.Log``
(producing 1 GiB through the broker would take minutes and measure the producer) into the data
dir of an ``odradek serve`` that created the topics, stopped, and then started again to serve
them: with ``min.compaction.lag.ms`` at ten years nothing is cleanable, so the broker sits idle
until this bench switches the cleaning on (IncrementalAlterConfigs: lag 0, dirty ratio 0.01).

Per log, in this order:

  1. disk limit: read every segment file of the dirty log in 1 MiB preads (page cache hot, as the
     cleaner finds them), then write as many bytes to a new file in the same directory and fsync
     (tests/bench/limits.py); "read + write" is the bytes over the sum of both times. The cleaner
     reads the dirty section twice (offset map, then filtering) and writes the kept part: the
     time that I/O alone takes at these rates is shown too (its floor).
  2. (a) idle: produce requests against a non-compacted topic of the same broker at a fixed rate,
     one at a time on one connection (raw Kafka requests, Produce v9, one 100-byte record each),
     alternating acks=1 and acks=all; latency is send to decoded response.
  3. (b) cleaning: the same producer from the moment the cleaning is switched on until the
     cleaner's log line ``Log cleaner thread N cleaned log <tp> (dirty section = [a, b]): ...``
     says the whole dirty section is clean (several lines when the offset map holds fewer keys
     than the log has). The cleaning time is the line's own duration (the worker's clock),
     "wall" is from the config change to the line (the cleaner's backoff and the swaps
     included). The broker's and the cleaner worker process's CPU (tests/bench/peers.py's
     ``cpu_seconds``) are read around (a) and (b).

A small log is cleaned first, so that the worker process (started by the first cleaning) is
running and the latency topic is warm before anything is measured.

MB is 10^6 bytes here (the broker's line prints MiB; converted). The kept record count is checked
against the number of distinct keys written: a cleaner that keeps the wrong records fails the run.

    python -m tests.bench.bench_cleaner [--mib 1024] [--scale 1.0] [--rate 200]
                                        [--idle-seconds 10] [--codecs none,lz4] [--dir PATH]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.perf_stats import LatencyRecorder, LatencyStats
from protocol.messages import CreateTopicsRequest, IncrementalAlterConfigsRequest, ProduceRequest
from protocol.messages import create_topics_request as ct
from protocol.messages import incremental_alter_configs_request as iac
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log
from storage.segment import log_file
from tests.bench.limits import CHUNK, disk_write_mb_s
from tests.bench.peers import cpu_seconds
from tests.bench.systems import pace
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection

MB = 1e6
MIB = 1 << 20
CODECS = {"none": 0, "lz4": 3}
RECORDS_PER_BATCH = 100
LIVE_FRACTION = 0.1
WARMUP_RECORDS = 2000
VALUE_POOL = 4096  # distinct values, used in turn: batches compress like real ones
NEVER_MS = 10 * 365 * 86_400_000  # min.compaction.lag.ms that keeps a log from being cleaned
LATENCY_TOPIC = "latency"
OVERRIDES = ["num.partitions=1", "auto.create.topics.enable=false", "log.cleaner.backoff.ms=100"]
TOPIC_RESOURCE = 2
CLEANED = re.compile(
    r"cleaned log (?P<tp>\S+) \(dirty section = \[(?P<start>\d+), (?P<end>\d+)\]\): (?P<segments>\d+) "
    r"segments in (?P<groups>\d+) groups, (?P<mib_in>[\d.]+) MB -> (?P<mib_out>[\d.]+) MB .*?"
    r"(?P<read>\d+) -> (?P<written>\d+) messages\), .*?(?P<seconds>[\d.]+) s \((?P<mib_read>[\d.]+) MB "
    r"of log read, [\d.]+ MB/s; offset map (?P<map>[\d.]+)% full\)"
)
WORKER = re.compile(r"Started log cleaner worker process (\d+)")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the dirty log


def value_pool(rng: random.Random) -> list[bytes]:
    """100-byte JSON-like values: field names repeat, numbers differ (lz4 gets ~2x on them)."""
    pool = []
    for _ in range(VALUE_POOL):
        v = b'{"id":%08d,"ts":%13d,"amount":%7d,"status":"settled","ref":"%016x"' % (
            rng.randrange(10**8), 1_700_000_000_000 + rng.randrange(10**9), rng.randrange(10**7),
            rng.getrandbits(64))
        pool.append(v.ljust(99, b" ") + b"}")
    return pool


@dataclass
class DirtyLog:
    topic: str
    codec: str
    records: int
    distinct_keys: int
    segment_files: list[Path] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(p.stat().st_size for p in self.segment_files)


def records_for(target_bytes: int, seed: int) -> int:
    """How many records make ``target_bytes`` of uncompressed batches (whole batches)."""
    rng = random.Random(seed)
    pool = value_pool(rng)
    one = build_batch([Record(0, j, j, b"key-%08d" % j, pool[j]) for j in range(RECORDS_PER_BATCH)])
    return max(1, target_bytes // len(one)) * RECORDS_PER_BATCH


def write_dirty_log(directory: Path, topic: str, codec: str, records: int, segment_bytes: int,
                    seed: int) -> DirtyLog:
    """Append ``records`` keyed records to the partition directory and roll, so every segment
    but an empty active one is cleanable; the same seed writes the same records in any codec."""
    rng = random.Random(seed)
    pool = value_pool(rng)
    keys = max(1, int(records * LIVE_FRACTION))
    seen = bytearray(keys)
    # the broker has the topic's real config; appending here only needs the segment size (a
    # compacted config would make every append scan its records for keys)
    lg = Log.open(directory, LogConfig(segment_bytes=segment_bytes))
    try:
        compression = CODECS[codec]
        i = 0
        while i < records:
            batch = []
            for j in range(RECORDS_PER_BATCH):
                k = rng.randrange(keys)
                seen[k] = 1
                batch.append(Record(0, j, j, b"key-%08d" % k, pool[(i + j) % VALUE_POOL]))
            lg.append_as_leader(build_batch(batch, compression=compression), 0)
            i += RECORDS_PER_BATCH
        lg.roll()
        files = [log_file(directory, s.base_offset) for s in lg.segments[:-1]]
    finally:
        lg.close()
    return DirtyLog(topic, codec, i, keys - seen.count(0), files)


# ---------------------------------------------------------------------------- the disk


def read_seconds(paths: list[Path]) -> float:
    """Read every file sequentially in 1 MiB preads."""
    buf = bytearray(CHUNK)
    t = time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            pos = 0
            while n := os.preadv(fd, [buf], pos):
                pos += n
        finally:
            os.close(fd)
    return time.perf_counter() - t


def disk_limits(dl: DirtyLog, scratch: Path) -> dict[str, float]:
    """Read the dirty log's segment files, write as many bytes (fsync'd) to a file in
    ``scratch`` (the same filesystem, outside the broker's log dir); MB/s of each and of both."""
    nbytes = dl.bytes
    read_s = read_seconds(dl.segment_files)
    write_mb_s = disk_write_mb_s(scratch, nbytes)
    write_s = nbytes / MB / write_mb_s
    return {"read_mb_s": nbytes / MB / read_s, "write_mb_s": write_mb_s,
            "read_write_mb_s": nbytes / MB / (read_s + write_s)}


# ---------------------------------------------------------------------------- the broker


def create_topics(port: int, topics: dict[str, dict[str, str]]) -> None:
    with RawConnection(port) as c:
        resp = c.call(19, 7, CreateTopicsRequest(timeout_ms=30_000, topics=[ct.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1,
            configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
            for name, configs in topics.items()]))
    bad = [t for t in resp.topics if t.error_code != 0]
    if bad:
        raise RuntimeError(f"CreateTopics failed: {bad}")


def set_topic_configs(port: int, topic: str, configs: dict[str, str]) -> None:
    with RawConnection(port) as c:
        resp = c.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=topic,
            configs=[iac.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])]))
    if resp.responses[0].error_code != 0:
        raise RuntimeError(f"IncrementalAlterConfigs failed: {resp.responses[0]}")


@dataclass
class Window:
    """Produce latencies per acks setting over one phase, and the CPU spent meanwhile."""

    latency: dict[str, LatencyStats]
    seconds: float
    broker_cpu_s: float
    worker_cpu_s: float | None = None


def produce_paced(port: int, rate: float, done: Callable[[], bool], max_s: float) -> dict[str, LatencyStats]:
    """One 100-byte record per Produce request, one request at a time at ``rate`` requests/s,
    acks=1 and acks=all in turn, until ``done()`` (checked before each request) or ``max_s``."""
    recorders = {"1": LatencyRecorder(), "all": LatencyRecorder()}
    value = b"x" * 100
    with RawConnection(port, client_id="bench-latency") as c:
        start = time.perf_counter()
        i = 0
        while not done() and time.perf_counter() - start < max_s:
            acks = "1" if i % 2 == 0 else "all"
            req = ProduceRequest(acks=1 if acks == "1" else -1, timeout_ms=30_000, topic_data=[
                pr.TopicProduceData(name=LATENCY_TOPIC, partition_data=[
                    pr.PartitionProduceData(index=0, records=build_batch([Record(value=value)]))])])
            pace(start, i, rate)
            t = time.perf_counter()
            resp = c.call(0, 9, req)
            recorders[acks].record((time.perf_counter() - t) * 1e3)
            err = resp.responses[0].partition_responses[0].error_code
            if err:
                raise RuntimeError(f"produce failed with error {err}")
            i += 1
    return {acks: r.stats() for acks, r in recorders.items()}


def worker_pid(broker: BrokerProcess) -> int | None:
    pids = [int(m.group(1)) for line in broker.lines if (m := WORKER.search(line))]
    return pids[-1] if pids else None


def process_cpu(pid: int | None) -> float:
    try:
        return cpu_seconds(pid) if pid is not None else 0.0
    except OSError:
        return 0.0


def idle_window(broker: BrokerProcess, rate: float, seconds: float) -> Window:
    pid = broker.proc.pid if broker.proc else 0
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    lat = produce_paced(broker.port, rate, lambda: False, seconds)
    return Window(lat, time.perf_counter() - t0, cpu_seconds(pid) - cpu0)


def clean_window(broker: BrokerProcess, dl: DirtyLog, end_offset: int, rate: float,
                 timeout_s: float) -> tuple[Window, list[dict[str, Any]], float]:
    """Switch the cleaning of ``dl`` on and produce until its lines cover [0, end_offset);
    returns the window, the parsed lines and the wall time from the switch to the last line."""
    tp = f"{dl.topic}-0"
    pid = broker.proc.pid if broker.proc else 0
    lines: list[dict[str, Any]] = []
    finished = threading.Event()
    failure: list[BaseException] = []
    wall: list[float] = []

    def wait_lines(after: int) -> None:
        try:
            while True:
                line = broker.wait_for_line(f"cleaned log {tp} ", timeout=timeout_s, after=after)
                wall.append(time.perf_counter())
                after = broker.lines.index(line, after) + 1
                m = CLEANED.search(line)
                if m is None:
                    raise RuntimeError(f"unexpected cleaner line: {line}")
                lines.append({k: float(v) if "." in v else (v if k == "tp" else int(v))
                              for k, v in m.groupdict().items()})
                if lines[-1]["end"] >= end_offset:
                    return
        except BaseException as e:
            failure.append(e)
        finally:
            finished.set()

    wpid = worker_pid(broker)
    cpu0, wcpu0 = cpu_seconds(pid), process_cpu(wpid)
    mark = len(broker.lines)
    t0 = time.perf_counter()  # before the request: the cleaner may start before its answer
    set_topic_configs(broker.port, dl.topic, {"min.compaction.lag.ms": "0", "min.cleanable.dirty.ratio": "0.01"})
    waiter = threading.Thread(target=wait_lines, args=(mark,), daemon=True)
    waiter.start()
    lat = produce_paced(broker.port, rate, finished.is_set, timeout_s)
    waiter.join(timeout_s)
    seconds = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    if wpid != (now := worker_pid(broker)):
        wpid, wcpu0 = now, 0.0  # (re)started for this cleaning: all of its CPU is the cleaning's
    wcpu = process_cpu(wpid) - wcpu0
    if failure:
        raise failure[0]
    if not lines or lines[-1]["end"] < end_offset:
        raise TimeoutError(f"{tp} not cleaned through {end_offset} within {timeout_s:.0f} s")
    return Window(lat, seconds, cpu, wcpu), lines, wall[-1] - t0


# ---------------------------------------------------------------------------- the run


def run(total_bytes: int, codecs: list[str], rate: float, idle_s: float, base: Path) -> list[dict[str, Any]]:
    data = base / "data"
    seed = 13
    records = records_for(total_bytes, seed)
    segment_bytes = max(MIB, total_bytes // 8)
    topics = {"warmup": "none", **{f"dirty-{codec}": codec for codec in codecs}}
    compacted = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                 "min.compaction.lag.ms": str(NEVER_MS)}
    broker = BrokerProcess(data, overrides=OVERRIDES)
    broker.start()
    try:
        create_topics(broker.port, {**{t: compacted for t in topics}, LATENCY_TOPIC: {}})
    finally:
        broker.stop()
    logs = []
    for topic, codec in topics.items():
        t = time.perf_counter()
        n = WARMUP_RECORDS if topic == "warmup" else records
        logs.append(write_dirty_log(data / f"{topic}-0", topic, codec, n, segment_bytes, seed))
        log(f"  wrote {topic}: {n:,} records, {logs[-1].bytes / MB:,.0f} MB in "
            f"{time.perf_counter() - t:.0f} s")
    rows = []
    broker = BrokerProcess(data, overrides=OVERRIDES)
    broker.start(timeout=300)
    try:
        # the cleaner's worker process starts with the first cleaning, the latency topic's path
        # is cold: clean a small log first so that neither is part of a measurement
        warm = logs.pop(0)
        clean_window(broker, warm, warm.records, rate, 120)
        for dl in logs:
            nbytes = dl.bytes
            log(f"  {dl.topic}: disk limits")
            lim = disk_limits(dl, base)
            log(f"  {dl.topic}: produce latency, idle ({idle_s:.0f} s)")
            idle = idle_window(broker, rate, idle_s)
            log(f"  {dl.topic}: cleaning {nbytes / MB:,.0f} MB with producer running")
            busy, lines, wall_s = clean_window(broker, dl, dl.records, rate, 120 + nbytes / MB)
            kept = int(lines[-1]["written"])  # a later pass rewrites the whole log: its count
            if kept != dl.distinct_keys:
                raise AssertionError(f"{dl.topic}: the cleaner kept {kept} records of "
                                     f"{dl.distinct_keys} distinct keys")
            rows.append({"codec": dl.codec, "bytes": nbytes, "records": dl.records,
                         "distinct_keys": dl.distinct_keys, "lines": lines, "wall_s": wall_s,
                         "limits": lim, "idle": idle, "cleaning": busy, "kept": kept})
    finally:
        broker.stop()
    return rows


# ---------------------------------------------------------------------------- report


def report(rows: list[dict[str, Any]], total_bytes: int, rate: float, base: Path) -> list[str]:
    out = [f"A {total_bytes / MIB:,.0f} MiB dirty log (keyed records, ~100-byte values, "
           f"{LIVE_FRACTION:.0%} live keys; the same records as lz4 batches) cleaned by "
           f"`odradek serve`'s log cleaner while a producer writes {rate:g} requests/s to another "
           f"topic; disk limits measured on the same files in the same run (dir {base}).", "",
           "### Cleaner throughput", "",
           "| log | dirty MB | records -> kept | after MB | passes | cleaner s | cleaner MB/s | "
           "records/s | wall s | disk read + write MB/s | cleaner / disk | I/O-bound ceiling MB/s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines, lim = r["lines"], r["limits"]
        secs = sum(ln["seconds"] for ln in lines)
        mb = r["bytes"] / MB
        after = lines[-1]["mib_out"] * MIB / MB
        io_s = 2 * mb / lim["read_mb_s"] + after / lim["write_mb_s"]
        out.append(f"| {r['codec']} | {mb:,.1f} | {r['records']:,} -> {r['kept']:,} | {after:,.1f} | "
                   f"{len(lines)} | {secs:.2f} | {mb / secs:,.1f} | {r['records'] / secs:,.0f} | "
                   f"{r['wall_s']:.2f} | {lim['read_write_mb_s']:,.0f} | "
                   f"{mb / secs / lim['read_write_mb_s']:.3f} | {mb / io_s:,.0f} |")
    out += ["", "### Disk and CPU", "",
            "| log | sequential read MB/s | write + fsync MB/s | offset map full % | worker CPU s | "
            "worker CPU % | broker CPU % idle | broker CPU % cleaning |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lim, busy, idle = r["limits"], r["cleaning"], r["idle"]
        out.append(f"| {r['codec']} | {lim['read_mb_s']:,.0f} | {lim['write_mb_s']:,.0f} | "
                   f"{max(ln['map'] for ln in r['lines']):.1f} | {busy.worker_cpu_s:.2f} | "
                   f"{100 * busy.worker_cpu_s / busy.seconds:.0f} | "
                   f"{100 * idle.broker_cpu_s / idle.seconds:.1f} | "
                   f"{100 * busy.broker_cpu_s / busy.seconds:.1f} |")
    out += ["", "### Produce latency of another topic, idle and while cleaning", "",
            "| log cleaned | phase | acks | requests | p50 ms | p99 ms | p99.9 ms | max ms |",
            "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        for phase, w in (("idle", r["idle"]), ("cleaning", r["cleaning"])):
            for acks, st in w.latency.items():
                out.append(f"| {r['codec']} | {phase} | {acks} | {st.count:,} | {st.p50:.2f} | "
                           f"{st.p99:.2f} | {st.p999:.2f} | {st.max_ms:.2f} |")
    out += ["", "cleaner s: the durations in the cleaner's own log lines (several passes when the "
            "offset map holds fewer keys than the log has); cleaner MB/s: dirty bytes on disk "
            "over that time; wall: from the config change that makes the log cleanable to the "
            "last line (the cleaner's backoff of up to 100 ms and the swaps included). "
            "disk read + write: the same bytes read back (page cache hot, as the cleaner finds "
            "them) and written to a new file with fsync, one after the other. I/O-bound "
            "ceiling: dirty MB over the time that reading the log twice (offset map, then "
            "filtering) and writing what is kept take at those rates. Latency: one request at a "
            "time, one 100-byte record each, acks=1 and acks=all in turn, from send to decoded "
            "response in this client. CPU from /proc (tests/bench/peers.py) over each phase, "
            "as a percentage of one core: the worker is the cleaner's worker process. A small "
            "log is cleaned first, so that the worker process is running and the latency topic "
            "warm before anything is measured."]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=1024, help="dirty log size at scale 1, MiB")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)),
                    help="multiplies the log size and the idle phase (0.01 = ~10 MB)")
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--rate", type=float, default=200.0, help="produce requests/s")
    ap.add_argument("--idle-seconds", type=float, default=10.0, help="idle phase at scale 1")
    ap.add_argument("--dir", type=Path, default=None, help="directory on the disk to test")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C: the broker is stopped and the temp dir removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    total = max(MIB, round(args.mib * MIB * args.scale))
    idle_s = max(1.0, args.idle_seconds * args.scale)
    codecs = [c for c in args.codecs.split(",") if c]
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-cleaner-", dir=args.dir))
    try:
        rows = run(total, codecs, args.rate, idle_s, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("\n".join(report(rows, total, args.rate, base.parent)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
