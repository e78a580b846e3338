"""LogSegment: one ``.log`` file of RecordBatch v2 bytes and its indexes, Kafka's on-disk format.

Files of the segment with base offset B (all in the partition directory, names as Kafka's
``LogFileUtils``)::

    <B, 20 digits>.log        concatenated RecordBatch v2, exactly as received on the wire (after
                              the broker assigned baseOffset and partitionLeaderEpoch)
    <B, 20 digits>.index      OffsetIndex (see storage.index)
    <B, 20 digits>.timeindex  TimeIndex (see storage.index)
    <B, 20 digits>.txnindex   TransactionIndex, only once an aborted transaction ends here

Suffixes: ``.deleted`` (waiting for file.delete.delay.ms before removal), ``.cleaned`` and
``.swap`` (compaction in progress; see storage.log for what loading does with them).

Invariants:

* B <= every offset in the segment < the next segment's base, and every offset - B fits in
  int32 (the indexes store 4-byte relative offsets); appends that would break that raise
  LogSegmentOffsetOverflowError.
* ``size`` is the byte length of the complete batches in the file: appends write at ``size``
  with ``os.pwrite`` (no Python-side buffering, nothing per record), and a trailing partial
  batch never counts.
* An append is all-or-nothing: when the write or an index entry fails (ENOSPC, EIO, EFBIG, a
  full or inconsistent index), the file is cut back to its previous size, the entries it added
  are dropped and StorageError (KAFKA_STORAGE_ERROR) is raised, so no bytes of a refused
  append stay where a retry or a recovery could find them.
* Every ``index.interval.bytes`` of appended data adds one offset-index entry (last offset of
  the append -> position where the append starts) and maybe one time-index entry (running max
  timestamp -> its offset), exactly as Kafka's ``LogSegment.append``.
* Indexes of loaded segments are opened lazily (Kafka's ``LazyIndex``): a segment that is
  never searched never maps its index files. A new segment creates both at once.

Who may call: the partition's Log only, from the task that owns it (the event loop), one call
at a time. The exception is :meth:`flush`, which may run in an executor thread concurrently with
appends; it holds the segment's lock, as do the methods that remap or close files.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from protocol.primitives import I32, I64
from protocol.records import (
    BASE_OFFSET,
    BATCH_LENGTH,
    LAST_OFFSET_DELTA,
    LOG_OVERHEAD,
    RecordsError,
    decode_records,
    validate_batch,
)
from storage.checkpoints import fsync_dir
from storage.errors import CorruptRecordError, LogSegmentOffsetOverflowError, StorageError
from storage.file_records import (
    EMPTY_RECORDS,
    FetchDataInfo,
    FileRecords,
    LogFile,
    LogOffsetMetadata,
    LogOffsetPosition,
    TimestampAndOffset,
    scan_headers,
)
from storage.index import NO_TIMESTAMP, OffsetIndex, TimeIndex, TimestampOffset
from storage.log_integrity import find_next_batch
from storage.txn_index import TransactionIndex, TxnIndexSearchResult

if TYPE_CHECKING:
    from storage.config import LogConfig
    from storage.leader_epoch import LeaderEpochFileCache

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "LOG_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "LogSegment",
    "filename_prefix_from_offset",
    "is_index_file",
    "is_log_file",
    "log_file",
    "offset_from_file_name",
    "offset_index_file",
    "time_index_file",
    "txn_index_file",
]

log = logging.getLogger("odradek.storage.segment")

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"

_INT32_MAX = 2147483647
_LONG_MAX = 9223372036854775807
# the largest single-batch append a segment keeps a copy of for the reads at the log end (see
# LogSegment._last_append); larger fetch responses are streamed from the file (sendfile) anyway
TAIL_CACHE_MAX_BYTES = 16 * 1024


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit, zero-padded base offset that starts every file name of a segment."""
    return f"{offset:020d}"


def log_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{offset:020d}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{offset:020d}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{offset:020d}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def txn_index_file(directory: str | os.PathLike[str], offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{offset:020d}{TXN_INDEX_FILE_SUFFIX}{suffix}"


def offset_from_file_name(name: str) -> int:
    """The base offset in a segment file name (``00000000000000000042.log`` -> 42);
    ValueError when the name does not start with one."""
    prefix = name.split(".", 1)[0]
    if not prefix.isdigit():
        raise ValueError(f"not a segment file name: {name}")
    return int(prefix)


def is_log_file(path: Path) -> bool:
    return path.name.endswith(LOG_FILE_SUFFIX) and path.name[:-4].isdigit()


def is_index_file(path: Path) -> bool:
    name = path.name
    for suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX):
        if name.endswith(suffix) and name[: -len(suffix)].isdigit():
            return True
    return False


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class _Run(NamedTuple):
    """A stretch of whole valid batches in a .log: bytes [start, stop), offsets
    [first_offset, next_offset)."""

    start: int
    stop: int
    first_offset: int
    next_offset: int


class LogSegment:
    """One segment of a partition's log (see the module docstring for files and invariants)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10485760,
        roll_jitter_ms: int = 0,
        time_ms: Callable[[], int] = _wall_ms,
        file_already_exists: bool = False,
        suffix: str = "",
        preallocate: bool = False,
        init_file_size: int = 0,
    ) -> None:
        self._dir = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self._time_ms = time_ms
        self._suffix = suffix
        self._lock = threading.Lock()
        path = log_file(self._dir, base_offset, suffix)
        flags = os.O_RDWR | os.O_CREAT
        if not file_already_exists:
            flags |= os.O_EXCL
        fd = os.open(path, flags, 0o644)
        self._file = LogFile(fd, path)
        # a preallocated file's length while it is active (see _abort_append)
        self._preallocated_size = 0
        if not file_already_exists and preallocate and init_file_size > 0:
            os.ftruncate(fd, init_file_size)
            self._preallocated_size = init_file_size
            self._size = 0
        else:
            self._size = os.fstat(fd).st_size
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self.txn_index = TransactionIndex(base_offset, txn_index_file(self._dir, base_offset, suffix))
        # max timestamp so far and its offset; None = not read from the time index yet
        self._max_ts: int | None = None if file_already_exists else NO_TIMESTAMP
        self._offset_of_max_ts = base_offset
        self._rolling_ts: int | None = None  # first batch's max timestamp, once known
        self._bytes_since_last_index_entry = 0
        # The latest append: (base offset, position of its first batch, and -- when it was one
        # batch of at most TAIL_CACHE_MAX_BYTES -- that batch's last offset and a copy of its
        # bytes, else None, None). A consumer keeping up fetches from exactly there, so
        # translate_offset starts its header scan at it instead of at the sparse index entry up
        # to index.interval.bytes earlier; and every read of a one-batch append -- each
        # follower's fetch woken by it, then the consumers' once the high watermark passes it --
        # is answered from the copy without a header scan or a pread (two system calls per
        # reader per round on the replication round's path). Dropped by whatever rewrites the
        # segment's end (truncation, recovery), restored by a failed append's undo.
        self._last_append: tuple[int, int, int | None, bytes | None] | None = None
        # positions of invalid batches a read already logged (see _corrupt)
        self._reported_corrupt: set[int] = set()
        self.created = time_ms()
        if not file_already_exists:  # a new segment is about to be appended to: map now
            try:
                self.offset_index  # noqa: B018
                self.time_index  # noqa: B018
            except BaseException:
                # a roll that cannot create its indexes (EFBIG, ENOSPC, EMFILE) leaves no
                # descriptor and no half-made segment behind; the roll is retried later
                self._close_handlers()
                for p in (path, self.offset_index_path, self.time_index_path):
                    p.unlink(missing_ok=True)
                raise

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        config: LogConfig,
        *,
        time_ms: Callable[[], int] = _wall_ms,
        file_already_exists: bool = False,
        suffix: str = "",
        roll_jitter_ms: int = 0,
        preallocate: bool | None = None,
    ) -> LogSegment:
        """Open (or create) the segment with ``base_offset`` in ``directory`` under ``config``."""
        prealloc = config.preallocate if preallocate is None else preallocate
        return cls(
            directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            roll_jitter_ms=roll_jitter_ms,
            time_ms=time_ms,
            file_already_exists=file_already_exists,
            suffix=suffix,
            preallocate=prealloc,
            init_file_size=config.segment_bytes if prealloc else 0,
        )

    # -- files and sizes -----------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes of complete batches in the .log file."""
        return self._size

    @property
    def log_path(self) -> Path:
        return self._file.path

    @property
    def offset_index_path(self) -> Path:
        return offset_index_file(self._dir, self.base_offset, self._suffix)

    @property
    def time_index_path(self) -> Path:
        return time_index_file(self._dir, self.base_offset, self._suffix)

    @property
    def txn_index_path(self) -> Path:
        return self.txn_index.path

    @property
    def suffix(self) -> str:
        return self._suffix

    @property
    def closed(self) -> bool:
        return self._file.closed

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index, mapped on first use."""
        idx = self._offset_index
        if idx is None:
            idx = self._offset_index = OffsetIndex(
                self.offset_index_path, self.base_offset, self.max_index_size
            )
        return idx

    @property
    def time_index(self) -> TimeIndex:
        """The time index, mapped on first use."""
        idx = self._time_index
        if idx is None:
            idx = self._time_index = TimeIndex(
                self.time_index_path, self.base_offset, self.max_index_size
            )
        return idx

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # -- timestamps ----------------------------------------------------------------------------

    def _read_max_timestamp_and_offset(self) -> TimestampOffset:
        if self._max_ts is None:
            last = self.time_index.last_entry
            self._max_ts, self._offset_of_max_ts = last.timestamp, last.offset
        return TimestampOffset(self._max_ts, self._offset_of_max_ts)

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp appended (-1 if none); may map the time index."""
        if self._max_ts is None:
            self._read_max_timestamp_and_offset()
        return self._max_ts  # type: ignore[return-value]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._read_max_timestamp_and_offset().offset

    @property
    def largest_record_timestamp(self) -> int | None:
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else None

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's last-modified time when there is none
        (what time-based retention compares against, as Kafka's ``largestTimestamp``)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified

    @property
    def last_modified(self) -> int:
        """Last-modified time of the .log file in ms."""
        return os.stat(self._file.path).st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        ns = ms * 1_000_000
        for path in (self._file.path, self.offset_index_path, self.time_index_path):
            if path.exists():
                os.utime(path, ns=(ns, ns))

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_ts is None:
            for _pos, h in scan_headers(self._file, 0, self._size):
                self._rolling_ts = h[8]
                break

    @property
    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch, or Long.MAX_VALUE when unknown/none."""
        self._load_first_batch_timestamp()
        ts = self._rolling_ts
        return ts if ts is not None and ts >= 0 else _LONG_MAX

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's ``timeWaitedForRoll``: new batch's timestamp minus the first batch's, or,
        when the first batch has no timestamp, wall time since the segment was created."""
        self._load_first_batch_timestamp()
        ts = self._rolling_ts
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created

    def should_roll(
        self,
        segment_bytes: int,
        segment_ms: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now_ms: int,
    ) -> bool:
        """Whether an append of ``messages_size`` bytes must go to a new segment: it would push
        the segment past segment.bytes, the segment is older than segment.ms minus its jitter
        (and not empty), an index is full, or its last offset overflows the relative offset.
        (On the append path: kept to attribute reads.)"""
        size = self._size
        if size > segment_bytes - messages_size:
            return True
        if size > 0:
            ts = self._rolling_ts
            if ts is None:
                self._load_first_batch_timestamp()
                ts = self._rolling_ts
            if ts is not None and ts >= 0:
                waited = max_timestamp_in_messages - ts
            else:
                waited = now_ms - self.created
            if waited > segment_ms - self.roll_jitter_ms:
                return True
        oi = self._offset_index or self.offset_index
        if oi.entries >= oi.max_entries:
            return True
        ti = self._time_index or self.time_index
        if ti.entries >= ti.max_entries - 1:
            return True
        rel = max_offset_in_messages - self.base_offset
        return rel < 0 or rel > _INT32_MAX

    # -- append --------------------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
    ) -> None:
        """Write ``records`` (complete, validated batches with offsets assigned) at the end of
        the .log with os.pwrite, and add index entries every index.interval.bytes. All or
        nothing: any failure undoes the write (see :meth:`_abort_append`) and raises
        StorageError."""
        n = len(records) if not isinstance(records, memoryview) else records.nbytes
        if n == 0:
            return
        pos = self._size
        rel = largest_offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {largest_offset} in segment {self!r}"
            )
        if n > _INT32_MAX - pos:
            raise StorageError(
                f"Append of size {n} bytes is too large for segment with current file position "
                f"at {pos}"
            )
        fd = self._file.fd
        oi = self._offset_index or self.offset_index
        ti = self._time_index or self.time_index
        before = (
            self._max_ts,
            self._offset_of_max_ts,
            self._bytes_since_last_index_entry,
            self._last_append,
            self._rolling_ts,
            oi.entries,
            ti.entries,
        )
        try:
            written = os.pwrite(fd, records, pos)
            while written < n:
                written += os.pwrite(fd, memoryview(records)[written:], pos + written)
            if pos == 0:
                self._rolling_ts = largest_timestamp
            self._size = pos + n
            base = I64.unpack_from(records, BASE_OFFSET)[0]
            # one batch (its length field covers everything written): keep a copy of it
            self._last_append = (
                (base, pos, base + I32.unpack_from(records, LAST_OFFSET_DELTA)[0], bytes(records))
                if n <= TAIL_CACHE_MAX_BYTES and I32.unpack_from(records, BATCH_LENGTH)[0] + LOG_OVERHEAD == n
                else (base, pos, None, None)
            )
            max_ts = self._max_ts
            if max_ts is None:
                max_ts = self._read_max_timestamp_and_offset().timestamp
            if largest_timestamp > max_ts:
                self._max_ts = max_ts = largest_timestamp
                self._offset_of_max_ts = offset_of_max_timestamp
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                oi.append(largest_offset, pos)
                ti.maybe_append(max_ts, self._offset_of_max_ts)
                self._bytes_since_last_index_entry = n
            else:
                self._bytes_since_last_index_entry += n
        except BaseException as e:
            self._abort_append(pos, before)
            if isinstance(e, StorageError) or not isinstance(e, Exception):
                raise
            raise StorageError(f"Error while appending to {self._file.path}: {e}") from e

    def _abort_append(self, size: int, before: tuple[object, ...]) -> None:
        """Undo a failed append (all-or-nothing): cut the .log back to ``size`` bytes -- the
        write may have put part or all of the batches there -- drop the index entries it added
        and restore the in-memory state, so the bytes after the last complete batch are never
        valid-looking leftovers that a retry or a recovery would keep (Kafka leaves this to
        recovery; a retry must not find them first)."""
        (
            self._max_ts,
            self._offset_of_max_ts,
            self._bytes_since_last_index_entry,
            self._last_append,
            self._rolling_ts,
            oi_entries,
            ti_entries,
        ) = before  # type: ignore[assignment]
        self._size = size
        oi, ti = self._offset_index, self._time_index
        if oi is not None and oi.entries > oi_entries:  # type: ignore[operator]
            oi._truncate_to_entries(oi_entries)  # type: ignore[arg-type]
        if ti is not None and ti.entries > ti_entries:  # type: ignore[operator]
            ti._truncate_to_entries(ti_entries)  # type: ignore[arg-type]
        try:
            file_size = os.fstat(self._file.fd).st_size
            if file_size > size:
                os.ftruncate(self._file.fd, size)
                if self._preallocated_size > size:  # keep the preallocation, now zeros
                    os.ftruncate(self._file.fd, self._preallocated_size)
        except OSError as e:
            # the next append overwrites from `size` anyway, and recovery and close cut the
            # file at the last complete batch; say so rather than hide the first error
            log.error(
                "Could not cut %s back to %d bytes after a failed append: %s", self._file.path, size, e
            )
        # debug: the broker warns once per partition with the error (a full disk fails every append)
        log.debug("Failed append to %s undone: the segment is back to %d bytes", self._file.path, size)

    # -- reads ---------------------------------------------------------------------------------

    def translate_offset(
        self, offset: int, starting_position: int = 0, *, strict: bool = False
    ) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= ``offset``: (its last offset, position,
        size), or None when the segment has none. Index lookup, then a scan of batch headers.

        With ``strict`` (the fetch path) every header the scan steps over is checked for what
        costs nothing more than the scan itself -- magic 2, a length that ends inside the
        segment, offsets that increase and lie in this segment -- and CorruptRecordError is
        raised at the first that fails, instead of stopping there and answering None (which
        makes the log read on in the next segment: a silent skip of every offset in between).
        """
        hint = self._last_append
        if hint is not None and hint[0] <= offset:
            last, data = hint[2], hint[3]
            if last is not None and data is not None and starting_position <= hint[1]:
                # the latest append, one batch validated on its way in: it holds `offset` or
                # nothing at or after it does (the scan below would find the same)
                return LogOffsetPosition(last, hint[1], len(data)) if offset <= last else None
            # every batch before the last appended one ends below `offset`, and no index entry
            # points past it (entries are only ever added at appended batches): the index
            # lookup (a binary search) could only answer a position at or before it. Reads at
            # the log end -- every follower fetch and tailing consumer -- start here.
            pos = hint[1]
        else:
            pos = self.offset_index.lookup(offset).position
        if starting_position > pos:
            pos = starting_position
        if strict:
            return self._translate_offset_checked(offset, pos)
        for p, h in scan_headers(self._file, pos, self._size):
            last = h[0] + h[6]
            if last >= offset:
                return LogOffsetPosition(last, p, h[1] + LOG_OVERHEAD)
        return None

    def _translate_offset_checked(self, offset: int, pos: int) -> LogOffsetPosition | None:
        """translate_offset's scan with the header checks of ``strict`` (see there). Kafka's
        read path checks the same at the batches it steps over (FileLogInputStream: size and
        magic); neither looks at CRCs, which consumers verify (check.crcs).

        A header that fails does not hide the batches behind it: the scan resynchronises at
        the next valid batch with later offsets (:meth:`_resync`) and goes on when ``offset``
        lies there; only offsets inside the damaged stretch answer CorruptRecordError."""
        end = self._size
        next_pos = pos
        prev_last = self.base_offset - 1
        base_limit = self.base_offset + _INT32_MAX
        while True:
            bad: tuple[int, str] | None = None
            for p, h in scan_headers(self._file, next_pos, end):
                first, last = h[0], h[0] + h[6]
                if h[3] != 2:
                    bad = (p, f"unsupported magic {h[3]}")
                elif h[6] < 0 or first <= prev_last or last > base_limit:
                    bad = (
                        p,
                        f"batch offsets [{first}, {last}] do not follow offset {prev_last} in a "
                        f"segment based at {self.base_offset}",
                    )
                if bad is not None:
                    break
                if last >= offset:
                    return LogOffsetPosition(last, p, h[1] + LOG_OVERHEAD)
                prev_last = last
                next_pos = p + h[1] + LOG_OVERHEAD
            if bad is None:
                if next_pos == end:
                    return None
                # the scan stopped on a header that is not a whole batch
                head = self._file.pread(12, next_pos)
                length = int.from_bytes(head[8:12], "big", signed=True) if len(head) == 12 else None
                bad = (
                    next_pos,
                    f"batch length {length} does not fit the {end - next_pos} bytes left in the "
                    "segment",
                )
            resume = self._resync(bad[0], prev_last + 1, end)
            if resume is None or resume[1] > offset:
                self._corrupt(*bad)
            next_pos, prev_last = resume[0], resume[1] - 1

    def _resync(self, position: int, min_offset: int, end: int) -> tuple[int, int] | None:
        """(position, base offset) of the next valid batch after invalid bytes at
        ``position`` with offsets >= ``min_offset``, or None. Maps the segment read-only for
        the search (only reads that meet damage get here)."""
        if end <= position:
            return None
        mm = mmap.mmap(self._file.fd, end, access=mmap.ACCESS_READ)
        try:
            found = find_next_batch(mm, position + 1, end, min_offset, self.base_offset + _INT32_MAX)
            return None if found is None else (found, I64.unpack_from(mm, found)[0])
        finally:
            mm.close()

    def _corrupt(self, position: int, reason: str) -> NoReturn:
        """Raise CorruptRecordError for the batch at ``position``, logging it the first time
        this segment meets it (a consumer retrying the same offset must not flood the log)."""
        message = (
            f"Found invalid batch in log segment {self._file.path} at byte position "
            f"{position}: {reason}"
        )
        if position not in self._reported_corrupt and len(self._reported_corrupt) < 64:
            self._reported_corrupt.add(position)
            log.error("%s; fetches of it answer CORRUPT_MESSAGE", message)
        raise CorruptRecordError(message)

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Batches from the one holding ``start_offset``: at most ``max_size`` bytes (or the
        whole first batch when ``min_one_message``) and never past byte ``max_position``
        (default: the segment's size). None when the segment has no offset >= start_offset.
        The records are a file slice; the last batch may be cut short by ``max_size``."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self!r}")
        mapping = self.translate_offset(start_offset, strict=True)
        if mapping is None:
            return None
        start = mapping.position
        meta = LogOffsetMetadata(start_offset, self.base_offset, start)
        adjusted = max(max_size, mapping.size) if min_one_message else max_size
        if adjusted == 0:
            return FetchDataInfo(meta, EMPTY_RECORDS)
        limit = self._size if max_position is None else min(max_position, self._size)
        fetch_size = min(limit - start, adjusted)
        if fetch_size <= 0:
            return FetchDataInfo(meta, EMPTY_RECORDS)
        latest = self._last_append
        data = latest[3] if latest is not None and latest[1] == start else None
        if data is not None and len(data) != fetch_size:
            data = None  # a read of part of it
        return FetchDataInfo(
            meta, FileRecords(self._file, start, fetch_size, data), adjusted < mapping.size
        )

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty); scans from the last
        offset-index entry."""
        start = self.offset_index.lookup(self.offset_index.last_offset).position
        nxt = self.base_offset
        for _p, h in scan_headers(self._file, start, self._size):
            nxt = h[0] + h[6] + 1
        return nxt

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``
        (Kafka's ``findOffsetByTimestamp``), or None. Decodes only the batch that holds it."""
        entry = self.time_index.lookup(timestamp)
        pos = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for p, h in scan_headers(self._file, pos, self._size):
            if h[8] >= timestamp:
                data = self._file.pread(h[1] + LOG_OVERHEAD, p)
                _hdr, records = decode_records(data, check_crc=False)
                for r in records:
                    if r.timestamp >= timestamp and r.offset >= starting_offset:  # type: ignore[operator]
                        return TimestampAndOffset(r.timestamp, r.offset, h[2] if h[2] >= 0 else -1)  # type: ignore[arg-type]
        return None

    def find_max_timestamp(self) -> TimestampAndOffset | None:
        """The first record holding the segment's max timestamp (for ListOffsets -3)."""
        max_ts, offset = self._read_max_timestamp_and_offset()
        pos = self.offset_index.lookup(offset).position
        for p, h in scan_headers(self._file, pos, self._size):
            if h[8] == max_ts:
                epoch = h[2] if h[2] >= 0 else -1
                if h[5] & 0x08:  # LogAppendTime: every record has the batch's timestamp
                    return TimestampAndOffset(max_ts, h[0], epoch)
                data = self._file.pread(h[1] + LOG_OVERHEAD, p)
                _hdr, records = decode_records(data, check_crc=False)
                for r in records:
                    if r.timestamp == max_ts:
                        return TimestampAndOffset(max_ts, r.offset, epoch)  # type: ignore[arg-type]
        return None

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # -- recovery and truncation ---------------------------------------------------------------

    def recover(
        self,
        max_message_size: int = _INT32_MAX,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
    ) -> int:
        """Re-validate every batch (length, magic, record count, CRC, offsets increasing and
        within this segment), rebuild both indexes, and truncate the file after the last valid
        batch. Returns the number of bytes dropped (logged as a warning when not 0).

        Damage in the middle of the file (bit rot, an overwritten header) does not cost the
        intact batches after it: when a valid batch with later offsets follows the invalid
        bytes (storage.log_integrity.find_next_batch), the segment is rewritten without the
        invalid bytes (:meth:`_rewrite_without_holes`; logged as an error with each range and
        the offsets lost) and then recovered. Kafka truncates at the first invalid batch.

        ``max_message_size`` is only reported on: batches above it are kept (the limit may
        have been lowered after they were written). With a ``leader_epoch_cache``, epochs of
        the recovered batches are assigned to it as Kafka does."""
        with self._lock:
            runs = self._scan_valid_runs()
            dropped = 0
            if len(runs) > 1:
                dropped = self._rewrite_without_holes(runs)
            valid_size = sum(r.stop - r.start for r in runs)
            return dropped + self._recover_indexes(valid_size, max_message_size, leader_epoch_cache)

    def _scan_valid_runs(self) -> list[_Run]:
        """Byte ranges of the .log made of whole valid batches with increasing offsets,
        resynchronising after each invalid stretch; one run when at most the tail is invalid.
        Reads the file once through a read-only map (CRC checks included)."""
        file_size = os.fstat(self._file.fd).st_size
        if file_size == 0:
            return [_Run(0, 0, self.base_offset, self.base_offset)]
        base = self.base_offset
        max_last = base + _INT32_MAX
        runs: list[_Run] = []
        mm = mmap.mmap(self._file.fd, file_size, access=mmap.ACCESS_READ)
        try:
            pos, run_start, run_first, prev_last = 0, 0, base, base - 1
            while True:
                problem = ""
                while pos < file_size:
                    try:
                        h = validate_batch(mm, pos)
                    except RecordsError as e:
                        problem = str(e)
                        break
                    first = h.base_offset
                    last = first + h.last_offset_delta
                    if first <= prev_last or last > max_last:
                        problem = f"batch [{first}, {last}] after offset {prev_last}"
                        break
                    prev_last = last
                    pos += h.batch_length + LOG_OVERHEAD
                runs.append(_Run(run_start, pos, run_first, prev_last + 1))
                if pos >= file_size:
                    break
                nxt = find_next_batch(mm, pos + 1, file_size, prev_last + 1, max_last)
                log.warning(
                    "Found invalid messages in log segment %s at byte offset %d: %s",
                    self._file.path,
                    pos,
                    problem,
                )
                if nxt is None:
                    break  # an invalid tail: the recovery pass truncates it
                pos = run_start = nxt
                run_first = I64.unpack_from(mm, nxt)[0]
        finally:
            mm.close()
        return runs

    def _rewrite_without_holes(self, runs: list[_Run]) -> int:
        """Replace the .log by the concatenation of ``runs`` (storage.log_integrity found valid
        batches after invalid bytes), crash-safely, and return the bytes left out.

        The new file is written as ``<base>.log.cleaned`` and fsync'd; the offset and time
        indexes are removed (a start finding them missing rebuilds them: they may no longer
        match) and the directory fsync'd; then the .cleaned file replaces the .log by rename.
        A crash before the rename leaves the original (loading removes ``.cleaned`` files and
        recovery redoes this); after it, the new file without indexes."""
        old = self._file
        path = old.path
        tmp = path.with_name(path.name + CLEANED_FILE_SUFFIX)
        end = os.fstat(old.fd).st_size
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            out = 0
            for start, stop, _first, _next in runs:
                done = 0
                while done < stop - start:
                    n = os.copy_file_range(old.fd, fd, stop - start - done, start + done, out)
                    if n == 0:
                        raise StorageError(f"{path} ended while copying its valid batches")
                    done += n
                    out += n
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        pairs = list(itertools.pairwise(runs))
        holes = [f"[{a.stop}, {b.start})" for a, b in pairs]
        if runs[-1].stop < end:
            holes.append(f"[{runs[-1].stop}, {end})")
        lost = ", ".join(f"{a.next_offset}..{b.first_offset - 1}" for a, b in pairs)
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        self._offset_index = self._time_index = None
        self.offset_index_path.unlink(missing_ok=True)
        self.time_index_path.unlink(missing_ok=True)
        fsync_dir(path.parent)
        os.replace(tmp, path)
        fsync_dir(path.parent)
        self._file = LogFile(fd, path)
        old.close()
        dropped = end - out
        log.error(
            "Found invalid bytes in the middle of log segment %s at byte ranges %s, followed by "
            "valid batches: rewrote the segment without them (%d bytes dropped, offsets %s lost; "
            "%d bytes of valid batches kept)",
            path,
            ", ".join(holes),
            dropped,
            lost,
            out,
        )
        return dropped

    def _recover_indexes(
        self,
        valid_size: int,
        max_message_size: int,
        leader_epoch_cache: LeaderEpochFileCache | None,
    ) -> int:
        """The recovery pass proper over bytes [0, ``valid_size``), which
        :meth:`_scan_valid_runs` validated (CRCs included): walk their headers, rebuild both
        indexes and the epochs, truncate the file after them; the bytes truncated."""
        oi = self.offset_index
        ti = self.time_index
        oi.reset()
        ti.reset()
        self._max_ts = NO_TIMESTAMP
        self._offset_of_max_ts = self.base_offset
        self._rolling_ts = None
        file_size = os.fstat(self._file.fd).st_size
        valid = 0
        last_index_entry = 0
        prev_last = self.base_offset - 1
        interval = self.index_interval_bytes
        for pos, h in scan_headers(self._file, 0, valid_size):
            first = h[0]
            last = first + h[6]
            size = h[1] + LOG_OVERHEAD
            if size > max_message_size:
                log.info(
                    "Batch at byte offset %d of %s is larger than max.message.bytes (%d > %d); kept",
                    pos,
                    self._file.path,
                    size,
                    max_message_size,
                )
            max_ts = h[8]
            if max_ts > self._max_ts:
                self._max_ts = max_ts
                self._offset_of_max_ts = last
            if pos - last_index_entry > interval:
                oi.append(last, pos)
                ti.maybe_append(self._max_ts, self._offset_of_max_ts)
                last_index_entry = pos
            if self._rolling_ts is None:
                self._rolling_ts = max_ts
            valid = pos + size
            prev_last = last
            epoch = h[2]
            if leader_epoch_cache is not None and epoch >= 0:
                latest = leader_epoch_cache.latest_epoch
                if latest is None or epoch > latest:
                    leader_epoch_cache.assign(epoch, first)
        truncated = file_size - valid
        if truncated > 0:
            log.warning(
                "Truncated %d invalid bytes at the end of segment %s during recovery",
                truncated,
                self._file.path,
            )
            os.ftruncate(self._file.fd, valid)
        self._size = valid
        self._last_append = None
        self._bytes_since_last_index_entry = valid - last_index_entry
        oi.trim_to_valid_size()
        # a normally closed segment ends with the largest timestamp: do the same
        ti.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        ti.trim_to_valid_size()
        self.txn_index.truncate_to(prev_last + 1)
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (and their index entries);
        returns the bytes removed. The indexes get their full size back (this segment is
        about to be the active one)."""
        with self._lock:
            mapping = self.translate_offset(offset)
            oi = self.offset_index
            ti = self.time_index
            oi.truncate_to(offset)
            ti.truncate_to(offset)
            self.txn_index.truncate_to(offset)
            oi.resize(oi.max_index_size)
            ti.resize(ti.max_index_size)
            truncated = 0 if mapping is None else self._truncate_file(mapping.position)
            if self._size == 0:
                self.created = self._time_ms()
                self._rolling_ts = None
            self._bytes_since_last_index_entry = 0
            if self.max_timestamp_so_far >= 0:
                self._max_ts, self._offset_of_max_ts = self._read_largest_timestamp()
            return truncated

    def _truncate_file(self, size: int) -> int:
        original = self._size
        if size > original or size < 0:
            raise StorageError(
                f"Attempt to truncate log segment {self._file.path} to {size} bytes failed, "
                f"size of this log segment is {original} bytes."
            )
        if size < os.fstat(self._file.fd).st_size:
            os.ftruncate(self._file.fd, size)
        self._size = size
        self._last_append = None
        return original - size

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry
        pos = self.offset_index.lookup(last.offset).position
        best = TimestampOffset(NO_TIMESTAMP, -1)
        for _p, h in scan_headers(self._file, pos, self._size):
            if h[8] > best.timestamp:
                best = TimestampOffset(h[8], h[0] + h[6])
        return best if best.timestamp > last.timestamp else last

    def has_overflow(self) -> bool:
        nxt = self.read_next_offset()
        return nxt > self.base_offset and not self.can_convert_to_relative_offset(nxt - 1)

    def sanity_check(self, time_index_newly_created: bool) -> None:
        """Kafka's load-time check: the offset index file must exist (FileNotFoundError
        otherwise), a newly created time index is emptied, the txn index must be sane."""
        if not self.offset_index_path.exists():
            raise FileNotFoundError(f"Offset index file {self.offset_index_path} does not exist")
        if time_index_newly_created:
            self.time_index.resize(0)
        self.txn_index.sanity_check()

    def resize_indexes(self, size: int) -> None:
        with self._lock:
            self.offset_index.resize(size)
            self.time_index.resize(size)

    # -- lifecycle -----------------------------------------------------------------------------

    def on_become_inactive_segment(self) -> None:
        """On roll: record the max timestamp in the time index, trim indexes and .log file."""
        with self._lock:
            ts, off = self._read_max_timestamp_and_offset()
            self.time_index.maybe_append(ts, off, skip_full_check=True)
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()
            self._trim_log_file()

    def _trim_log_file(self) -> None:
        if os.fstat(self._file.fd).st_size > self._size:
            os.ftruncate(self._file.fd, self._size)

    def flush(self) -> None:
        """fsync the .log and the indexes. Blocking; safe to call from an executor thread."""
        with self._lock:
            if self._file.closed:
                return
            os.fsync(self._file.fd)
            for idx in (self._offset_index, self._time_index):
                if idx is not None and not idx.closed:
                    idx.flush()
            self.txn_index.flush()

    def close(self) -> None:
        """Write the final time-index entry, trim and close every file (idempotent). Does not
        fsync: the Log flushes unflushed segments before closing them."""
        with self._lock:
            if self._file.closed:
                return
            try:
                if self._max_ts is not None and self._max_ts >= 0:
                    self.time_index.maybe_append(
                        self._max_ts, self._offset_of_max_ts, skip_full_check=True
                    )
            except ValueError as e:  # pragma: no cover - Kafka swallows this too
                log.warning("Could not append the last time index entry of %s: %s", self, e)
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close()
            self._trim_log_file()
            self._file.close()
            self.txn_index.close()

    def close_handlers(self) -> None:
        """Close every file without writing anything (idempotent)."""
        with self._lock:
            self._close_handlers()

    def _close_handlers(self) -> None:
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        self._file.close()
        self.txn_index.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment from ``old_suffix`` to ``new_suffix``."""
        with self._lock:
            if self._suffix != old_suffix:
                raise ValueError(f"segment {self!r} has suffix {self._suffix!r}, not {old_suffix!r}")
            old_index, old_time = self.offset_index_path, self.time_index_path
            new_log = log_file(self._dir, self.base_offset, new_suffix)
            os.replace(self._file.path, new_log)
            self._file.path = new_log
            self._suffix = new_suffix
            for idx, old, new in (
                (self._offset_index, old_index, self.offset_index_path),
                (self._time_index, old_time, self.time_index_path),
            ):
                if idx is not None:
                    idx.rename_to(new)
                elif old.exists():
                    os.replace(old, new)
            self.txn_index.rename_to(txn_index_file(self._dir, self.base_offset, new_suffix))

    def rename_to_deleted(self) -> None:
        """Append ``.deleted`` to every file name (the first step of an asynchronous delete)."""
        self.change_file_suffixes(self._suffix, self._suffix + DELETED_FILE_SUFFIX)

    def delete(self) -> None:
        """Close and remove every file of the segment (missing files are fine)."""
        with self._lock:
            self._close_handlers()
            for path in (
                self._file.path,
                self.offset_index_path,
                self.time_index_path,
                self.txn_index.path,
            ):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass

    @property
    def deleted(self) -> bool:
        return not any(
            p.exists()
            for p in (self._file.path, self.offset_index_path, self.time_index_path, self.txn_index.path)
        )

    def __repr__(self) -> str:
        return (
            f"LogSegment(baseOffset={self.base_offset}, size={self._size}, "
            f"path={str(self._file.path)!r})"
        )
