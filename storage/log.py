"""Log: one partition's log -- an ordered list of LogSegments in ``<log.dir>/<topic>-<partition>/``.

On disk (Kafka's layout, byte for byte; see storage.segment and storage.index)::

    <topic>-<partition>/
        00000000000000000000.log         batches with offsets [0, next segment's base)
        00000000000000000000.index
        00000000000000000000.timeindex
        00000000000000012345.log         ... the last segment is the active one
        ...
        00000000000000012345.snapshot    producer state as of that offset (storage.producer_state)
        leader-epoch-checkpoint          LeaderEpochFileCache (storage.leader_epoch)

Invariants:

* Segments are ordered by base offset; every batch of a segment has offsets in [its base, the
  next segment's base); only the last (active) segment is appended to.
* log_start_offset <= high_watermark <= log_end_offset; the first segment's base offset <=
  log_start_offset; recovery_point <= log_end_offset and everything below the recovery point
  has been fsynced.
* Bytes are appended exactly as received (the leader rewrites only baseOffset and
  partitionLeaderEpoch in place -- outside the CRC -- plus maxTimestamp and the CRC for
  LogAppendTime); no record is decoded on the append or read path, except for compacted
  topics (keys must be present), non-default timestamp bounds, a producer's batch that says
  LogAppendTime (storage.log_validator.check_records: a scan of the record varints, decoding
  only a batch with a bad record), and recompression when compression.type names a codec.
* Segments leave the log by being renamed ``.deleted``; their files are removed
  ``file.delete.delay.ms`` later by :meth:`Log.delete_expired_files`, so file slices handed out by
  earlier reads stay readable meanwhile.
* Producer state (Kafka's ``UnifiedLog`` + ``ProducerStateManager``): only batches with a
  producer id touch it. A client batch is checked against it before anything is written -- a
  retry of one of its producer's last 5 batches is answered with that batch's offsets and not
  written; a sequence gap or a stale epoch raises the storage.producer_state errors. After every
  append the state's map end offset is the log end offset. Snapshots are written at every roll
  (the new segment's base offset), at close (the log end offset) and after loading or
  truncating; snapshots below the log start offset are deleted when it moves. The last stable
  offset is the first offset of the earliest undecided transaction, bounded by the high
  watermark.

Who may call, and threads: one asyncio task owns a Log and calls it on the event loop thread.
Blocking work may be moved to an executor: :meth:`Log.flush` (fsync, and the leader-epoch
checkpoint the append path only marks dirty; it never waits for the log's lock, so appends go on
meanwhile), :meth:`Log.roll` (the broker asks :meth:`Log.roll_due` before an append and rolls in
an executor, its appends to the partition waiting meanwhile), :meth:`Log.delete_old_segments`,
:meth:`Log.delete_expired_files` (retention; renames and unlinks),
:meth:`Log.remove_expired_producers` and a follower's :meth:`Log.truncate_to` /
:meth:`Log.truncate_fully_and_start_at` (``Partition`` runs them; they write
leader-epoch-checkpoint at once, while the appends, a follower's too, only mark it dirty). To
make that safe, every method that changes segments or offsets holds the log's lock
(uncontended on the append path), and the segment list is replaced, never mutated, so reads
take one consistent snapshot of it without locking. Reads themselves stay on the loop. There are no threads, timers or asyncio inside
storage: the broker's scheduler drives time-based work by calling :meth:`Log.flush_due` /
:meth:`Log.flush`, :meth:`Log.delete_old_segments` (log.retention.check.interval.ms) and
:meth:`Log.delete_expired_files` (:attr:`Log.next_file_deletion_ms` says when).

I/O errors: every method that writes (appends, roll, flush, truncation, retention, the
leader-epoch checkpoint, the log start offset) turns an OSError into KafkaStorageError and
reports the log's dir to its LogDirFailureChannel (storage.log_dir_failure_channel), which
takes the dir offline; from then on those methods refuse at once (Kafka's
maybeHandleIOException). The broker stops the dir's partitions; the Log only says so.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import os
import random
import shutil
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from crc32c import crc32c

from protocol.records import (
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    RecordsError,
    read_header,
    set_max_timestamp_and_type,
)
from storage import log_validator as _v
from storage.checkpoints import fsync_dir
from storage.config import LONG_MAX, LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from storage.file_records import EMPTY_RECORDS, FetchDataInfo, LogOffsetMetadata
from storage.flush_stats import LOG_FLUSH_STATS
from storage.leader_epoch import LeaderEpochFileCache
from storage.log_dir_failure_channel import LogDirFailureChannel, describe_io_error, io_error_of
from storage.log_loader import load_log, rebuild_producer_state
from storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    ProducerBatch,
    ProducerStateAnalysis,
    ProducerStateManager,
    producer_batches,
)
from storage.segment import (
    CLEANED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    LogSegment,
    log_file,
    offset_index_file,
    time_index_file,
    txn_index_file,
)
from storage.txn_index import AbortedTxn
from storage.verification_guard import SENTINEL, VerificationGuard

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendOrigin",
    "Log",
    "LogAppendInfo",
    "OffsetForTimestamp",
]

log = logging.getLogger("odradek.storage.log")

# ListOffsets special timestamps (Kafka's ListOffsetsRequest constants)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

_unpack_header = HEADER_STRUCT.unpack_from
_unpack_int32 = struct.Struct(">i").unpack_from
# attributes a client batch is looked at more closely for: control (refused), LogAppendTime
# (Kafka checks its records: a producer may not set it)
_CONTROL_OR_APPEND_TIME = CONTROL_MASK | TIMESTAMP_TYPE_MASK
_pack_offset_length_epoch = struct.Struct(">qii").pack_into  # baseOffset, batchLength, epoch


@dataclass(slots=True)
class LogAppendInfo:
    """The outcome of an append. Offsets are -1 when the buffer held no complete batch. For a
    retried idempotent batch that was not written again, first/last offset are those of the
    original batch and log_append_time its timestamp (as Kafka answers); the other fields
    describe the retry."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    valid_bytes: int
    batch_count: int


class OffsetForTimestamp(NamedTuple):
    """Answer of :meth:`Log.offset_for_timestamp`; leader_epoch is -1 when unknown."""

    offset: int
    timestamp: int
    leader_epoch: int


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    """Run ``method`` holding the log's lock (it changes the log's structure or offsets)."""

    @functools.wraps(method)
    def wrapper(self: Log, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _handles_io_errors(what: str) -> Callable[[_F], _F]:
    """Kafka's UnifiedLog.maybeHandleIOException around a log operation that writes: an I/O
    error (an OSError, or a StorageError raised from one: a full disk, a failing device) reports
    the log's dir to its LogDirFailureChannel -- which takes the dir offline, once -- and is
    raised as KafkaStorageError (KAFKA_STORAGE_ERROR) saying what failed where; other errors pass
    unchanged. A log whose dir is offline already refuses the operation at once, as Kafka's
    does: its files are not to be touched again until the broker restarts."""

    def decorate(method: _F) -> _F:
        @functools.wraps(method)
        def wrapper(self: Log, *args: Any, **kwargs: Any) -> Any:
            channel = self.log_dir_failure_channel
            if channel is not None and channel.any_offline and channel.has_offline_log_dir(self.dir.parent):
                raise KafkaStorageError(
                    f"The log dir {self.dir.parent} is already offline due to a previous IO exception.")
            try:
                return method(self, *args, **kwargs)
            except KafkaStorageError:  # a nested operation's, reported already
                raise
            except Exception as e:
                cause = io_error_of(e)
                if cause is None:
                    raise
                message = f"Error while {what} {self.name} in dir {self.dir.parent}"
                if channel is not None:
                    channel.maybe_add_offline_log_dir(self.dir.parent, message, cause)
                raise KafkaStorageError(f"{message}: {describe_io_error(cause)}") from e

        return wrapper  # type: ignore[return-value]

    return decorate


def _producer_batches(
    name: str, mv: memoryview, positions: list[int]
) -> list[BatchHeader | ProducerBatch]:
    """What the producer state needs of the batches at ``positions`` (offsets assigned): the
    header, and for a control batch also its transaction marker (InvalidRecordError when that
    is malformed, as Kafka's EndTransactionMarker.deserialize)."""
    out: list[BatchHeader | ProducerBatch] = []
    for pos in positions:
        h = read_header(mv, pos)
        if h.is_control:
            try:
                out.extend(producer_batches(mv[pos : pos + h.batch_length + LOG_OVERHEAD]))
            except RecordsError as e:
                raise InvalidRecordError(
                    f"Invalid control batch at offset {h.base_offset} in the append to {name}: {e}"
                ) from None
        else:
            out.append(h)
    return out


def _fsync_file(path: Path) -> None:
    """fsync ``path`` if it still exists (Kafka's ``Utils.flushFileIfExists``)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _writable_view(buf: bytes | bytearray | memoryview) -> memoryview:
    mv = memoryview(buf)
    if mv.readonly:
        mv = memoryview(bytearray(mv))
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


class Log:
    """One partition's log (see the module docstring). Create with :meth:`Log.open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        log_end_offset: int,
        high_watermark: int | None,
        time_ms: Callable[[], int],
        leader_epoch_cache: LeaderEpochFileCache | None,
        rng: random.Random,
        producer_state: ProducerStateManager,
    ) -> None:
        self.dir = directory
        self.name = directory.name
        self.config = config  # property: also derives the append settings
        self.leader_epoch_cache = leader_epoch_cache
        self._time_ms = time_ms
        self._rng = rng
        self._lock = threading.RLock()  # serialises everything that changes the log
        self._view: tuple[tuple[LogSegment, ...], list[int]] = ((), [])
        self._set_segments(segments)
        self.log_start_offset = log_start_offset
        self._log_end_offset = log_end_offset
        self._recovery_point = recovery_point
        hw = log_start_offset if high_watermark is None else high_watermark
        self._high_watermark = min(max(hw, log_start_offset), log_end_offset)
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._upper_cache: tuple[int, int, int] | None = None  # (offset, segment base, position)
        self._last_flush_ms = time_ms()
        self._pending_roll_flush: int | None = None
        self._flush_lock = threading.Lock()  # guards recovery point updates vs flush()
        self._truncations = 0  # bumped by every truncation; flush() checks it
        self._closed = False
        # held by periodic file work (LogManager's flush, checkpoint and retention tasks) and by
        # close() / delete(): once those return, no such work touches this log's files. Never
        # taken on the event loop; taken before the log's other locks.
        self._open_lock = threading.RLock()
        self._last_assigned_epoch: int | None = None  # skip the cache while the epoch is unchanged
        self._producer_state = producer_state
        self._first_unstable_offset: int | None = None  # Kafka's firstUnstableOffsetMetadata
        self._unflushed_snapshots: list[tuple[int, Path]] = []  # written at roll, fsynced by flush
        # where an I/O error of this log's writes is reported (set by the LogManager: its dir
        # goes offline); None for a log opened on its own (tools, tests)
        self.log_dir_failure_channel: LogDirFailureChannel | None = None
        self._on_high_watermark_updated()

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean_shutdown: bool = False,
        now: Callable[[], int] | None = None,
        high_watermark: int | None = None,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
        rng: random.Random | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Log:
        """Load (or create) the partition directory ``directory``.

        ``recovery_point`` and ``log_start_offset`` come from the log dir's checkpoint files;
        segments from the recovery point on are recovered unless ``clean_shutdown``. ``now``
        returns wall-clock milliseconds (injectable for tests). ``high_watermark`` (from
        replication-offset-checkpoint) is clamped to [log start, log end]. Without a
        ``leader_epoch_cache`` one backed by ``<dir>/leader-epoch-checkpoint`` is used. The
        producer state is rebuilt from the ``.snapshot`` files and the log (see
        storage.log_loader); idle producers are forgotten after ``producer_id_expiration_ms``
        (producer.id.expiration.ms) by :meth:`remove_expired_producers`.
        Blocking; call at startup or from an executor.
        """
        d = Path(directory)
        time_ms = now or _wall_ms
        rng = rng or random.Random()
        d.mkdir(parents=True, exist_ok=True)
        if leader_epoch_cache is None:
            leader_epoch_cache = LeaderEpochFileCache.for_partition_dir(d, topic_partition=d.name)
        producer_state = ProducerStateManager(
            d, topic_partition=d.name, producer_id_expiration_ms=producer_id_expiration_ms
        )
        loaded = load_log(
            d,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset or 0,
            clean_shutdown=clean_shutdown,
            time_ms=time_ms,
            leader_epoch_cache=leader_epoch_cache,
            rng=rng,
            producer_state=producer_state,
        )
        self = cls(
            d,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            recovery_point=loaded.recovery_point,
            log_end_offset=loaded.log_end_offset,
            high_watermark=high_watermark,
            time_ms=time_ms,
            leader_epoch_cache=leader_epoch_cache,
            rng=rng,
            producer_state=producer_state,
        )
        due = time_ms() + config.file_delete_delay_ms
        self._pending_deletes.extend((due, seg) for seg in loaded.to_delete)
        log.info(
            "Loaded log %s: %d segments, log start offset %d, log end offset %d, recovery point %d",
            self.name,
            len(self._segments),
            self.log_start_offset,
            self._log_end_offset,
            self._recovery_point,
        )
        return self

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        append_time = config.log_append_time
        self._decode_on_append = config.compact or (
            not append_time
            and (
                config.timestamp_before_max_ms != LONG_MAX
                or config.timestamp_after_max_ms != LONG_MAX
            )
        )
        self._append_time = append_time
        self._target_codec = config.compression_codec

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (index sizes and jitter apply to segments rolled later)."""
        self.config = config

    # -- offsets -------------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        """The leader epoch of the last batch (-1: none): what a follower's fetch names as its
        last fetched epoch, and ListOffsets' epoch for the latest offset."""
        cache = self.leader_epoch_cache
        latest = cache.latest_epoch if cache is not None else None
        return -1 if latest is None else latest

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (LEO)."""
        return self._log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        seg = self._segments[-1]
        return LogOffsetMetadata(self._log_end_offset, seg.base_offset, seg.size)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark, clamped to [log start offset, log end offset]; returns it."""
        hw = min(max(hw, self.log_start_offset), self._log_end_offset)
        if hw != self._high_watermark:
            self._high_watermark = hw
            self._upper_cache = None
            if self._first_unstable_offset is not None:
                with self._lock:
                    self._on_high_watermark_updated()
        return hw

    def maybe_increment_high_watermark(self, hw: int) -> bool:
        """Raise the high watermark to ``hw`` (clamped to the LEO) if that is higher."""
        hw = min(hw, self._log_end_offset)
        if hw > self._high_watermark:
            self._high_watermark = hw
            if self._first_unstable_offset is not None:
                with self._lock:
                    self._on_high_watermark_updated()
            return True
        return False

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset (LSO): the first offset of the earliest transaction that is
        undecided (or decided by a marker not yet below the high watermark), if that is below
        the high watermark; else the high watermark (always so without transactions)."""
        fuo = self._first_unstable_offset
        hw = self._high_watermark
        return fuo if fuo is not None and fuo < hw else hw

    @property
    def first_unstable_offset(self) -> int | None:
        """Kafka's firstUnstableOffset (not below the log start offset), or None."""
        return self._first_unstable_offset

    @property
    def producer_state(self) -> ProducerStateManager:
        """The partition's ProducerStateManager; only the log may change it (under its lock)."""
        return self._producer_state

    def _on_high_watermark_updated(self) -> None:
        """Kafka's updateHighWatermarkMetadata tail: transactions whose marker is now below the
        high watermark stop bounding the LSO. Call holding the lock (or before sharing)."""
        self._producer_state.on_high_watermark_updated(self._high_watermark)
        self._update_first_unstable_offset()

    def _update_first_unstable_offset(self) -> None:
        """Kafka's maybeIncrementFirstUnstableOffset: cache the producer state's first unstable
        offset, raised to the log start offset (its transaction start may have been deleted)."""
        fuo = self._producer_state.first_unstable_offset()
        if fuo is not None and fuo < self.log_start_offset:
            fuo = self.log_start_offset
        self._first_unstable_offset = fuo

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is on disk (fsynced)."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    # -- segments ------------------------------------------------------------------------------

    def _set_segments(self, segments: list[LogSegment] | tuple[LogSegment, ...]) -> None:
        """Publish a new segment list. The (segments, base offsets) pair is replaced as one
        object, never mutated, so a reader that took ``self._view`` once sees a consistent
        list even if a flush thread or a retention run changes the log meanwhile."""
        segs = tuple(segments)
        self._view = (segs, [s.base_offset for s in segs])
        self._upper_cache = None

    @property
    def _segments(self) -> tuple[LogSegment, ...]:
        return self._view[0]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view[0]

    @property
    def active_segment(self) -> LogSegment:
        return self._view[0][-1]

    @property
    def num_segments(self) -> int:
        return len(self._view[0])

    @property
    def size(self) -> int:
        """Bytes in all live segments."""
        return sum(s.size for s in self._view[0])

    @staticmethod
    def _floor(bases: list[int], offset: int) -> int:
        """Index of the segment with the largest base offset <= ``offset``; -1 if none."""
        return bisect.bisect_right(bases, offset) - 1

    def segment_for(self, offset: int) -> LogSegment | None:
        segs, bases = self._view
        i = self._floor(bases, offset)
        return segs[i] if i >= 0 else None

    def log_segments(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset)."""
        if from_offset >= to_offset:
            return []
        segs, bases = self._view
        i = max(0, self._floor(bases, from_offset))
        j = bisect.bisect_left(bases, to_offset)
        return list(segs[i:j])

    # -- append --------------------------------------------------------------------------------

    @_handles_io_errors("appending records to")
    def append_as_leader(
        self,
        buf: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int | None = None,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Validate the batches in ``buf``, assign offsets from the log end offset and
        ``leader_epoch`` (rewriting the buffer in place; a read-only buffer is copied once),
        and append them.

        Per batch: length, magic 2, CRC, size <= max.message.bytes; from clients also base
        offset 0, consistent offset range and record count, no control batch, a sequence for
        idempotent batches. A trailing incomplete batch is ignored, as Kafka does. Raises a
        :mod:`storage.errors` exception (carrying the Kafka error) and appends nothing when a
        batch fails.

        Batches with a producer id are then checked against the producer state (Kafka's
        ``analyzeAndValidateProducerState``): a client retry of one of the producer's last 5
        batches is not written and is answered with the original offsets (see LogAppendInfo);
        OutOfOrderSequenceError (45), InvalidProducerEpochError (47), InvalidTxnStateError (48)
        and TransactionCoordinatorFencedError (52) from storage.producer_state refuse the append.
        ``verification_guard`` (KIP-890; None when the caller does not verify): what
        :meth:`maybe_start_transaction_verification` returned for the batch's producer.
        """
        with self._lock:  # inline rather than @_locked: this is the hot path
            if now_ms is None:
                now_ms = self._time_ms()
            cfg = self._config
            mv = memoryview(buf)
            if mv.readonly or mv.format != "B" or mv.ndim != 1:
                mv = _writable_view(mv)
            target_codec = self._target_codec
            if target_codec is not None and _v.needs_recompression(mv, target_codec):
                mv = _v.recompress(self.name, self._config, mv, target_codec)
            n = mv.nbytes
            first_offset = next_offset = self._log_end_offset
            max_ts = -1
            offset_of_max = -1
            record_count = 0
            batches = 0
            max_msg = cfg.max_message_bytes
            client = origin == AppendOrigin.CLIENT
            append_time = self._append_time
            check_records = self._decode_on_append
            unpack_int32 = _unpack_int32
            unpack_header = _unpack_header
            pack = _pack_offset_length_epoch
            pids: list[int] = []  # positions of the batches with a producer id
            pos = 0
            while n - pos >= LOG_OVERHEAD:
                if n - pos >= HEADER_SIZE:
                    h = unpack_header(mv, pos)
                    length = h[1]
                else:
                    h = None
                    (length,) = unpack_int32(mv, pos + 8)
                if length < MIN_BATCH_LENGTH:
                    _v.bad_length(self.name, pos, length)
                size = length + LOG_OVERHEAD
                if size > n - pos or h is None:
                    break  # trailing incomplete batch: ignored, as Kafka does
                if h[3] != 2 or size > max_msg:
                    _v.bad_batch(self.name, h[3], size, max_msg)
                crc = crc32c(mv[pos + 21 : pos + size])
                if crc != h[4]:
                    raise CorruptRecordError(
                        f"Record batch is corrupt (stored crc = {h[4]}, computed crc = {crc})"
                    )
                lod = h[6]
                count = h[12]
                if client:
                    if (
                        h[0] != 0
                        or lod + 1 != count
                        or count <= 0
                        or h[5] & _CONTROL_OR_APPEND_TIME
                        or (h[9] >= 0 and h[11] < 0)
                    ):
                        _v.check_client_batch(self.name, h, lod, count)
                        if not check_records:  # the batch says LogAppendTime
                            _v.check_records(self.name, cfg, mv, pos, size, now_ms)
                elif lod < 0 or count < 0 or count > lod + 1:
                    raise CorruptRecordError(
                        f"Record batch in the append to {self.name} has record count {count} "
                        f"inconsistent with last offset delta {lod}"
                    )
                if check_records:
                    _v.check_records(self.name, self._config, mv, pos, size, now_ms)
                pack(mv, pos, next_offset, length, leader_epoch)
                last = next_offset + lod
                if append_time:
                    set_max_timestamp_and_type(mv, pos, now_ms)
                elif h[8] > max_ts:
                    max_ts = h[8]
                    offset_of_max = last
                if h[9] >= 0:
                    pids.append(pos)
                record_count += count
                batches += 1
                next_offset = last + 1
                pos += size
            if batches == 0:
                return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0, 0, 0)
            if pos > cfg.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"The size of the record batch ({pos}) exceeds the maximum configured segment "
                    f"size of {cfg.segment_bytes}."
                )
            if append_time:
                max_ts = now_ms
                offset_of_max = first_offset
            last_offset = next_offset - 1
            analysis = None
            if pids:
                analysis = self._producer_state.analyze_and_validate(
                    _producer_batches(self.name, mv, pids), origin, verification_guard
                )
                duplicate = analysis.duplicate
                if duplicate is not None:
                    log.debug(
                        "Duplicate batch in the append to %s: answering with offsets [%d, %d] "
                        "of the original",
                        self.name,
                        duplicate.first_offset,
                        duplicate.last_offset,
                    )
                    return LogAppendInfo(
                        duplicate.first_offset,
                        duplicate.last_offset,
                        max_ts,
                        offset_of_max,
                        duplicate.timestamp,
                        self.log_start_offset,
                        record_count,
                        pos,
                        batches,
                    )
            seg = self._segments[-1]
            if seg.should_roll(cfg.segment_bytes, cfg.segment_ms, max_ts, last_offset, pos, now_ms):
                seg = self._roll_for_append(seg, first_offset)
            if analysis is None:
                seg.append(last_offset, max_ts, offset_of_max, mv if pos == n else mv[:pos])
                self._producer_state.update_map_end_offset(next_offset)
            else:
                self._append_with_producer_state(
                    seg, analysis, first_offset, last_offset, max_ts, offset_of_max, mv if pos == n else mv[:pos]
                )
            if leader_epoch != self._last_assigned_epoch:
                # before the LEO moves: a concurrent flush() that syncs these offsets then also
                # writes the epoch (it is only marked dirty here) before the recovery point passes it
                self._assign_epoch(leader_epoch, first_offset)
            self._log_end_offset = next_offset
            return LogAppendInfo(
                first_offset,
                last_offset,
                max_ts,
                offset_of_max,
                now_ms if append_time else -1,
                self.log_start_offset,
                record_count,
                pos,
                batches,
            )

    @_locked
    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int) -> VerificationGuard:
        """Kafka's UnifiedLog.maybeStartTransactionVerification: SENTINEL when the producer has
        an ongoing transaction here (nothing to verify), else the guard of its verification entry
        (created if needed) that the append must carry once the coordinator confirmed."""
        if self._producer_state.has_ongoing_transaction(producer_id):
            return SENTINEL
        return self._producer_state.maybe_create_verification_state_entry(
            producer_id, sequence, epoch, self._time_ms()).verification_guard

    def _append_with_producer_state(
        self,
        seg: LogSegment,
        analysis: ProducerStateAnalysis,
        first_offset: int,
        last_offset: int,
        max_ts: int,
        offset_of_max: int,
        records: memoryview,
    ) -> None:
        """Append batches with producer ids to ``seg`` all-or-nothing: index the aborted
        transactions they complete (``.txnindex``), write the batches, then commit their producer
        state (memory only) and move the first unstable offset. Either write can fail (a full
        disk); the index entries come first because they can be computed before anything
        changes, and a failure of the batch write takes them back -- so a failed append leaves
        the segment, its indexes, the producer state and the log end offset as they were, and a
        retry is neither a duplicate nor missing an index entry. Raises StorageError."""
        aborted = [
            AbortedTxn.of(txn, lso)
            for txn, lso in self._producer_state.completed_transactions(analysis)
            if txn.is_aborted
        ]
        txn_index = seg.txn_index
        indexed = 0
        try:
            for entry in aborted:
                txn_index.append(entry)
                indexed += 1
            seg.append(last_offset, max_ts, offset_of_max, records)
        except BaseException as e:
            if indexed:
                try:
                    txn_index.truncate_to(first_offset)
                except OSError as undo:
                    log.error("Could not take back the aborted transactions indexed in %s from "
                              "offset %d after a failed append: %s", txn_index.path, first_offset, undo)
            if isinstance(e, OSError):
                raise StorageError(
                    f"Error while indexing an aborted transaction of {self.name} in "
                    f"{txn_index.path}: {e}"
                ) from e
            raise
        self._producer_state.apply_append(analysis, last_offset + 1)
        self._update_first_unstable_offset()

    @_handles_io_errors("assigning an epoch start offset of")
    @_locked
    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Kafka's UnifiedLog.maybeAssignEpochStartOffset: a broker that becomes leader records
        where its epoch starts (its log end offset) before any append, so OffsetForLeaderEpoch
        answers for the new epoch and the ones before it at once (written by the next flush)."""
        self._assign_epoch(leader_epoch, start_offset)

    def _assign_epoch(self, leader_epoch: int, start_offset: int) -> None:
        cache = self.leader_epoch_cache
        if cache is not None and leader_epoch >= 0:
            cache.assign(leader_epoch, start_offset, flush=False)  # written by flush()
        self._last_assigned_epoch = leader_epoch

    @_handles_io_errors("appending records as a follower to")
    @_locked
    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches whose offsets the leader assigned (replication). Checks length,
        magic, CRC and that offsets increase and start at or after the log end offset; no size
        limit (the leader accepted them). Leader epochs of the batches go to the epoch cache.
        Batches with a producer id update the producer state without sequence or duplicate
        checks (origin REPLICATION)."""
        mv = memoryview(buf)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        n = mv.nbytes
        first_offset = -1
        prev_last = -1
        monotonic = True
        max_ts = -1
        offset_of_max = -1
        record_count = 0
        batches = 0
        epochs: list[tuple[int, int]] = []
        lasts: list[int] = []
        pids: list[int] = []
        pos = 0
        while n - pos >= LOG_OVERHEAD:
            (length,) = _unpack_int32(mv, pos + 8)
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"Record batch at position {pos} in the append to {self.name} has size "
                    f"{length + LOG_OVERHEAD}, smaller than the minimum {MIN_BATCH_LENGTH + LOG_OVERHEAD}"
                )
            size = length + LOG_OVERHEAD
            if size > n - pos:
                break
            h = _unpack_header(mv, pos)
            if h[3] != 2:
                raise CorruptRecordError(f"Invalid magic found in record: {h[3]}")
            crc = crc32c(mv[pos + 21 : pos + size])
            if crc != h[4]:
                raise CorruptRecordError(
                    f"Record batch is corrupt (stored crc = {h[4]}, computed crc = {crc})"
                )
            base, lod, count = h[0], h[6], h[12]
            if lod < 0 or count < 0 or count > lod + 1:
                raise CorruptRecordError(
                    f"Record batch in the append to {self.name} has record count {count} "
                    f"inconsistent with last offset delta {lod}"
                )
            last = base + lod
            if batches == 0:
                first_offset = base
            elif base <= prev_last:
                monotonic = False
            prev_last = last
            lasts.append(last)
            if h[8] > max_ts:
                max_ts = h[8]
                offset_of_max = last
            if h[2] >= 0:
                epochs.append((h[2], base))
            if h[9] >= 0:
                pids.append(pos)
            record_count += count
            batches += 1
            pos += size
        if batches == 0:
            return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0, 0, 0)
        if not monotonic:
            raise OffsetsOutOfOrderError(
                f"Out of order offsets found in append to {self.name}: {lasts[:10]}"
            )
        if first_offset < self._log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {self.name}. First offset {first_offset} is "
                f"less than the next offset {self._log_end_offset}. First 10 offsets in append: "
                f"{lasts[:10]}, last offset in append: {prev_last}. Log start offset = "
                f"{self.log_start_offset}",
                first_offset,
                prev_last,
            )
        if pos > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"The size of the record batch ({pos}) exceeds the maximum configured segment "
                f"size of {self.config.segment_bytes}."
            )
        analysis = None
        if pids:
            analysis = self._producer_state.analyze_and_validate(
                _producer_batches(self.name, mv, pids), AppendOrigin.REPLICATION
            )
        now_ms = self._time_ms()
        seg = self._maybe_roll(pos, max_ts, first_offset, prev_last, now_ms)
        if analysis is None:
            seg.append(prev_last, max_ts, offset_of_max, mv if pos == n else mv[:pos])
            self._producer_state.update_map_end_offset(prev_last + 1)
        else:
            self._append_with_producer_state(
                seg, analysis, first_offset, prev_last, max_ts, offset_of_max, mv if pos == n else mv[:pos]
            )
        cache = self.leader_epoch_cache
        self._last_assigned_epoch = None
        if cache is not None:
            # as the leader's appends: only marked dirty (no fsync on the event loop), before the
            # LEO moves, so a flush that syncs these offsets writes the epochs first and recovery
            # re-assigns them from the batches above the recovery point after a crash
            for epoch, base in epochs:
                latest = cache.latest_epoch
                if latest is None or epoch > latest:
                    cache.assign(epoch, base, flush=False)
        self._log_end_offset = prev_last + 1
        return LogAppendInfo(
            first_offset,
            prev_last,
            max_ts,
            offset_of_max,
            -1,
            self.log_start_offset,
            record_count,
            pos,
            batches,
        )

    # -- rolling -------------------------------------------------------------------------------

    def _maybe_roll(
        self, messages_size: int, max_ts: int, first_offset: int, last_offset: int, now_ms: int
    ) -> LogSegment:
        seg = self._segments[-1]
        cfg = self._config
        if seg.should_roll(
            cfg.segment_bytes, cfg.segment_ms, max_ts, last_offset, messages_size, now_ms
        ):
            return self._roll_for_append(seg, first_offset)
        return seg

    def _roll_for_append(self, seg: LogSegment, first_offset: int) -> LogSegment:
        log.debug(
            "Rolling new log segment of %s (log_size = %d/%d, offset_index_size = %d, "
            "time_index_size = %d)",
            self.name,
            seg.size,
            self._config.segment_bytes,
            seg.offset_index.entries,
            seg.time_index.entries,
        )
        return self.roll(first_offset)

    def roll_due(self, buf: bytes | bytearray | memoryview, now_ms: int) -> bool:
        """Whether appending ``buf`` would roll the active segment (cheap: no decoding, no file
        access once the segment's first timestamp is known). Why: a roll opens files, sizes and
        maps two preallocated indexes and writes a snapshot -- milliseconds of blocking file
        work -- so the broker asks this first and, when it says yes, runs :meth:`roll` in an
        executor before appending. The same four conditions as the append's (size, segment.ms by
        the batch's max timestamp, a full index, relative-offset overflow), judged from the first
        batch header (a produce request holds one batch); when they misjudge, the append still
        rolls inline."""
        seg = self._segments[-1]
        if seg.size == 0:  # rolling an empty segment helps nothing; the append decides
            return False
        n = len(buf)
        cfg = self._config
        max_ts, last_delta = -1, 0
        if n >= HEADER_SIZE:
            h = _unpack_header(buf, 0)
            if h[1] + LOG_OVERHEAD > cfg.max_message_bytes or n > cfg.segment_bytes:
                return False  # the append refuses it (MESSAGE_TOO_LARGE, RECORD_BATCH_TOO_LARGE): no roll for it
            max_ts = now_ms if self._append_time else h[8]
            last_delta = max(h[6], 0)
        return seg.should_roll(
            cfg.segment_bytes, cfg.segment_ms, max_ts, self._log_end_offset + last_delta, n, now_ms
        )

    @_handles_io_errors("rolling a new log segment of")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset); the old one
        gets its final time-index entry and is trimmed, and the producer state is snapshotted at
        the new base offset. Returns the new segment. Its data and the snapshot are fsynced
        later (see :meth:`flush_due`)."""
        with self._lock:
            try:
                return self._roll(expected_next_offset)
            except OSError as e:  # the append that wanted the roll answers KAFKA_STORAGE_ERROR
                raise StorageError(
                    f"Error while rolling a new log segment of {self.name}: {e}"
                ) from e

    def _new_segment(self, base_offset: int) -> LogSegment:
        """A new, empty active segment at ``base_offset`` with this log's config, clock and a
        fresh roll jitter (a roll and a full truncation both start one)."""
        return LogSegment.open(
            self.dir,
            base_offset,
            self.config,
            time_ms=self._time_ms,
            roll_jitter_ms=self.config.random_segment_jitter(self._rng),
        )

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        segs, bases = self._view
        active = segs[-1]
        i = self._floor(bases, new_offset)
        if i >= 0 and bases[i] == new_offset:
            if active.base_offset == new_offset and active.size == 0:
                log.warning(
                    "Trying to roll a new log segment of %s with start offset %d =max(provided "
                    "offset = %s, LEO = %d) while it already exists and is active with size 0. "
                    "Size of time index: %d, size of offset index: %d.",
                    self.name,
                    new_offset,
                    expected_next_offset,
                    self._log_end_offset,
                    active.time_index.entries,
                    active.offset_index.entries,
                )
                self._remove_and_delete_segments([active], self._time_ms())
            else:
                raise StorageError(
                    f"Trying to roll a new log segment for topic partition {self.name} with start "
                    f"offset {new_offset} =max(provided offset = {expected_next_offset}, LEO = "
                    f"{self._log_end_offset}) while it already exists. Existing segment is "
                    f"{segs[i]!r}."
                )
        elif new_offset < active.base_offset:
            raise StorageError(
                f"Trying to roll a new log segment for topic partition {self.name} with start "
                f"offset {new_offset} =max(provided offset = {expected_next_offset}, LEO = "
                f"{self._log_end_offset}) lower than start offset of the active segment {active!r}"
            )
        else:
            for path in (
                log_file(self.dir, new_offset),
                offset_index_file(self.dir, new_offset),
                time_index_file(self.dir, new_offset),
                txn_index_file(self.dir, new_offset),
            ):
                if path.exists():
                    log.warning("Newly rolled segment file %s already exists; deleting it first", path)
                    path.unlink()
            active.on_become_inactive_segment()
        try:
            seg = self._new_segment(new_offset)
        except OSError as e:  # the append that wanted the roll is answered KAFKA_STORAGE_ERROR
            raise StorageError(
                f"Error while rolling a new log segment of {self.name} at offset {new_offset}: {e}"
            ) from e
        self._set_segments([*self._view[0], seg])
        # a failed snapshot (full disk) fails the append that wanted the roll, the roll itself
        # stands: the next load replays this segment from an older snapshot instead
        # Kafka: a snapshot at the new base offset, so recovery can start from it and replay
        # only this segment; no fsync under the lock -- flush() syncs it with the old segment.
        snapshot = self._producer_state.take_snapshot(new_offset, sync=False)
        with self._flush_lock:
            if snapshot is not None:
                self._unflushed_snapshots.append((new_offset, snapshot))
            if self._pending_roll_flush is None or new_offset > self._pending_roll_flush:
                self._pending_roll_flush = new_offset
        log.info("Rolled new log segment of %s at offset %d", self.name, new_offset)
        return seg

    # -- reads ---------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_length: int,
        max_offset_exclusive: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo:
        """Batches from the one holding ``start_offset``, at most ``max_length`` bytes (or one
        whole batch if ``min_one_message``), never including a batch at or past
        ``max_offset_exclusive`` (the high watermark or last stable offset; default the log end
        offset). The records are a file slice (see storage.file_records).

        Raises OffsetOutOfRangeError when start_offset < log start offset or > log end offset.
        """
        leo = self._log_end_offset
        if start_offset < self.log_start_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.name}, but we "
                f"only have log segments starting from offset: {self.log_start_offset}."
            )
        if start_offset > leo:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.name}, but we "
                f"only have log segments upto {leo}."
            )
        upper = leo if max_offset_exclusive is None else min(max_offset_exclusive, leo)
        if start_offset >= upper:
            if start_offset == leo:
                return FetchDataInfo(self.log_end_offset_metadata, EMPTY_RECORDS)
            return FetchDataInfo(LogOffsetMetadata(start_offset), EMPTY_RECORDS)
        upper_base, upper_pos = self._position_of(upper)
        segs, bases = self._view
        i = max(0, self._floor(bases, start_offset))
        while i < len(segs):
            seg = segs[i]
            base = seg.base_offset
            if base < upper_base:
                max_pos = seg.size
            elif base == upper_base:
                max_pos = upper_pos
            else:
                break
            info = seg.read(start_offset, max_length, max_pos, min_one_message)
            if info is not None:
                return info
            i += 1
        return FetchDataInfo(self.log_end_offset_metadata, EMPTY_RECORDS)

    def _position_of(self, offset: int) -> tuple[int, int]:
        """(segment base, byte position) of the batch holding ``offset`` (or where it will be
        appended); the read upper bound. Cached, since it is usually the high watermark."""
        if offset == self._log_end_offset:
            seg = self._segments[-1]
            return seg.base_offset, seg.size
        cached = self._upper_cache
        if cached is not None and cached[0] == offset:
            return cached[1], cached[2]
        segs, bases = self._view
        seg = segs[max(0, self._floor(bases, offset))]
        mapping = seg.translate_offset(offset)
        pos = mapping.position if mapping is not None else seg.size
        self._upper_cache = (offset, seg.base_offset, pos)
        return seg.base_offset, pos

    def offset_for_timestamp(self, timestamp: int) -> OffsetForTimestamp | None:
        """ListOffsets lookup: -2 earliest (log start offset), -4 earliest local (the same here),
        -1 latest (log end offset), -3 the first record with the largest timestamp, otherwise
        the first record with a timestamp >= ``timestamp``. Returns (offset, timestamp, leader
        epoch or -1), with timestamp -1 for -1/-2/-4; None when nothing matches."""
        cache = self.leader_epoch_cache
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            epoch = -1
            if cache is not None:
                first = cache.earliest_entry
                if first is not None and first.start_offset <= self.log_start_offset:
                    epoch = first.epoch
            return OffsetForTimestamp(self.log_start_offset, -1, epoch)
        if timestamp == LATEST_TIMESTAMP:
            return OffsetForTimestamp(self._log_end_offset, -1, self.latest_epoch)
        if timestamp == MAX_TIMESTAMP:
            best: LogSegment | None = None
            for seg in self._segments:
                if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                    best = seg
            if best is None or best.max_timestamp_so_far < 0:
                return None
            found = best.find_max_timestamp()
            if found is None:
                return None
            return OffsetForTimestamp(found.offset, found.timestamp, found.leader_epoch)
        if timestamp < 0:
            return None
        for seg in self._segments:
            if seg.largest_timestamp >= timestamp:
                r = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if r is None:
                    return None
                return OffsetForTimestamp(r.offset, r.timestamp, r.leader_epoch)
        return None

    def epoch_for_offset(self, offset: int) -> int:
        """Leader epoch that wrote ``offset`` per the epoch cache, or -1."""
        cache = self.leader_epoch_cache
        epoch = cache.epoch_for_offset(offset) if cache is not None else None
        return -1 if epoch is None else epoch

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, upper), from
        the segments' transaction indexes."""
        out: list[tuple[int, int]] = []
        segs, bases = self._view
        i = max(0, self._floor(bases, start_offset))
        for seg in segs[i:]:
            res = seg.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend((t.producer_id, t.first_offset) for t in res.aborted_transactions)
            if res.is_complete:
                break
        return out

    # -- compaction (storage.cleaner) ----------------------------------------------------------

    @property
    def dir_offline(self) -> bool:
        """Whether an I/O error took this log's dir offline: its files are not to be touched
        again (the cleaner skips it; every write is refused) until the broker restarts."""
        channel = self.log_dir_failure_channel
        return channel is not None and channel.any_offline and channel.has_offline_log_dir(self.dir.parent)

    @property
    def truncations(self) -> int:
        """How many times the log was truncated; a cleaning that started before a truncation
        must not swap its segments in (its offset map may hold offsets that are gone)."""
        return self._truncations

    @_locked
    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """Producer id -> (offset of its last data record or None, its epoch), Kafka's
        ``lastRecordsOfActiveProducers``: the cleaner keeps the batch holding that offset (or
        the producer's last marker), even empty, so that a producer's next sequence or epoch
        check still finds its state after a reload."""
        return {
            pid: (e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
            for pid, e in self._producer_state.active_producers.items()
        }

    def aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Every aborted transaction overlapping [start, upper) in the segments' ``.txnindex``
        files (blocking reads)."""
        out: list[AbortedTxn] = []
        for seg in self.log_segments(start_offset, upper_bound_offset):
            out.extend(seg.collect_aborted_txns(start_offset, upper_bound_offset).aborted_transactions)
        return out

    @_handles_io_errors("replacing segments of")
    def swap_in_cleaned(self, base_offset: int, replaces: tuple[int, ...], truncations: int) -> bool:
        """Open the cleaned segment ``base_offset`` (its files named ``.cleaned``, written by the
        cleaner's worker) and swap it in for ``replaces`` (:meth:`replace_segments`); when the
        swap is refused its files are removed and False returned. An I/O error on the way takes
        the log's dir offline (KafkaStorageError), as every write of the log does; a dir offline
        already is refused at once, its files untouched. Blocking: call from a cleaner thread."""
        seg = LogSegment.open(
            self.dir, base_offset, self.config, file_already_exists=True, suffix=CLEANED_FILE_SUFFIX
        )
        if self.replace_segments(seg, replaces, truncations):
            return True
        seg.delete()
        return False

    def replace_segments(self, new: LogSegment, replaces: tuple[int, ...], truncations: int) -> bool:
        """Swap the cleaned segment ``new`` (its files named ``.cleaned``) in for the segments
        with base offsets ``replaces``, Kafka's ``LocalLog.replaceSegments``; False (nothing
        changed) when those are no longer all in the log, one is the active segment, or the
        log was truncated or closed since the cleaning started (``truncations``).

        Crash safety by file names alone: ``.cleaned`` -> ``.swap``; the replaced segments
        renamed ``.deleted`` (their files go file.delete.delay.ms later, so a reader holding a
        slice of one keeps reading valid bytes) and the producer snapshots at their base offsets
        removed (Kafka's deleteProducerSnapshots); ``.swap`` -> final name; directory fsync'd. A
        start after a crash removes ``.cleaned`` files and completes a ``.swap``
        (storage.log_loader). Blocking: call from an executor; the log's lock is held only
        for the renames, not for the directory fsync."""
        with self._lock:
            segs = self._view[0]
            wanted = set(replaces)
            old = [s for s in segs if s.base_offset in wanted]
            if (
                self._closed
                or truncations != self._truncations
                or len(old) != len(wanted)
                or segs[-1] in old
                or not replaces
                or new.base_offset != min(wanted)
            ):
                return False
            new.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            kept = [s for s in segs if s.base_offset not in wanted]
            kept.append(new)
            kept.sort(key=lambda s: s.base_offset)
            self._set_segments(kept)
            due = self._time_ms() + self.config.file_delete_delay_ms
            for seg in old:
                seg.rename_to_deleted()
                self._pending_deletes.append((due, seg))
                if seg.base_offset != new.base_offset:  # its producer snapshot goes with it
                    snapshot = self._producer_state.remove_and_mark_snapshot_for_deletion(seg.base_offset)
                    if snapshot is not None:
                        snapshot.unlink(missing_ok=True)
            new.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        fsync_dir(self.dir)
        return True

    # -- truncation ----------------------------------------------------------------------------

    @_handles_io_errors("truncating")
    @_locked
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every batch at or after ``target_offset`` (a batch boundary, e.g. from
        OffsetForLeaderEpoch). Returns False when there was nothing to remove.

        Blocking -- segment files renamed and cut, indexes remapped, producer snapshots, and
        leader-epoch-checkpoint written and fsynced before it returns -- so the broker runs it in
        an executor (broker.replica_manager ``Partition.truncate_to``). The checkpoint is
        written here rather than marked dirty as the appends do: an entry above the new log end
        left in the file by a crash would survive the reload once later batches of a lower epoch
        pass its offset (recovery only re-assigns epochs above the latest one)."""
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.name} to a negative offset ({target_offset}).")
        if target_offset >= self._log_end_offset:
            log.info(
                "Truncating %s to %d has no effect as the largest offset in the log is %d",
                self.name,
                target_offset,
                self._log_end_offset - 1,
            )
            if self.leader_epoch_cache is not None:
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            self._last_assigned_epoch = None
            return False
        log.info("Truncating %s to offset %d", self.name, target_offset)
        if self._segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        now = self._time_ms()
        doomed = [s for s in self._segments if s.base_offset > target_offset]
        self._remove_and_delete_segments(doomed, now)
        self._segments[-1].truncate_to(target_offset)
        self._set_log_end_offset(target_offset)
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.truncate_from_end(target_offset)
        self.log_start_offset = min(target_offset, self.log_start_offset)
        self._rebuild_producer_state(target_offset)
        if self._high_watermark >= self._log_end_offset:
            self._high_watermark = self._log_end_offset
        self._on_high_watermark_updated()
        return True

    @_handles_io_errors("truncating fully")
    @_locked
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Remove every segment and start an empty log at ``new_offset`` (log start, high
        watermark and log end all become new_offset; the epoch cache is cleared and its file
        written). Blocking, as :meth:`truncate_to`: ``Partition.truncate_fully_and_start_at``
        runs it in an executor."""
        log.info("Truncating %s fully and starting at offset %d", self.name, new_offset)
        now = self._time_ms()
        self._remove_and_delete_segments(list(self._segments), now)
        seg = self._new_segment(new_offset)
        self._set_segments([seg])
        self._set_log_end_offset(new_offset)
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.clear_and_flush()
        self._producer_state.truncate_fully_and_start_at(new_offset)
        self.log_start_offset = new_offset
        self._rebuild_producer_state(new_offset)
        self._high_watermark = new_offset
        self._on_high_watermark_updated()

    def _rebuild_producer_state(self, last_offset: int) -> None:
        """After a truncation: producer state as of ``last_offset`` (Kafka's
        rebuildProducerState: latest snapshot <= it, then a replay of the log)."""
        with self._flush_lock:
            self._unflushed_snapshots = [
                (o, p) for o, p in self._unflushed_snapshots if o <= last_offset
            ]
        rebuild_producer_state(
            self._producer_state,
            self._segments,
            self.log_start_offset,
            last_offset,
            self._time_ms(),
            name=self.name,
        )

    def _set_log_end_offset(self, offset: int) -> None:
        """After a truncation: new LEO; the recovery point and pending flush follow it down."""
        self._last_assigned_epoch = None
        with self._flush_lock:
            self._truncations += 1
            self._log_end_offset = offset
            if self._recovery_point > offset:
                self._recovery_point = offset
            if self._pending_roll_flush is not None and self._pending_roll_flush > offset:
                self._pending_roll_flush = None
        self._upper_cache = None

    # -- retention -----------------------------------------------------------------------------

    @_handles_io_errors("deleting old segments of")
    @_locked
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: remove segments past retention.ms (by their largest timestamp), beyond
        retention.bytes, or wholly below the log start offset -- only segments entirely below
        the high watermark, oldest first; time and size only when cleanup.policy has delete.
        If every segment goes, a new active segment is rolled first. Returns the number removed
        (they are renamed ``.deleted``; see :meth:`delete_expired_files`)."""
        now = self._time_ms() if now_ms is None else now_ms
        if self.config.delete:
            return (
                self._delete_retention_ms_breached(now)
                + self._delete_retention_size_breached(now)
                + self._delete_log_start_offset_breached(now)
            )
        return self._delete_log_start_offset_breached(now)

    def _delete_retention_ms_breached(self, now: int) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0

        def breached(seg: LogSegment, _next: LogSegment | None) -> bool:
            return now - seg.largest_timestamp > retention_ms

        return self._delete_segments(
            self._deletable_segments(breached),
            f"retention time {retention_ms}ms breach based on the largest record timestamp",
            now,
        )

    def _delete_retention_size_breached(self, now: int) -> int:
        retention_bytes = self.config.retention_bytes
        size = self.size
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        diff = size - retention_bytes

        def breached(seg: LogSegment, _next: LogSegment | None) -> bool:
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return True
            return False

        return self._delete_segments(
            self._deletable_segments(breached), f"retention size {retention_bytes} breach", now
        )

    def _delete_log_start_offset_breached(self, now: int) -> int:
        def breached(_seg: LogSegment, nxt: LogSegment | None) -> bool:
            return nxt is not None and nxt.base_offset <= self.log_start_offset

        return self._delete_segments(
            self._deletable_segments(breached),
            f"log start offset {self.log_start_offset} breach",
            now,
        )

    def _deletable_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> list[LogSegment]:
        out: list[LogSegment] = []
        segs = self._segments
        hw = self._high_watermark
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            if hw >= upper and predicate(seg, nxt) and not (nxt is None and seg.size == 0):
                out.append(seg)
            else:
                break
        return out

    def _delete_segments(self, deletable: list[LogSegment], reason: str, now: int) -> int:
        n = len(deletable)
        if n == 0:
            return 0
        log.info(
            "Deleting segments of %s due to %s: %s",
            self.name,
            reason,
            [s.base_offset for s in deletable],
        )
        doomed = deletable
        if len(self._segments) == n:
            new_seg = self.roll()
            if deletable[-1].base_offset == new_seg.base_offset:
                log.warning(
                    "Empty active segment at %d of %s was deleted and recreated due to %s",
                    new_seg.base_offset,
                    self.name,
                    reason,
                )
                doomed = deletable[:-1]
        self._remove_and_delete_segments(doomed, now)
        self._increment_log_start_offset(self._segments[0].base_offset, "segment deletion")
        return n

    def _remove_and_delete_segments(self, segs: list[LogSegment], now: int) -> None:
        """Take ``segs`` out of the log, rename their files ``.deleted`` and schedule removal."""
        if not segs:
            return
        doomed = {id(s) for s in segs}
        self._set_segments([s for s in self._view[0] if id(s) not in doomed])
        due = now + self.config.file_delete_delay_ms
        for seg in segs:
            seg.rename_to_deleted()
            self._pending_deletes.append((due, seg))

    def _increment_log_start_offset(self, new_start: int, reason: str) -> bool:
        if new_start <= self.log_start_offset:
            return False
        self.log_start_offset = new_start
        if self._high_watermark < new_start:
            self._high_watermark = new_start
        with self._flush_lock:
            if self._recovery_point < new_start:
                self._recovery_point = new_start
        failed: OSError | None = None
        if self.leader_epoch_cache is not None:
            try:
                self.leader_epoch_cache.truncate_from_start(new_start)
            except OSError as e:
                # the cache is truncated and marked dirty: Log.flush writes the file again, and a
                # load truncates a stale one at the log start offset anyway; the rest goes on, so
                # the log is consistent whatever the answer
                failed = e
        # Snapshots below the log start offset can never be loaded again (loading and
        # truncation drop those at or below it), so they go now.
        self._producer_state.delete_snapshots_before(new_start)
        self._producer_state.on_log_start_offset_incremented(new_start)
        self._on_high_watermark_updated()
        log.info("Incremented log start offset of %s to %d due to %s", self.name, new_start, reason)
        if failed is not None:
            raise StorageError(
                f"Error while writing the leader-epoch checkpoint of {self.name} after moving its "
                f"log start offset to {new_start}: {failed}"
            ) from failed
        return True

    @_handles_io_errors("incrementing the log start offset of")
    @_locked
    def maybe_increment_log_start_offset(self, new_start: int, reason: str = "client delete records") -> bool:
        """DeleteRecords: move the log start offset up to ``new_start`` (<= high watermark, else
        OffsetOutOfRangeError). Segments wholly below it go at the next
        :meth:`delete_old_segments`. Returns whether it moved."""
        if new_start > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {new_start} of partition {self.name} "
                f"since it is larger than the high watermark {self._high_watermark}"
            )
        return self._increment_log_start_offset(new_start, reason)

    @property
    def next_file_deletion_ms(self) -> int | None:
        """When the earliest ``.deleted`` segment is due for removal, or None."""
        return min((due for due, _ in self._pending_deletes), default=None)

    @_handles_io_errors("deleting segment files of")
    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove the files of segments deleted at least file.delete.delay.ms ago; returns how
        many segments were removed."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:  # only the bookkeeping: the unlinks need no lock
            due = [seg for t, seg in self._pending_deletes if t <= now]
            if not due:
                return 0
            self._pending_deletes = [(t, seg) for t, seg in self._pending_deletes if t > now]
        for seg in due:
            seg.delete()
            log.info("Deleted log segment files of %s at offset %d", self.name, seg.base_offset)
        return len(due)

    # -- producer state ------------------------------------------------------------------------

    @_locked
    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """Forget producers idle for producer.id.expiration.ms with no ongoing transaction
        (Kafka's PeriodicProducerExpirationCheck). A later retry from such a producer is no
        longer recognised as a duplicate and any sequence is accepted from it."""
        now = self._time_ms() if now_ms is None else now_ms
        self._producer_state.remove_expired_producers(now)

    # -- flushing ------------------------------------------------------------------------------

    def flush_due(self, now_ms: int | None = None) -> int | None:
        """The offset :meth:`flush` should be called with now, or None: the base of a rolled
        segment not yet flushed, the log end offset when flush.messages messages or flush.ms
        milliseconds have accumulated. The broker polls it (and after appends when
        flush.messages is small) and runs the flush in an executor."""
        leo = self._log_end_offset
        rp = self._recovery_point
        if leo <= rp:
            return None
        cfg = self.config
        if leo - rp >= cfg.flush_messages:
            return leo
        now = self._time_ms() if now_ms is None else now_ms
        if now - self._last_flush_ms >= cfg.flush_ms:
            return leo
        roll = self._pending_roll_flush
        if roll is not None and roll > rp:
            return roll
        return None

    @_handles_io_errors("flushing")
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``offset``) (default: the
        log end offset) and advance the recovery point to ``offset``. Blocking: the broker runs
        it in an executor; it is the one method that may run concurrently with the others. A
        closed (deleted) log is not flushed (see :meth:`unless_closed`)."""
        with self.unless_closed() as is_open:
            if is_open:
                self._flush(offset)

    def _flush(self, offset: int | None) -> None:
        target = self._log_end_offset if offset is None else offset
        with self._flush_lock:
            start = self._recovery_point
            truncations = self._truncations
            snapshots = [p for o, p in self._unflushed_snapshots if o <= target]
            if snapshots:
                self._unflushed_snapshots = [
                    (o, p) for o, p in self._unflushed_snapshots if o > target
                ]
        for path in snapshots:
            _fsync_file(path)
        self.checkpoint_leader_epochs()  # before the recovery point moves past a new epoch
        if target <= start:
            return
        segs, bases = self._view
        i = max(0, self._floor(bases, start))
        began = time.monotonic()
        for seg in segs[i:]:
            if seg.base_offset >= target:
                break
            seg.flush()
        LOG_FLUSH_STATS.record((time.monotonic() - began) * 1000)
        with self._flush_lock:
            if self._truncations == truncations and target > self._recovery_point:
                self._recovery_point = min(target, self._log_end_offset)
            self._last_flush_ms = self._time_ms()
            if self._pending_roll_flush is not None and self._pending_roll_flush <= self._recovery_point:
                self._pending_roll_flush = None

    @_handles_io_errors("writing the leader-epoch checkpoint of")
    def checkpoint_leader_epochs(self) -> None:
        """Write leader-epoch-checkpoint if the append path assigned a new epoch since the last
        write (blocking: the flush task and :meth:`flush` call it from an executor). Not once
        the log is closed: its directory may be a new topic's (:meth:`unless_closed`)."""
        cache = self.leader_epoch_cache
        if cache is not None:
            with self.unless_closed() as is_open:
                if is_open:
                    cache.flush_if_dirty()

    # -- closing -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def unless_closed(self) -> Iterator[bool]:
        """Hold off :meth:`close` and :meth:`delete` while the caller works on this log's files;
        yields False when the log is closed already. A deleted log's directory is gone, or is
        re-created at the same path by a new topic of the same name, whose files a periodic task
        still holding the old Log must never write (issue #20: the flush task's
        leader-epoch-checkpoint write raced a deletion)."""
        with self._open_lock:
            yield not self._closed

    def close(self, flush: bool = True) -> None:
        """Flush (unless ``flush`` is False), snapshot the producer state at the log end offset
        (so the next load needs no replay; fsynced unless ``flush`` is False), then close every
        segment; segments waiting for deletion keep their ``.deleted`` files, which the next
        load removes. Idempotent; waits for periodic file work in progress (unless_closed)."""
        with self._open_lock:
            if self._closed:
                return
            if flush:
                self.flush()
            with self._lock:
                self._producer_state.take_snapshot(sync=flush)
                self._closed = True
                for seg in self._segments:
                    seg.close()
                for _due, seg in self._pending_deletes:
                    seg.close_handlers()
                self._pending_deletes.clear()

    def close_handlers(self) -> None:
        """Close every file without flushing or snapshotting anything (Kafka's
        UnifiedLog.closeHandlers): for a log whose dir failed (nothing more is written to it; the
        next start recovers the log from its recovery point) and for a deleted topic's log about
        to be removed (fsyncing a thousand logs only to remove them made a StopReplica(delete=true)
        take seconds). Idempotent; waits for periodic file work in progress (unless_closed)."""
        with self._open_lock, self._lock:
            self._close_handlers_locked()

    def _close_handlers_locked(self) -> None:
        self._closed = True
        for seg in self._segments:
            seg.close_handlers()
        for _due, seg in self._pending_deletes:
            seg.close_handlers()
        self._pending_deletes.clear()

    def delete(self) -> None:
        """Close and remove the whole partition directory (topic deletion)."""
        with self._open_lock, self._lock:
            self._close_handlers_locked()
            self._set_segments([])
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, segments={len(self._segments)}, log_start_offset="
            f"{self.log_start_offset}, log_end_offset={self._log_end_offset}, "
            f"high_watermark={self._high_watermark})"
        )
