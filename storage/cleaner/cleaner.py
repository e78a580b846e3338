"""Cleaner: one cleaning of one log, Kafka's ``Cleaner.doClean`` -- run in the cleaner's worker
process (storage.cleaner.worker), never on the event loop.

Given a :class:`CleanJob` (the log's directory, its non-active segments with their sizes and
modification times, the dirty range [first dirty, first uncleanable), the producers whose last
batch must stay, the aborted transactions, the clock), :func:`clean`:

1. builds the OffsetMap over the dirty range: for every record with a key, key -> its offset,
   skipping aborted transactions and control batches; when the map is full the cleaning covers
   only up to the last offset it holds (``end_offset``), the next cleaning goes on from there;
2. groups the segments [log start, end_offset) so that each group fits one segment
   (segment.bytes, segment.index.bytes, offsets within 2**31 of the group's base);
3. writes each group into ``<base>.log.cleaned`` (and its ``.txnindex.cleaned``), keeping a
   record only if no later record of its key is in the map (offsets past the map's last are
   all kept), and a tombstone only until its batch's delete horizon; batches keep their
   boundaries, offsets, producer ids/epochs/sequences and timestamps (storage.cleaner.records);
   then builds the indexes by recovering the new segment (which also checks every byte that
   was written) and gives it the last modification time of the group's last segment;
4. hands each cleaned group to ``on_group`` before it starts the next one; the caller swaps it
   into the log (storage.log.Log.replace_segments) and answers whether to go on, so a cleaning
   never holds more than one group's worth of extra disk (as Kafka's).

Tombstones and transaction markers (KIP-534): the first cleaning that retains a batch with a
tombstone (or a marker that could otherwise go) sets the batch's delete horizon to now +
delete.retention.ms; a later cleaning after that time removes them.

Files are read with ``os.pread`` in chunks of ``log.cleaner.io.buffer.size`` (grown when a batch
is larger) and written with buffered writes; the cleaned segment is fsync'd before it is handed
over. ``check_done(bytes)`` is called after every chunk read (the worker raises there when the
broker went away, and throttles). An OSError leaves with the name of the file that failed, and
leaves the group's ``.cleaned`` files where they are: the broker takes the log's dir offline
and the next load removes them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from protocol.compression import RecordsError
from protocol.records import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_PRODUCER_ID,
    BatchHeader,
    read_header,
)
from storage.cleaner.offset_map import OffsetMap
from storage.cleaner.records import (
    RecordSpan,
    batch_records_data,
    control_type,
    empty_batch,
    rebuild_batch,
    record_spans,
)
from storage.cleaner.transactions import CleanedTransactionMetadata
from storage.config import LogConfig
from storage.segment import (
    CLEANED_FILE_SUFFIX,
    LogSegment,
    log_file,
    offset_index_file,
    time_index_file,
    txn_index_file,
)
from storage.txn_index import AbortedTxn, TransactionIndex

__all__ = [
    "CleanJob",
    "CleanResult",
    "CleanedGroup",
    "CleanerStats",
    "LogCleaningAbortedError",
    "SegmentInfo",
    "WorkerIOError",
    "clean",
    "group_segments_by_size",
]

_INT32_MAX = 2147483647


class LogCleaningAbortedError(Exception):
    """The cleaning was stopped (the log changed under it, or the broker is stopping); the
    ``.cleaned`` files of the current group are removed."""


@dataclass(frozen=True)
class SegmentInfo:
    """A non-active segment as the job sees it: base offset, the next segment's base offset
    (its offsets are below it), bytes, index bytes, last-modified time in ms."""

    base_offset: int
    next_offset: int
    size: int
    index_bytes: int
    time_index_bytes: int
    last_modified_ms: int


@dataclass(frozen=True)
class CleanJob:
    """Everything a worker needs to clean one log; picklable."""

    directory: str
    name: str
    config: LogConfig
    segments: tuple[SegmentInfo, ...]  # the log's segments below the first uncleanable offset
    first_dirty_offset: int
    first_uncleanable_offset: int
    # producer id -> (offset of its last data record or None, producer epoch): the batch holding
    # it (or its last marker) stays even when empty (Kafka's lastRecordsOfActiveProducers)
    active_producers: dict[int, tuple[int | None, int]]
    aborted_txns: tuple[AbortedTxn, ...]
    now_ms: int
    map_memory: int
    io_buffer_size: int
    load_factor: float = 0.9


@dataclass
class CleanerStats:
    """What a cleaning read and wrote (Kafka's CleanerStats)."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    messages_read: int = 0
    bytes_written: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    start_s: float = field(default_factory=time.monotonic)
    map_done_s: float = 0.0
    end_s: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return max(self.end_s - self.start_s, 1e-9)


@dataclass(frozen=True)
class CleanedGroup:
    """One group written to ``<base>.log.cleaned``: which segments it replaces."""

    base_offset: int
    replaces: tuple[int, ...]  # base offsets of the segments it replaces
    size_in: int
    size_out: int


@dataclass(frozen=True)
class WorkerIOError:
    """An I/O error of a cleaning as the worker process reports it (storage.cleaner.worker):
    what the broker needs to rebuild the OSError (errno, strerror, the file) and take the log's
    dir offline -- not a traceback, since a full disk is no bug. Defined here, not in the
    worker's ``__main__``, so that the broker can unpickle it."""

    errno: int | None
    strerror: str | None
    filename: str | None

    @classmethod
    def of(cls, e: OSError) -> WorkerIOError:
        return cls(e.errno, e.strerror or str(e), None if e.filename is None else str(e.filename))

    def to_os_error(self) -> OSError:
        """The OSError again (its subclass by errno: FileNotFoundError for ENOENT ...)."""
        if self.errno is None:
            return OSError(self.strerror)
        if self.filename is None:
            return OSError(self.errno, self.strerror)
        return OSError(self.errno, self.strerror, self.filename)


@dataclass(frozen=True)
class CleanResult:
    end_offset: int  # the first offset not cleaned: the next cleaning's first dirty offset
    groups: tuple[CleanedGroup, ...]
    stats: CleanerStats


def _named(e: OSError, path: Path) -> OSError:
    """``e`` with ``path`` as its file name when it has none (a write or pread on a descriptor):
    the broker's one error line for a failed cleaning says which file failed."""
    if e.filename is not None or e.errno is None:
        return e
    named = OSError(e.errno, e.strerror, str(path))
    named.__cause__ = e
    return named


def _read_batches(
    fd: int, path: Path, start: int, end: int, buffer_size: int, check_done: Callable[[int], None]
) -> Iterator[tuple[memoryview, BatchHeader]]:
    """(batch bytes, header) of each whole batch in [start, end) of the file ``fd`` (``path``),
    read in chunks of ``buffer_size`` bytes (a chunk is grown to hold a larger batch)."""
    pos = start
    while pos < end:
        try:
            chunk = os.pread(fd, min(buffer_size, end - pos), pos)
        except OSError as e:
            raise _named(e, path) from e
        check_done(len(chunk))
        if len(chunk) < LOG_OVERHEAD:
            raise RecordsError(f"segment ends at {pos + len(chunk)}, inside a batch")
        mv = memoryview(chunk)
        off = 0
        while len(chunk) - off >= HEADER_SIZE:
            length = HEADER_STRUCT.unpack_from(chunk, off)[1]
            if length < MIN_BATCH_LENGTH:
                raise RecordsError(f"batch at position {pos + off} has length {length}")
            size = length + LOG_OVERHEAD
            if off + size > len(chunk):
                break
            yield mv[off : off + size], read_header(chunk, off)
            off += size
        if off == 0:  # one batch larger than the chunk: read it whole
            length = HEADER_STRUCT.unpack_from(chunk, 0)[1] if len(chunk) >= HEADER_SIZE else -1
            if length < MIN_BATCH_LENGTH or pos + length + LOG_OVERHEAD > end:
                raise RecordsError(f"batch at position {pos} does not fit its segment")
            buffer_size = length + LOG_OVERHEAD
            continue
        pos += off


class _Cleaner:
    def __init__(self, job: CleanJob, check_done: Callable[[int], None]) -> None:
        self.job = job
        self.dir = Path(job.directory)
        self.check_done = check_done
        self.stats = CleanerStats()
        self.map = OffsetMap(job.map_memory)
        self.max_map_size = max(1, int(self.map.slots * job.load_factor))
        self.max_uncompressed = max(job.config.max_message_bytes, job.io_buffer_size) * 64

    def _open(self, base: int) -> int:
        try:
            return os.open(log_file(self.dir, base), os.O_RDONLY)
        except FileNotFoundError:
            raise LogCleaningAbortedError(f"segment {base} of {self.job.name} is gone") from None

    # -- 1. the offset map ------------------------------------------------------------------

    def build_offset_map(self) -> None:
        job = self.job
        start, end = job.first_dirty_offset, job.first_uncleanable_offset
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(
            [t for t in job.aborted_txns if t.last_offset >= start and t.first_offset < end]
        )
        for seg in job.segments:
            if seg.next_offset <= start or seg.base_offset >= end:
                continue
            if self._map_segment(seg, start, end, txn):
                break

    def _map_segment(self, seg: SegmentInfo, start: int, end: int, txn: CleanedTransactionMetadata) -> bool:
        """Add the keys of ``seg`` in [start, end) to the map; True when the map filled up."""
        m = self.map
        stats = self.stats
        fd = self._open(seg.base_offset)
        try:
            for batch, h in _read_batches(
                fd, log_file(self.dir, seg.base_offset), 0, seg.size, self.job.io_buffer_size, self.check_done
            ):
                last = h.base_offset + h.last_offset_delta
                stats.map_bytes_read += len(batch)
                if last < start:
                    continue
                if h.base_offset >= end:
                    return False
                if h.attributes & CONTROL_MASK:
                    data = batch_records_data(batch, h, self.max_uncompressed)
                    txn.on_control_batch_read(h, control_type(data, record_spans(data, h.records_count)))
                    stats.map_messages_read += 1
                elif txn.on_batch_read(h):
                    stats.map_messages_read += h.records_count
                else:
                    data = batch_records_data(batch, h, self.max_uncompressed)
                    base = h.base_offset
                    limit = self.max_map_size
                    for s in record_spans(data, h.records_count):
                        offset = base + s.offset_delta
                        if s.key is not None and offset >= start:
                            if m.size >= limit:
                                return True
                            m.put(s.key, offset)
                        stats.map_messages_read += 1
                if last >= start:
                    m.update_latest_offset(last)
        finally:
            os.close(fd)
        return False

    # -- 3. cleaning one group --------------------------------------------------------------

    def clean_group(self, group: list[SegmentInfo], txn: CleanedTransactionMetadata) -> CleanedGroup:
        job = self.job
        base = group[0].base_offset
        paths = [
            f(self.dir, base, CLEANED_FILE_SUFFIX)
            for f in (log_file, offset_index_file, time_index_file, txn_index_file)
        ]
        for p in paths:
            p.unlink(missing_ok=True)
        txn_index = TransactionIndex(base, paths[3])
        txn.cleaned_index = txn_index
        size_in = size_out = 0
        try:
            with open(paths[0], "wb", buffering=1 << 20) as out:
                for seg in group:
                    txn.add_aborted_transactions(
                        [t for t in job.aborted_txns if t.last_offset >= seg.base_offset and t.first_offset < seg.next_offset]
                    )
                    size_in += seg.size
                    size_out += self._clean_into(seg, out, txn)
                out.flush()
                os.fsync(out.fileno())
            txn_index.flush()
            txn_index.close()
            cleaned = LogSegment.open(
                self.dir, base, job.config, file_already_exists=True, suffix=CLEANED_FILE_SUFFIX
            )
            try:
                dropped = cleaned.recover(job.config.max_message_bytes)
                if dropped:
                    raise RecordsError(f"the cleaned segment {paths[0]} failed its own check ({dropped} bytes)")
                cleaned.flush()
                cleaned.set_last_modified(group[-1].last_modified_ms)
            finally:
                cleaned.close_handlers()
        except OSError as e:
            # an I/O error takes the log's dir offline (storage.cleaner.log_cleaner): its files
            # are not touched again -- the next load removes these ``.cleaned`` files (Kafka
            # deletes a cleaned segment only when the cleaning is aborted)
            with contextlib.suppress(OSError):
                txn_index.close()
            raise _named(e, paths[0]) from e
        except BaseException:
            txn_index.close()
            for p in paths:
                p.unlink(missing_ok=True)
            raise
        return CleanedGroup(base, tuple(s.base_offset for s in group), size_in, size_out)

    def _clean_into(self, seg: SegmentInfo, out: object, txn: CleanedTransactionMetadata) -> int:
        """Write what ``seg`` retains to the file ``out``; the bytes written."""
        job = self.job
        m = self.map
        stats = self.stats
        now = job.now_ms
        latest = m.latest_offset
        horizon = now + job.config.delete_retention_ms
        upper_round = job.first_uncleanable_offset
        actives = job.active_producers
        write = out.write  # type: ignore[attr-defined]
        written = 0
        fd = self._open(seg.base_offset)
        try:
            for batch, h in _read_batches(
                fd, log_file(self.dir, seg.base_offset), 0, seg.size, job.io_buffer_size, self.check_done
            ):
                stats.bytes_read += len(batch)
                is_control = bool(h.attributes & CONTROL_MASK)
                data = b""
                spans: list[RecordSpan] = []
                if is_control or h.records_count:
                    data = batch_records_data(batch, h, self.max_uncompressed)
                    spans = record_spans(data, h.records_count)
                stats.messages_read += len(spans)
                has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
                if is_control:
                    can_discard = txn.on_control_batch_read(h, control_type(data, spans))
                    discard_records = can_discard and has_horizon and h.base_timestamp <= now
                    marker_needs_horizon = can_discard
                else:
                    discard_records = txn.on_batch_read(h)
                    marker_needs_horizon = False
                last = h.base_offset + h.last_offset_delta
                pid = h.producer_id
                retain_empty = False
                if pid != NO_PRODUCER_ID and pid in actives:
                    last_data, epoch = actives[pid]
                    retain_empty = (
                        last == last_data if last_data is not None else is_control and h.producer_epoch == epoch
                    )
                if not retain_empty and last + 1 == upper_round:
                    retain_empty = True  # keep the round's last offset (Kafka: KAFKA-13773)
                if discard_records:
                    retained: list[RecordSpan] = []
                elif is_control:
                    retained = spans
                else:
                    retained = []
                    base = h.base_offset
                    retain_deletes = not has_horizon or now < h.base_timestamp
                    for s in spans:
                        offset = base + s.offset_delta
                        if offset > latest:
                            retained.append(s)
                        elif s.key is None:
                            stats.invalid_messages += 1
                        elif offset >= m.get(s.key) and (s.has_value or retain_deletes):
                            retained.append(s)
                if retained:
                    tombstones = not is_control and any(not s.has_value for s in retained)
                    needs_horizon = (tombstones or marker_needs_horizon) and not has_horizon
                    if len(retained) == len(spans) and not needs_horizon:
                        new = batch
                    else:
                        new = rebuild_batch(h, data, retained, delete_horizon_ms=horizon if needs_horizon else None)
                elif retain_empty:
                    new = empty_batch(h)
                else:
                    continue
                write(new)
                written += len(new)
                stats.messages_written += len(retained)
        finally:
            os.close(fd)
        stats.bytes_written += written
        return written


def group_segments_by_size(
    segments: list[SegmentInfo], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[SegmentInfo]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose total log bytes fit
    ``max_size``, whose index bytes fit ``max_index_size`` and whose offsets stay within
    2**31 - 1 of the group's base (estimated by the next segment's base, or the first
    uncleanable offset for the last)."""
    grouped: list[list[SegmentInfo]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size, index_size, time_size = segs[i].size, segs[i].index_bytes, segs[i].time_index_bytes
        i += 1
        while i < len(segs):
            s = segs[i]
            last_offset = (segs[i + 1].base_offset if i + 1 < len(segs) else first_uncleanable_offset) - 1
            if not (
                log_size + s.size <= max_size
                and index_size + s.index_bytes <= max_index_size
                and time_size + s.time_index_bytes <= max_index_size
                and (s.size == 0 or last_offset - group[0].base_offset <= _INT32_MAX)
            ):
                break
            group.append(s)
            log_size += s.size
            index_size += s.index_bytes
            time_size += s.time_index_bytes
            i += 1
        grouped.append(group)
    return grouped


def clean(
    job: CleanJob,
    on_group: Callable[[CleanedGroup], bool],
    check_done: Callable[[int], None] = lambda _n: None,
) -> CleanResult:
    """One cleaning of ``job`` (see the module docstring). ``on_group`` gets every cleaned group
    and answers whether to go on; when it says no, the cleaning stops there with
    LogCleaningAbortedError."""
    c = _Cleaner(job, check_done)
    c.build_offset_map()
    stats = c.stats
    stats.map_done_s = time.monotonic()
    end_offset = c.map.latest_offset + 1
    if end_offset <= job.first_dirty_offset:  # nothing with a key in the dirty range
        end_offset = job.first_uncleanable_offset
    segments = [s for s in job.segments if s.base_offset < end_offset]
    groups = group_segments_by_size(
        segments, job.config.segment_bytes, job.config.segment_index_bytes, job.first_uncleanable_offset
    )
    txn = CleanedTransactionMetadata()
    done: list[CleanedGroup] = []
    for group in groups:
        cleaned = c.clean_group(group, txn)
        done.append(cleaned)
        if not on_group(cleaned):
            raise LogCleaningAbortedError(f"cleaning of {job.name} stopped after group {cleaned.base_offset}")
    stats.buffer_utilization = c.map.utilization
    stats.end_s = time.monotonic()
    return CleanResult(end_offset, tuple(done), stats)
