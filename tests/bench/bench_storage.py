"""Storage throughput: Log appends and reads against plain sequential write()/read() of the same
bytes to the same disk, measured side by side in one run.

Workloads: appends of 16 KiB and 1 MiB RecordBatch v2 batches (``Log.append_as_leader``: header
validation, CRC-32C, in-place offset assignment, pwrite, index maintenance), and reads of
everything back through ``Log.read`` (index lookup, header scan, file slice, one pread per
fetch of 1 MiB), each as a ratio to a loop of ``os.write`` / ``os.pread`` of the same buffers in
the same sizes; appends are also compared with write() plus crc32c (the check Kafka and we
must do on every batch), the ceiling for any validating append. Each number is the median of several alternating trials; each trial writes,
reads back and deletes its file before the other side runs, dirty pages are synced (untimed)
before every timed phase, and a warm-up pass first gets the page cache's memory touched, so
neither side pays first-touch costs the other does not.

    python -m tests.bench.bench_storage [--mib 256] [--trials 5] [--dir PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c

from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log

ZERO8 = bytes(8)


def make_batches(batch_size: int, copies: int) -> list[bytearray]:
    """``copies`` identical batches of about ``batch_size`` bytes (1 KiB records)."""
    value = os.urandom(1000)
    n = max(1, batch_size // 1024)
    batch = build_batch([Record(0, 0, i, None, value) for i in range(n)], base_timestamp=1)
    return [bytearray(batch) for _ in range(copies)]


def raw_write(path: Path, bufs: list[bytearray], count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        nb = len(bufs)
        write = os.write
        t = time.perf_counter()
        for i in range(count):
            b = bufs[i % nb]
            b[0:8] = ZERO8
            write(fd, b)
        return time.perf_counter() - t
    finally:
        os.close(fd)


def raw_write_crc(path: Path, bufs: list[bytearray], count: int) -> float:
    """The floor for any append that checks CRCs: write() plus crc32c of the same bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        nb = len(bufs)
        views = [memoryview(b)[21:] for b in bufs]
        write = os.write
        t = time.perf_counter()
        for i in range(count):
            b = bufs[i % nb]
            b[0:8] = ZERO8
            crc32c(views[i % nb])
            write(fd, b)
        return time.perf_counter() - t
    finally:
        os.close(fd)


def log_append(directory: Path, bufs: list[bytearray], count: int) -> tuple[float, Log]:
    log = Log.open(directory, LogConfig())
    nb = len(bufs)
    append = log.append_as_leader
    t = time.perf_counter()
    for i in range(count):
        b = bufs[i % nb]
        b[0:8] = ZERO8
        append(b, 0, 1)
    elapsed = time.perf_counter() - t
    log.update_high_watermark(log.log_end_offset)
    return elapsed, log


READ_PASSES = 4  # reads are fast: several passes per trial keep timings well above noise


def raw_read(path: Path, fetch: int, total: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        pread = os.pread
        t = time.perf_counter()
        for _ in range(READ_PASSES):
            pos = 0
            while pos < total:
                pos += len(pread(fd, fetch, pos))
        return (time.perf_counter() - t) / READ_PASSES
    finally:
        os.close(fd)


def log_read(log: Log, fetch: int, records_per_batch: int, batch_size: int) -> float:
    end = log.log_end_offset
    per_fetch = (fetch // batch_size) * records_per_batch
    read = log.read
    hw = log.high_watermark
    t = time.perf_counter()
    for _ in range(READ_PASSES):
        offset = 0
        while offset < end:
            info = read(offset, fetch, hw, True)
            data = info.records.read()
            if not data:
                raise AssertionError(f"empty read at offset {offset}")
            offset += per_fetch
    return (time.perf_counter() - t) / READ_PASSES


def median_rate(nbytes: int, times: list[float]) -> float:
    return nbytes / statistics.median(times) / 1e6


def run(mib: int, trials: int, base: Path) -> list[tuple[str, float, float | None, float]]:
    rows: list[tuple[str, float, float | None, float]] = []
    # Get the page cache's memory touched once (first touch is slow, notably in VMs), twice
    # what one trial keeps cached, so neither side of a comparison pays for it.
    warm = base / "warmup"
    raw_write(warm, make_batches(1 << 20, 4), 2 * mib)
    warm.unlink()
    for batch_size, label in ((16 * 1024, "16 KiB"), (1 << 20, "1 MiB")):
        bufs = make_batches(batch_size, 8)
        size = len(bufs[0])
        records_per_batch = max(1, batch_size // 1024)
        count = (mib << 20) // size
        total = count * size
        fetch = max(1 << 20, size) // size * size
        w_raw: list[float] = []
        w_crc: list[float] = []
        w_log: list[float] = []
        r_raw: list[float] = []
        r_log: list[float] = []
        for _ in range(trials):
            raw_path = base / "raw.bin"
            os.sync()
            w_raw.append(raw_write(raw_path, bufs, count))
            os.sync()
            r_raw.append(raw_read(raw_path, fetch, total))
            raw_path.unlink()
            os.sync()
            w_crc.append(raw_write_crc(raw_path, bufs, count))
            raw_path.unlink()
            os.sync()
            elapsed, log = log_append(base / "bench-0", bufs, count)
            w_log.append(elapsed)
            os.sync()
            try:
                r_log.append(log_read(log, fetch, records_per_batch, size))
            finally:
                log.delete()
        rows.append(
            (
                f"append {label} batches",
                median_rate(total, w_raw),
                median_rate(total, w_crc),
                median_rate(total, w_log),
            )
        )
        rows.append(
            (
                f"read {label} batches ({fetch >> 10} KiB fetches)",
                median_rate(total, r_raw),
                None,
                median_rate(total, r_log),
            )
        )
    return rows


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB written per trial")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to test")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    try:
        rows = run(args.mib, args.trials, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out(f"Storage throughput ({args.mib} MiB per trial, median of {args.trials}, dir {base.parent})")
    out("")
    out("| workload | raw write()/pread() MB/s | Log MB/s | ratio | raw + CRC-32C only |")
    out("|---|---:|---:|---:|---:|")
    for name, raw, crc, ours in rows:
        floor = f"{crc:,.0f} MB/s ({crc / raw:.2f})" if crc is not None else "n/a"
        out(f"| {name} | {raw:,.0f} | {ours:,.0f} | {ours / raw:.2f} | {floor} |")
    out("")
    out(
        "ratio = Log / raw. The last column is write() plus crc32c of the same bytes, the "
        "ceiling for an append that must check every batch's CRC."
    )


if __name__ == "__main__":
    main()
