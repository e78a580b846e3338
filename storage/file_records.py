"""File slices handed out by reads, the small result types of the log, and batch-header scanning.

A read from the log never copies records into Python objects: it returns a :class:`FileRecords`,
the byte range [position, position + size) of one segment's ``.log`` file (RecordBatch v2 bytes
exactly as on the wire). The broker turns it into bytes with :meth:`FileRecords.read` (one
``os.pread``) or hands :meth:`FileRecords.fileno` / ``position`` / ``size`` to
``loop.sendfile``/``os.sendfile``. :data:`EMPTY_RECORDS` stands for "nothing to return".

Invariants: a slice only covers bytes that were complete batches when it was made (the end may
cut the last batch short when a size limit says so, as Kafka's do); the file it reads stays open
until the segment is deleted, which happens ``file.delete.delay.ms`` after the segment left the
log, so a slice taken before a retention or truncation stays readable meanwhile. Reading a slice
of a segment that was since closed raises ``ValueError``.

Who may call: anyone holding a slice, on the event loop (reads are short blocking preads of data
normally in the page cache) or in an executor.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from protocol.records import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, MIN_BATCH_LENGTH

__all__ = [
    "EMPTY_RECORDS",
    "FetchDataInfo",
    "FileRecords",
    "LogFile",
    "LogOffsetMetadata",
    "LogOffsetPosition",
    "MemoryRecords",
    "TimestampAndOffset",
    "scan_headers",
]

_unpack_header = HEADER_STRUCT.unpack_from
_FIRST_CHUNK = 8 * 1024
_MAX_CHUNK = 256 * 1024


class LogFile:
    """The open ``.log`` file of a segment: its fd, current path and closed flag. Shared by the
    segment and every slice it hands out."""

    __slots__ = ("closed", "fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)

    def pread(self, size: int, position: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer only at end of file)."""
        if self.closed:
            raise ValueError(f"read from closed log file {self.path}")
        data = os.pread(self.fd, size, position)
        if len(data) == size or not data:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(self.fd, size - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)


class FileRecords:
    """Bytes [position, position + size) of a segment's ``.log`` file (see the module docstring)."""

    __slots__ = ("_data", "_file", "position", "size")

    def __init__(self, file: LogFile, position: int, size: int, data: bytes | None = None) -> None:
        self._file = file
        self.position = position
        self.size = size
        self._data = data  # the slice's bytes when the segment still held them (its last batch)

    def read(self) -> bytes:
        """The bytes of the slice (one pread, or none when the segment handed them over; shorter
        only if the file was truncated since)."""
        if self._data is not None:
            return self._data
        if self.size == 0:
            return b""
        return self._file.pread(self.size, self.position)

    def fileno(self) -> int:
        """The file descriptor, for sendfile (valid while the segment's files exist)."""
        if self._file.closed:
            raise ValueError(f"log file {self._file.path} is closed")
        return self._file.fd

    @property
    def path(self) -> Path:
        return self._file.path

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords({str(self._file.path)!r}, position={self.position}, size={self.size})"


class MemoryRecords:
    """Records held in memory, with the read interface of :class:`FileRecords`."""

    __slots__ = ("_data", "position", "size")

    def __init__(self, data: bytes = b"") -> None:
        self._data = data
        self.position = 0
        self.size = len(data)

    def read(self) -> bytes:
        return self._data

    def fileno(self) -> int:
        raise OSError("MemoryRecords have no file descriptor")

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"MemoryRecords(size={self.size})"


EMPTY_RECORDS = MemoryRecords(b"")


class LogOffsetMetadata(NamedTuple):
    """An offset and, when known, where it is: segment base offset and byte position."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == -1 and self.relative_position_in_segment == -1


class LogOffsetPosition(NamedTuple):
    """The batch found for an offset: its last offset, position and size in bytes."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """Result of a timestamp lookup; ``leader_epoch`` is -1 when the batch has none."""

    timestamp: int
    offset: int
    leader_epoch: int = -1


@dataclass(slots=True)
class FetchDataInfo:
    """What a read returns: where it started, the records (a file slice or EMPTY_RECORDS),
    whether the first batch was cut short by the size limit, and (READ_COMMITTED) the aborted
    transactions overlapping the range."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecords | MemoryRecords = EMPTY_RECORDS
    first_entry_incomplete: bool = False
    aborted_transactions: list[tuple[int, int]] | None = None


def scan_headers(
    file: LogFile, start: int, end: int, chunk: int = _FIRST_CHUNK
) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Yield (position, header tuple) for each complete batch in [start, end) of ``file``.

    The header tuple is ``HEADER_STRUCT.unpack`` of the batch (base offset, batch length,
    partition leader epoch, magic, crc, attributes, last offset delta, base timestamp, max
    timestamp, producer id, producer epoch, base sequence, record count). Reads ``chunk`` bytes
    first and four times more each time it runs out (up to 256 KiB), skipping batch bodies, so
    the usual lookup right after an index entry costs one small pread. Stops at the first
    incomplete batch or a length field below the minimum (data the log already validated never
    has one). Nothing is checked beyond that: callers scan validated data.
    """
    buf = b""
    buf_start = start
    pos = start
    unpack = _unpack_header
    while end - pos >= HEADER_SIZE:
        off = pos - buf_start
        if off < 0 or off + HEADER_SIZE > len(buf):
            if buf:
                chunk = min(chunk * 4, _MAX_CHUNK)
            buf = file.pread(min(chunk, end - pos), pos)
            buf_start = pos
            off = 0
            if len(buf) < HEADER_SIZE:
                return
        h = unpack(buf, off)
        length = h[1]
        if length < MIN_BATCH_LENGTH:
            return
        size = length + LOG_OVERHEAD
        if size > end - pos:
            return
        yield pos, h
        pos += size
