"""Cost of the per-record checks on the produce path: ``Log.append_as_leader`` of one client
batch (100 records of ~110 bytes, or 1 record) on a default topic, and on topics whose config
makes the log look at records -- cleanup.policy=compact (every record needs a key),
message.timestamp.after.max.ms (the header's max timestamp decides: no record looked at while
it is in range) and message.timestamp.before.max.ms (the header has no minimum timestamp, so
the record varints are scanned) -- plus the refusal of a batch with one bad record (decoded to
name it, KIP-467). Each number is the best of several trials of a few thousand appends, so a
busy shared machine inflates it the least; the ratio is to the default topic with the same
batch.

    python -m tests.bench.bench_record_validation [--trials 7] [--appends 3000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.errors import RecordValidationError
from storage.log import Log

NOW = 1_700_000_000_000

# name, config overrides, records per batch, codec (0 none, 3 lz4), a keyless record
WORKLOADS: list[tuple[str, dict[str, Any], int, int, bool]] = [
    ("default", {}, 100, 0, False),
    ("cleanup.policy=compact", {"cleanup_policy": ("compact",)}, 100, 0, False),
    ("message.timestamp.after.max.ms=1h", {"message_timestamp_after_max_ms": 3_600_000}, 100, 0, False),
    ("message.timestamp.before.max.ms=1d", {"message_timestamp_before_max_ms": 86_400_000}, 100, 0, False),
    ("compact: one record without key (refused)", {"cleanup_policy": ("compact",)}, 100, 0, True),
    ("default", {}, 100, 3, False),
    ("cleanup.policy=compact", {"cleanup_policy": ("compact",)}, 100, 3, False),
    ("message.timestamp.before.max.ms=1d", {"message_timestamp_before_max_ms": 86_400_000}, 100, 3, False),
    ("default", {}, 1, 0, False),
    ("cleanup.policy=compact", {"cleanup_policy": ("compact",)}, 1, 0, False),
]


def batch(n: int, codec: int, keyless: bool) -> bytes:
    recs = [Record(0, i, i, None if keyless and i == n // 2 else b"key-%d" % i, (b"%d|" % i).ljust(100, b"x"))
            for i in range(n)]
    return build_batch(recs, base_timestamp=NOW - 10, compression=codec)


def best_append_us(cfg: dict[str, Any], src: bytes, appends: int, trials: int, refused: bool) -> float:
    best = float("inf")
    for _ in range(trials):
        d = tempfile.mkdtemp(prefix="odradek-bench-")
        try:
            log = Log.open(os.path.join(d, "t-0"), LogConfig().overrides(segment_bytes=1 << 30, **cfg),
                           now=lambda: NOW)
            bufs = [bytearray(src) for _ in range(appends)]
            append = log.append_as_leader
            t0 = time.perf_counter()
            for b in bufs:
                try:
                    append(b, 0, NOW)
                except RecordValidationError:
                    if not refused:
                        raise
            dt = time.perf_counter() - t0
            log.close()
        finally:
            shutil.rmtree(d)
        best = min(best, dt / appends * 1e6)
    return best


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--appends", type=int, default=3000, help="appends of a 100-record batch per trial")
    args = parser.parse_args(argv)
    out(f"Log.append_as_leader of one client batch, best of {args.trials} trials")
    out("")
    out("| topic | batch | µs per append | vs default |")
    out("|---|---|---:|---:|")
    default: dict[tuple[int, int], float] = {}
    for name, cfg, n, codec, keyless in WORKLOADS:
        src = batch(n, codec, keyless)
        appends = args.appends * (10 if n == 1 else 1)
        us = best_append_us(cfg, src, appends, args.trials, keyless)
        default.setdefault((n, codec), us)
        what = f"{n} record{'s' if n > 1 else ''}{', lz4' if codec else ''} ({len(src):,} B)"
        out(f"| {name} | {what} | {us:.1f} | {us / default[n, codec]:.2f} |")


if __name__ == "__main__":
    main()
