"""OffsetIndex and TimeIndex: a segment's sparse, memory-mapped lookup tables, Kafka's format.

Files, next to the segment's ``.log`` (big-endian, fixed-size entries, no header, no checksum)::

    <base offset, 20 digits>.index      entries of  relativeOffset int32 | position int32
    <base offset, 20 digits>.timeindex  entries of  timestamp int64 | relativeOffset int32

``relativeOffset`` is ``offset - base offset`` of the segment, so it must fit in 0..2^31-1.
An offset-index entry (o, p) says the batch whose last offset is o starts at byte p of the
``.log`` (when several batches were appended at once, p is where the first of them starts), so
the first batch holding an offset >= o starts at or after p. A time-index entry (t, o) says t
is the largest timestamp in the segment up to offset o: any record with a timestamp > t comes
after the batch holding o.

Both files are preallocated to ``segment.index.bytes`` rounded down to a multiple of the entry
size, and memory-mapped; :meth:`trim_to_valid_size` shrinks the file to the used entries when the
segment stops being active or is closed (and :meth:`resize` grows it back when a segment becomes
active again). Reopening a file assumes it is valid and counts ``file size // entry size``
entries, as Kafka's ``AbstractIndex`` does: a preallocated file left by a crash therefore looks
full of zero entries, which is why the log recovers (rebuilds) the indexes of unflushed segments
rather than trusting them (STYLE #14).

Both files are sparse while active: a page gets its disk block when first written, and a write
through the map into a page the file system cannot give a block to (a full disk) is not an
error the code could catch but SIGBUS, which kills the broker. So an append never writes past
``_reserved``: the bytes up to it were given blocks ahead of time (storage.mapped_file
``reserve``, falling back to ``posix_fallocate``), ``RESERVE_CHUNK`` bytes at a time when the
write position reaches it -- one syscall per 2,048 offset entries (8 MiB of log at the default
index.interval.bytes), nothing on the other appends -- and a failure raises OSError there, before
anything is written, which the segment's all-or-nothing append turns into KAFKA_STORAGE_ERROR.
(Kafka's ``AbstractIndex`` maps the same sparse file with no reservation; the JVM turns the
SIGBUS into an InternalError.) Reserving lazily, from the first append, keeps the indexes of
idle partitions free of blocks.

Invariants (kept by every method): offsets strictly increase from entry to entry; positions in
the offset index increase; timestamps in the time index strictly increase; ``entries <=
max_entries``; the time index keeps its last slot free for the entry written on roll/close
(``is_full`` is ``entries >= max_entries - 1``).

Lookups use Kafka's binary search for the largest entry <= target, first within the "warm"
last 8 KiB of entries (the pages recent appends and in-sync readers touch) and only then the
cold part, so tail lookups fault in few pages.

Who may call: the owning LogSegment only, i.e. the task that owns the partition's Log (the
event loop). :meth:`flush` may run in an executor thread; the segment serialises it with
:meth:`close` and :meth:`resize`. No other locking.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from storage.mapped_file import FileMap, map_file
from storage.txn_index import CorruptIndexError

__all__ = [
    "CorruptIndexError",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
]

_INT32_MAX = 2147483647
NO_TIMESTAMP = -1
# bytes of an index given disk blocks at a time ahead of its appends (see the module docstring)
RESERVE_CHUNK = 16384


class OffsetPosition(NamedTuple):
    """An offset-index entry with the absolute offset."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time-index entry with the absolute offset."""

    timestamp: int
    offset: int


class IndexOffsetOverflowError(ValueError):
    """An offset that does not fit in the 4-byte relative offset of this index."""


class InvalidOffsetError(ValueError):
    """An append that would break the increasing-offset invariant (Kafka InvalidOffsetException)."""


class _MappedIndex:
    """Shared machinery of the two indexes: file, mmap, entry count, search.

    ``entries`` (entries in use) and ``max_entries`` (capacity of the file as sized now) are
    plain attributes for speed; only this class changes them. ``_reserved``: the bytes from 0
    up to it are known to have disk blocks (reserved since the file was mapped at its size)."""

    ENTRY_SIZE = 0

    __slots__ = (
        "_closed",
        "_length",
        "_map",
        "_mm",
        "_reserved",
        "_reserved_entries",
        "base_offset",
        "entries",
        "max_entries",
        "max_index_size",
        "path",
    )

    def __init__(self, path: str | os.PathLike[str], base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._map: FileMap | None = None  # owns the mapping (storage.mapped_file: no fd kept)
        self._mm: memoryview | None = None  # its bytes; dropped before the map is closed
        self._closed = False
        self._reserved = 0  # nothing known: a reopened file may be sparse too
        self._reserved_entries = 0  # whole entries below _reserved: the appends' one check
        es = self.ENTRY_SIZE
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(self.path, os.O_RDWR)
            created = False
        try:
            if created:
                if max_index_size < es:
                    raise ValueError(f"Invalid max index size: {max_index_size}")
                length = (max_index_size // es) * es
                os.ftruncate(fd, length)
                entries = 0
            else:
                # a pre-existing index: assume it is valid, with entries up to its rounded end
                length = os.fstat(fd).st_size
                entries = length // es
            self._length = length
            self.max_entries = length // es
            if length:
                self._map = map_file(fd, length)
                self._mm = self._map.view
        except BaseException:
            if created:
                self.path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        self.entries = entries

    # -- sizes ---------------------------------------------------------------------------------

    @property
    def length(self) -> int:
        """Current size of the file in bytes."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by entries."""
        return self.entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self.path})")
        return rel

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # -- file management -----------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file (and map) to ``new_size`` rounded down to whole entries; entries beyond
        it are dropped. Returns whether the size changed."""
        es = self.ENTRY_SIZE
        rounded = (max(0, new_size) // es) * es
        if rounded == self._length:
            return False
        self._unmap()
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, rounded)
            if rounded:
                self._map = map_file(fd, rounded)
                self._mm = self._map.view
        finally:
            os.close(fd)
        self._length = rounded
        if self._reserved > rounded:  # blocks past a shrink are gone
            self._reserved = rounded
            self._reserved_entries = rounded // es
        self.max_entries = rounded // es
        if self.entries > rounded // es:
            self.entries = rounded // es
        self._after_resize()
        return True

    def _after_resize(self) -> None:
        pass

    def _reserve(self, end: int) -> None:
        """Give disk blocks to the file up to byte ``end`` -- rounded up to RESERVE_CHUNK, at
        most the file's length -- before an append writes below ``end``; OSError when the file
        system cannot (see the module docstring). Called only when ``end > _reserved``."""
        start = self._reserved
        stop = min(self._length, -(-end // RESERVE_CHUNK) * RESERVE_CHUNK)
        mapped = self._map
        if mapped is None or stop <= start:
            return
        if not mapped.reserve(start, stop - start) and hasattr(os, "posix_fallocate"):
            fd = os.open(self.path, os.O_RDWR)  # only where madvise cannot do it (Linux < 5.14)
            try:
                os.posix_fallocate(fd, start, stop - start)
            finally:
                os.close(fd)
        self._reserved = stop
        self._reserved_entries = stop // self.ENTRY_SIZE

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries in use (on roll and close)."""
        self.resize(self.entries * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Remove every entry and grow the file back to ``max_index_size``."""
        self.truncate()
        self.resize(self.max_index_size)

    def truncate(self) -> None:
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, n: int) -> None:
        self.entries = n

    def flush(self) -> None:
        """Write dirty pages of the map to disk."""
        mapped = self._map
        if mapped is not None:
            mapped.flush()

    def close(self) -> None:
        """Trim to the used entries and unmap; idempotent."""
        if not self._closed:
            self.trim_to_valid_size()
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap without touching the file; idempotent."""
        self._closed = True
        self._unmap()

    def _unmap(self) -> None:
        self._mm = None
        mapped, self._map = self._map, None
        if mapped is not None:
            mapped.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        new = Path(path)
        try:
            os.replace(self.path, new)
        finally:
            self.path = new

    # -- search --------------------------------------------------------------------------------

    def _key(self, n: int) -> int:
        raise NotImplementedError

    def _largest_lower_bound_slot(self, target: int, get: Callable[[int], int]) -> int:
        """Slot of the largest entry whose key ``get(slot)`` is <= target; -1 if none.

        Kafka's warm/cold search: look in the last 8 KiB of entries first."""
        n = self.entries
        if n == 0:
            return -1
        warm = 8192 // self.ENTRY_SIZE
        first_hot = max(0, n - 1 - warm)
        if get(first_hot) < target:
            lo, hi = first_hot, n - 1
        else:
            if get(0) > target:
                return -1
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            k = get(mid)
            if k > target:
                hi = mid - 1
            elif k < target:
                lo = mid
            else:
                return mid
        return lo

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(path={str(self.path)!r}, base_offset={self.base_offset}, "
            f"entries={self.entries}, max_entries={self.max_entries})"
        )


_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_pack_offset_entry = _OFFSET_ENTRY.pack_into
_pack_time_entry = _TIME_ENTRY.pack_into
_unpack_i = struct.Struct(">i").unpack_from
_unpack_q = struct.Struct(">q").unpack_from


class OffsetIndex(_MappedIndex):
    """``.index``: relative offset int32 | position int32 per entry (see the module docstring)."""

    ENTRY_SIZE = 8
    __slots__ = ("_last_offset",)

    def __init__(self, path: str | os.PathLike[str], base_offset: int, max_index_size: int = -1) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._last_offset = self._read_last_offset()

    def _read_last_offset(self) -> int:
        n = self.entries
        if n == 0 or self._mm is None:
            return self.base_offset
        return self.base_offset + _unpack_i(self._mm, (n - 1) * 8)[0]

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self._last_offset

    def _rel(self, n: int) -> int:
        return _unpack_i(self._mm, n * 8)[0]  # type: ignore[arg-type]

    def entry(self, n: int) -> OffsetPosition:
        if n >= self.entries or n < 0:
            raise IndexError(
                f"Attempt to fetch the {n}th entry from index {self.path}, which has size "
                f"{self.entries}"
            )
        rel, pos = _OFFSET_ENTRY.unpack_from(self._mm, n * 8)  # type: ignore[arg-type]
        return OffsetPosition(self.base_offset + rel, pos)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base offset, 0)."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, self._rel)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offset must exceed the last entry's."""
        n = self.entries
        if n >= self.max_entries:
            raise ValueError(f"Attempt to append to a full index (size = {n}).")
        if n and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {n} no larger than the last "
                f"offset appended ({self._last_offset}) to {self.path}"
            )
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self.path})")
        if n >= self._reserved_entries:
            self._reserve(n * 8 + 8)
        _pack_offset_entry(self._mm, n * 8, rel, position)  # type: ignore[arg-type]
        self.entries = n + 1
        self._last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, self._rel)
        if slot < 0:
            new = 0
        elif self._rel(slot) == offset - self.base_offset:
            new = slot
        else:
            new = slot + 1
        self._truncate_to_entries(new)

    def _truncate_to_entries(self, n: int) -> None:
        self.entries = n
        self._last_offset = self._read_last_offset()

    def _after_resize(self) -> None:
        self._last_offset = self._read_last_offset()

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for an index that cannot be right."""
        if self.entries and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last "
                f"offset is {self._last_offset} which is less than the base offset "
                f"{self.base_offset}"
            )
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self._length} bytes which is neither "
                f"positive nor a multiple of {self.ENTRY_SIZE}"
            )


class TimeIndex(_MappedIndex):
    """``.timeindex``: timestamp int64 | relative offset int32 per entry (see the module
    docstring)."""

    ENTRY_SIZE = 12
    __slots__ = ("_last_off", "_last_ts")

    def __init__(self, path: str | os.PathLike[str], base_offset: int, max_index_size: int = -1) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._read_last_entry()

    def _read_last_entry(self) -> None:
        n = self.entries
        if n == 0 or self._mm is None:
            self._last_ts, self._last_off = NO_TIMESTAMP, self.base_offset
        else:
            ts, rel = _TIME_ENTRY.unpack_from(self._mm, (n - 1) * 12)
            self._last_ts, self._last_off = ts, self.base_offset + rel

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty."""
        return TimestampOffset(self._last_ts, self._last_off)

    def is_full(self) -> bool:
        # the last slot is kept for the entry appended on roll / close
        return self.entries >= self.max_entries - 1

    def _ts(self, n: int) -> int:
        return _unpack_q(self._mm, n * 12)[0]  # type: ignore[arg-type]

    def _rel(self, n: int) -> int:
        return _unpack_i(self._mm, n * 12 + 8)[0]  # type: ignore[arg-type]

    def entry(self, n: int) -> TimestampOffset:
        if n >= self.entries or n < 0:
            raise IndexError(
                f"Attempt to fetch the {n}th entry from time index {self.path} which has size "
                f"{self.entries}"
            )
        ts, rel = _TIME_ENTRY.unpack_from(self._mm, n * 12)  # type: ignore[arg-type]
        return TimestampOffset(ts, self.base_offset + rel)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, base offset)."""
        slot = self._largest_lower_bound_slot(target_timestamp, self._ts)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's.

        Raises for an offset below the last entry's or a timestamp below it (the caller passes
        the running maximum, so neither happens in a correct log)."""
        n = self.entries
        if not skip_full_check and n >= self.max_entries - 1:
            raise ValueError(f"Attempt to append to a full time index (size = {n}).")
        if n and offset < self._last_off:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {n} no larger than the last "
                f"offset appended ({self._last_off}) to {self.path}"
            )
        if n and timestamp < self._last_ts:
            raise ValueError(
                f"Attempt to append a timestamp ({timestamp}) to slot {n} no larger than the "
                f"last timestamp appended ({self._last_ts}) to {self.path}"
            )
        if timestamp > self._last_ts:
            if n >= self.max_entries:
                raise ValueError(f"Attempt to append to a full time index (size = {n}).")
            rel = offset - self.base_offset
            if rel < 0 or rel > _INT32_MAX:
                raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self.path})")
            if n >= self._reserved_entries:
                self._reserve(n * 12 + 12)
            _pack_time_entry(self._mm, n * 12, timestamp, rel)  # type: ignore[arg-type]
            self.entries = n + 1
            self._last_ts = timestamp
            self._last_off = offset

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, self._rel)
        if slot < 0:
            new = 0
        elif self._rel(slot) == offset - self.base_offset:
            new = slot
        else:
            new = slot + 1
        self._truncate_to_entries(new)

    def _truncate_to_entries(self, n: int) -> None:
        self.entries = n
        self._read_last_entry()

    def _after_resize(self) -> None:
        self._read_last_entry()

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for an index that cannot be right."""
        n = self.entries
        last = self.last_entry
        if n and last.timestamp < self._ts(0):
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but "
                f"the last timestamp is {last.timestamp} which is less than the first timestamp "
                f"{self._ts(0)}"
            )
        if n and last.offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but "
                f"the last offset is {last.offset} which is less than the first offset "
                f"{self.base_offset}"
            )
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Time index file {self.path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}"
            )
