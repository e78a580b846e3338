"""Shared helpers for the storage tests: batch builders, a settable clock, log walkers."""

from __future__ import annotations

import os
from pathlib import Path

from protocol.records import HEADER_STRUCT, Record, build_batch, iter_batches, read_header
from storage.log import Log

T0 = 1_600_000_000_000  # a fixed epoch for record timestamps


class Clock:
    """A settable millisecond clock to inject as ``now``."""

    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int) -> int:
        self.ms += ms
        return self.ms


def client_batch(
    n: int = 1,
    *,
    base_timestamp: int = T0,
    value_size: int = 10,
    ts_step: int = 1,
    key: bytes | None = None,
    compression: int = 0,
) -> bytearray:
    """A client batch (base offset 0) of ``n`` records, record i with timestamp
    base_timestamp + i * ts_step and a value of ``value_size`` bytes naming i."""
    recs = []
    for i in range(n):
        v = (b"%d|" % i).ljust(value_size, b"x")
        recs.append(Record(0, i * ts_step, i, key, v))
    return bytearray(build_batch(recs, base_timestamp=base_timestamp, compression=compression))


def offset_batch(base_offset: int, n: int, *, base_timestamp: int | None = None, value_size: int = 10) -> bytes:
    """A replicated batch at ``base_offset`` whose record values and timestamps are derived
    from the absolute offsets (value "<offset>|xxx", timestamp T0 + offset)."""
    ts = T0 + base_offset if base_timestamp is None else base_timestamp
    recs = [
        Record(0, i, i, None, (b"%d|" % (base_offset + i)).ljust(value_size, b"x"))
        for i in range(n)
    ]
    return build_batch(recs, base_offset=base_offset, base_timestamp=ts)


def log_bytes(log: Log) -> bytes:
    """Every byte of every live segment's .log file, in order."""
    return b"".join(Path(s.log_path).read_bytes()[: s.size] for s in log.segments)


def headers_of(data: bytes) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of each batch in ``data``."""
    out = []
    for pos, _size in iter_batches(data):
        h = read_header(data, pos)
        out.append((pos, h.base_offset, h.last_offset))
    return out


def segment_names(directory: Path, suffix: str = ".log") -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def read_all(log: Log, fetch: int = 1 << 20) -> bytes:
    """Everything from the log start to the end through Log.read (whole batches; reads
    continue at batch boundaries, so each starts with a whole batch)."""
    out = bytearray()
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, fetch, end, True).records.read()
        assert data, f"no data at offset {offset}"
        consumed = 0
        for pos, size in iter_batches(data):
            h = HEADER_STRUCT.unpack_from(data, pos)
            offset = h[0] + h[6] + 1
            consumed = pos + size
        assert consumed, "a read returned no whole batch"
        out += data[:consumed]
    return bytes(out)


def file_size(path: str | os.PathLike[str]) -> int:
    return os.stat(path).st_size
