"""Loading a partition directory into segments, Kafka's ``LogLoader``: stray files, interrupted
compaction swaps, missing or corrupt indexes, and recovery after an unclean shutdown.

What loading does with the files of ``<log.dir>/<topic>-<partition>/`` (see storage.segment for
the names), in order:

1. ``*.deleted``: removed (a delete that was scheduled but had not run).
   ``*.cleaned``: removed (an unfinished compaction), and so is every ``*.swap`` whose offset is
   >= the smallest ``.cleaned`` offset (an unfinished segment split).
2. Remaining ``*.swap`` segment files (a compaction that finished writing but not swapping):
   the segment files they replace -- offsets in [smallest swap base, largest swap next offset) --
   are removed and the ``.swap`` suffix is dropped.
3. Index files without a ``.log`` are removed; every ``.log`` becomes a segment. A segment whose
   offset index is missing or whose transaction index is corrupt is recovered on the spot.
4. Every start, clean or not (issue #12): each segment that step 5 will not recover anyway is
   checked (storage.log_integrity) -- its indexes (whole entries, monotonic, inside the segment,
   last entry at a valid batch) and, for the active segment, the bytes from its last index entry
   to its end (whole valid batches). A segment that fails is recovered, so nothing is ever
   appended after bytes that are not valid batches and a damaged tail never stops a start.
5. Unless the shutdown was clean (or the recovery-point checkpoint was unreadable), every
   segment from the one holding the recovery point on is recovered (LogSegment.recover:
   re-validated, indexes rebuilt, torn tail truncated). Invalid bytes followed by valid
   batches are cut out of the segment, which is rewritten without them (Kafka truncates at
   the first invalid batch); a segment whose tail is lost while later segments follow is
   damage, not a torn write: it is logged as an error and the later segments are kept (each
   recovered in turn; Kafka deletes them). An unreadable leader-epoch-checkpoint is rebuilt
   from the batch headers.
6. If the log end is below the log start offset checkpoint every segment is removed; an empty
   directory gets one empty segment at the log start offset. The active segment's indexes get
   their full preallocated size back.
7. Producer state (``<offset>.snapshot`` files, see storage.producer_state), Kafka's
   ``LogLoader.load`` + ``UnifiedLog.rebuildProducerState``: snapshots at no segment base are
   removed (except the newest when it is past every base: the one written at clean shutdown),
   then :func:`rebuild_producer_state` loads the newest snapshot <= the log end offset and
   replays the batch headers (control batches: their marker) from there to the log end. After a
   clean shutdown there is a snapshot at the log end offset and nothing is replayed.

Who may call: Log.open only, before the Log is shared (and :func:`rebuild_producer_state` the
Log, under its lock, after a truncation); blocking file I/O throughout.
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.records import NO_PRODUCER_ID, iter_batches, read_header
from storage.checkpoints import EpochEntry
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log_integrity import (
    offset_index_problem,
    scan_batch_headers,
    tail_problem,
    time_index_problem,
)
from storage.producer_state import ProducerBatch, ProducerStateManager, producer_batches
from storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    LogSegment,
    is_index_file,
    is_log_file,
    log_file,
    offset_from_file_name,
    time_index_file,
)
from storage.txn_index import CorruptIndexError

if TYPE_CHECKING:
    from storage.leader_epoch import LeaderEpochFileCache

__all__ = ["LoadedLog", "load_log", "rebuild_producer_state"]

log = logging.getLogger("odradek.storage.log")

_LONG_MAX = 9223372036854775807
_LONG_MIN = -9223372036854775808
_REPLAY_CHUNK = 1 << 20  # bytes read at a time when replaying a segment into the producer state


@dataclass
class LoadedLog:
    """What loading found: the live segments (ascending), offsets, and the segments removed
    during loading, already renamed ``.deleted``, for the Log to delete after the delay."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    to_delete: list[LogSegment] = field(default_factory=list)


def load_log(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool,
    time_ms: Callable[[], int],
    leader_epoch_cache: LeaderEpochFileCache | None,
    rng: random.Random,
    producer_state: ProducerStateManager | None = None,
) -> LoadedLog:
    """Load ``directory`` (created if missing); see the module docstring for the steps. With
    ``producer_state`` (empty, on the same directory) the producer state is rebuilt too."""
    directory.mkdir(parents=True, exist_ok=True)
    name = directory.name

    def open_segment(base: int, *, exists: bool, suffix: str = "") -> LogSegment:
        return LogSegment.open(
            directory,
            base,
            config,
            time_ms=time_ms,
            file_already_exists=exists,
            suffix=suffix,
            roll_jitter_ms=config.random_segment_jitter(rng),
        )

    swap_files = _remove_temp_files_and_collect_swap_files(directory)
    _complete_swaps(directory, swap_files, open_segment)

    segments: list[LogSegment] = []
    to_delete: list[LogSegment] = []
    try:
        for path in sorted(p for p in directory.iterdir() if p.is_file()):
            if is_index_file(path):
                if not log_file(directory, offset_from_file_name(path.name)).exists():
                    log.warning(
                        "Found an orphaned index file %s, with no corresponding log file.", path
                    )
                    path.unlink(missing_ok=True)
            elif is_log_file(path):
                base = offset_from_file_name(path.name)
                time_index_new = not time_index_file(directory, base).exists()
                seg = open_segment(base, exists=True)
                segments.append(seg)
                try:
                    seg.sanity_check(time_index_new)
                except FileNotFoundError:
                    if clean_shutdown or base < recovery_point:
                        log.error(
                            "Could not find offset index file corresponding to log file %s, "
                            "recovering segment and rebuilding index files...",
                            seg.log_path,
                        )
                    seg.recover(config.max_message_bytes, leader_epoch_cache)
                except CorruptIndexError as e:
                    log.warning(
                        "Found a corrupted index file corresponding to log file %s due to %s, "
                        "recovering segment and rebuilding index files...",
                        seg.log_path,
                        e,
                    )
                    seg.recover(config.max_message_bytes, leader_epoch_cache)

        first_unflushed = len(segments) if clean_shutdown else _first_unflushed(segments, recovery_point)
        for i, seg in enumerate(segments[:first_unflushed]):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
            _check_segment(seg, upper, config, leader_epoch_cache)
        if not clean_shutdown:
            _recover_unflushed(name, segments, recovery_point, config, leader_epoch_cache)
        if leader_epoch_cache is not None and leader_epoch_cache.needs_rebuild:
            _rebuild_leader_epochs(name, segments, leader_epoch_cache)

        log_end: int | None = None
        if segments:
            log_end = segments[-1].read_next_offset()
            if log_end < log_start_offset:
                log.warning(
                    "Deleting all segments of %s because logEndOffset (%d) is smaller than "
                    "logStartOffset %d. This could happen if segment files were deleted from "
                    "the file system.",
                    name,
                    log_end,
                    log_start_offset,
                )
                _rename_deleted(segments, to_delete)
                segments.clear()
                if leader_epoch_cache is not None:
                    leader_epoch_cache.clear_and_flush()
                log_end = None
        if not segments:
            segments.append(open_segment(log_start_offset, exists=False))

        if clean_shutdown and log_end is not None:
            new_recovery_point = next_offset = log_end
        else:
            next_offset = log_end if log_end is not None else segments[-1].read_next_offset()
            new_recovery_point = min(recovery_point, next_offset)
        segments[-1].resize_indexes(config.segment_index_bytes)
        if leader_epoch_cache is not None:
            leader_epoch_cache.truncate_from_end(next_offset)
            leader_epoch_cache.truncate_from_start(log_start_offset)
        new_log_start_offset = max(log_start_offset, segments[0].base_offset)
        if producer_state is not None:
            if not producer_state.is_empty:
                raise StorageError("Producer state must be empty during log initialization")
            producer_state.remove_stray_snapshots(s.base_offset for s in segments)
            rebuild_producer_state(
                producer_state,
                segments,
                new_log_start_offset,
                next_offset,
                time_ms(),
                reload_from_clean_shutdown=clean_shutdown,
                name=name,
            )
        return LoadedLog(
            segments=segments,
            log_start_offset=new_log_start_offset,
            recovery_point=new_recovery_point,
            log_end_offset=next_offset,
            to_delete=to_delete,
        )
    except BaseException:
        for seg in segments + to_delete:
            seg.close_handlers()
        raise


def _remove_temp_files_and_collect_swap_files(directory: Path) -> list[Path]:
    swap_files: list[Path] = []
    cleaned_files: list[Path] = []
    min_cleaned = _LONG_MAX
    for path in directory.iterdir():
        if not path.is_file():
            continue
        name = path.name
        if name.endswith(DELETED_FILE_SUFFIX):
            log.debug("Deleting stray temporary file %s", path)
            path.unlink(missing_ok=True)
        elif name.endswith(CLEANED_FILE_SUFFIX):
            try:
                min_cleaned = min(min_cleaned, offset_from_file_name(name))
            except ValueError:
                pass
            cleaned_files.append(path)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swap_files.append(path)
    valid: list[Path] = []
    for path in swap_files:
        try:
            offset = offset_from_file_name(path.name)
        except ValueError:
            continue
        if offset >= min_cleaned:
            log.debug("Deleting invalid swap file %s minCleanedFileOffset: %d", path, min_cleaned)
            path.unlink(missing_ok=True)
        else:
            valid.append(path)
    for path in cleaned_files:
        log.debug("Deleting stray .clean file %s", path)
        path.unlink(missing_ok=True)
    return valid


def _complete_swaps(
    directory: Path,
    swap_files: list[Path],
    open_segment: Callable[..., LogSegment],
) -> None:
    min_swap = _LONG_MAX
    max_swap = _LONG_MIN
    for path in swap_files:
        if not is_log_file(Path(path.name[: -len(SWAP_FILE_SUFFIX)])):
            continue
        base = offset_from_file_name(path.name)
        seg = open_segment(base, exists=True, suffix=SWAP_FILE_SUFFIX)
        try:
            log.info(
                "Found log file %s from interrupted swap operation, which is recoverable from "
                "%s files by renaming.",
                path,
                SWAP_FILE_SUFFIX,
            )
            min_swap = min(min_swap, seg.base_offset)
            max_swap = max(max_swap, seg.read_next_offset())
        finally:
            seg.close_handlers()
    if not swap_files:
        return
    for path in directory.iterdir():
        if not path.is_file() or path.name.endswith(SWAP_FILE_SUFFIX):
            continue
        try:
            offset = offset_from_file_name(path.name)
        except ValueError:
            continue
        if min_swap <= offset < max_swap:
            log.info("Deleting segment files %s that is compacted but has not been deleted yet.", path.name)
            path.unlink(missing_ok=True)
    for path in directory.iterdir():
        if path.is_file() and path.name.endswith(SWAP_FILE_SUFFIX):
            log.info("Recovering file %s by renaming from %s files.", path.name, SWAP_FILE_SUFFIX)
            os.replace(path, path.with_name(path.name[: -len(SWAP_FILE_SUFFIX)]))


def _first_unflushed(segments: list[LogSegment], recovery_point: int) -> int:
    """Index of the segment holding ``recovery_point`` (the first one recovery validates)."""
    first = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= recovery_point:
            first = i
    return first


def _check_segment(
    seg: LogSegment,
    upper: int | None,
    config: LogConfig,
    leader_epoch_cache: LeaderEpochFileCache | None,
) -> None:
    """The check every start makes of a segment that recovery does not validate anyway: its
    indexes (and, for the active segment -- ``upper`` None --, the bytes from its last index
    entry to its end) must be what the broker wrote (storage.log_integrity). When they are
    not, the segment is recovered: indexes rebuilt, a tail that is not whole valid batches
    truncated, both logged with the file and the position."""
    problem = _segment_problem(seg, upper)
    if problem is None:
        return
    log.warning(
        "Found a corrupt index or log tail in segment %s: %s; recovering the segment and "
        "rebuilding its index files",
        seg.log_path,
        problem,
    )
    seg.recover(config.max_message_bytes, leader_epoch_cache)


def _segment_problem(seg: LogSegment, upper: int | None) -> str | None:
    base = seg.base_offset
    fd = os.open(seg.log_path, os.O_RDONLY)
    try:

        def pread(size: int, position: int) -> bytes:
            return os.pread(fd, size, position)

        file_size = os.fstat(fd).st_size
        index = seg.offset_index_path.read_bytes()
        problem = offset_index_problem(index, base, file_size, pread)
        if problem is not None:
            return f"offset index {seg.offset_index_path.name}: {problem}"
        if upper is None:  # the active segment: whole valid batches from the last entry on
            start, entry_offset = 0, None
            if len(index) >= 8:
                rel = int.from_bytes(index[-8:-4], "big", signed=True)
                start, entry_offset = int.from_bytes(index[-4:], "big", signed=True), base + rel
            problem, next_offset = tail_problem(pread, start, file_size, base, entry_offset)
            if problem is not None:
                return f"log {seg.log_path.name}: {problem}"
            upper = next_offset if next_offset >= 0 else base
        elif file_size != seg.size:
            return f"log {seg.log_path.name}: size changed while loading"
        try:
            times = seg.time_index_path.read_bytes()
        except FileNotFoundError:
            return None
        problem = time_index_problem(times, base, upper, file_size, index, pread)
        if problem is not None:
            return f"time index {seg.time_index_path.name}: {problem}"
        return None
    finally:
        os.close(fd)


def _recover_unflushed(
    name: str,
    segments: list[LogSegment],
    recovery_point: int,
    config: LogConfig,
    leader_epoch_cache: LeaderEpochFileCache | None,
) -> None:
    """Recover the segments from the one holding ``recovery_point`` on (Kafka's
    ``LogLoader.recoverLog``). A segment that loses bytes in the middle keeps the valid
    batches after them (LogSegment.recover logs the ranges and offsets); one that loses its
    tail and is followed by later segments is logged loudly, and the later segments are kept,
    each recovered in turn: their batches are intact and their offsets stay valid (Kafka
    deletes them; a torn write can only be at the very end of what was written, so bytes lost
    below the last segment are damage to that segment alone)."""
    unflushed = segments[_first_unflushed(segments, recovery_point) :]
    total = len(unflushed)
    for i, seg in enumerate(unflushed):
        log.info("Recovering unflushed segment %d of %s (%d/%d).", seg.base_offset, name, i, total)
        size_before = seg.size
        try:
            truncated = seg.recover(config.max_message_bytes, leader_epoch_cache)
        except (ValueError, OSError, StorageError) as e:
            log.warning(
                "Found invalid offset during recovery of %s (%s). Deleting the corrupt segment "
                "and creating an empty one with starting offset %d",
                name,
                e,
                seg.base_offset,
            )
            truncated = seg.truncate_to(seg.base_offset)
        if truncated > 0 and i + 1 < total and seg.read_next_offset() < unflushed[i + 1].base_offset:
            log.error(
                "Corruption found in segment %s of %s below its last segment: cut at byte %d of "
                "%d (%d bytes dropped, offsets %d to %d lost); the %d later segments are intact "
                "and kept",
                seg.log_path,
                name,
                seg.size,
                size_before,
                truncated,
                seg.read_next_offset(),
                unflushed[i + 1].base_offset - 1,
                total - i - 1,
            )
        elif truncated > 0:
            log.warning(
                "Corruption found in segment %d of %s, truncating to offset %d",
                seg.base_offset,
                name,
                seg.read_next_offset(),
            )


def _rebuild_leader_epochs(
    name: str, segments: list[LogSegment], leader_epoch_cache: LeaderEpochFileCache
) -> None:
    """Rebuild an unreadable leader-epoch-checkpoint from the partition leader epochs of the
    batch headers (what recovery does for the batches it validates), and write it back."""
    entries: list[EpochEntry] = []
    for seg in segments:
        fd = os.open(seg.log_path, os.O_RDONLY)
        try:
            for _pos, h in scan_batch_headers(functools.partial(os.pread, fd), 0, seg.size):
                epoch = h[2]
                if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
                    entries.append(EpochEntry(epoch, h[0]))
        finally:
            os.close(fd)
    leader_epoch_cache.clear()
    leader_epoch_cache.assign_all(entries)
    leader_epoch_cache.needs_rebuild = False
    log.warning(
        "Rebuilt the leader-epoch-checkpoint of %s from the log: %d epochs %s",
        name,
        len(entries),
        [tuple(e) for e in entries],
    )


def _rename_deleted(segs: list[LogSegment], to_delete: list[LogSegment]) -> None:
    for seg in segs:
        seg.rename_to_deleted()
        to_delete.append(seg)


def rebuild_producer_state(
    producer_state: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_start_offset: int,
    last_offset: int,
    now_ms: int,
    *,
    reload_from_clean_shutdown: bool = False,
    name: str = "",
) -> None:
    """Bring ``producer_state`` to ``last_offset`` (Kafka's ``UnifiedLog.rebuildProducerState``):
    drop snapshots outside (log start, last offset], reload from the newest one left and replay
    the segments from its offset to ``last_offset``, then snapshot at ``last_offset``. Snapshots
    are also taken at the bases of the last two segments when the replay passes them.

    Kafka's two shortcuts are kept: with no snapshot at all after a clean shutdown (a log written
    before producer state was persisted) nothing is replayed and empty snapshots are written; and
    a state that was empty and already at or past ``last_offset`` (a truncation of a log no
    producer id ever wrote to) is not replayed either.

    Touches only ``producer_state`` and its snapshot files (Kafka: "free of side effects"), so
    recovery and truncation can both use it. ``segments`` ascending by base offset."""
    offsets_to_snapshot: list[int] = []
    if segments:
        if len(segments) > 1:
            offsets_to_snapshot.append(segments[-2].base_offset)
        offsets_to_snapshot.append(segments[-1].base_offset)
    offsets_to_snapshot.append(last_offset)
    log.info("Loading producer state of %s till offset %d", name, last_offset)
    if producer_state.latest_snapshot_offset is None and reload_from_clean_shutdown:
        for offset in offsets_to_snapshot:
            producer_state.update_map_end_offset(offset)
            producer_state.take_snapshot()
        return
    is_empty_before_truncation = (
        producer_state.is_empty and producer_state.map_end_offset >= last_offset
    )
    producer_state.truncate_and_reload(log_start_offset, last_offset, now_ms)
    if last_offset > producer_state.map_end_offset and not is_empty_before_truncation:
        log.info(
            "Reloading from producer snapshot and rebuilding producer state of %s from offset "
            "%d to %d",
            name,
            producer_state.map_end_offset,
            last_offset,
        )
        bases = [s.base_offset for s in segments]
        last_index = bisect.bisect_right(bases, last_offset) - 1
        first = max(0, bisect.bisect_right(bases, producer_state.map_end_offset) - 1)
        end = bisect.bisect_left(bases, last_offset)
        for i in range(first, end):
            seg = segments[i]
            start = max(seg.base_offset, producer_state.map_end_offset, log_start_offset)
            producer_state.update_map_end_offset(start)
            if seg.base_offset in offsets_to_snapshot:
                producer_state.take_snapshot()
            max_position = seg.size
            if i == last_index:
                found = seg.translate_offset(last_offset)
                if found is not None:
                    max_position = found.position
            producer_state.rebuild_from_batches(
                _segment_producer_batches(seg, start, max_position)
            )
    producer_state.update_map_end_offset(last_offset)
    producer_state.take_snapshot()


def _segment_producer_batches(
    seg: LogSegment, start_offset: int, max_position: int
) -> Iterator[ProducerBatch]:
    """The batches with a producer id in ``seg`` from the one holding ``start_offset`` up to byte
    ``max_position``: headers only, plus the marker of control batches. Reads at most about
    1 MiB at a time (or one whole larger batch)."""
    offset = start_offset
    while True:
        info = seg.read(offset, _REPLAY_CHUNK, max_position, min_one_message=True)
        if info is None:
            return
        data = info.records.read()
        next_offset = None
        for pos, size in iter_batches(data):
            h = read_header(data, pos)
            next_offset = h.base_offset + h.last_offset_delta + 1
            if h.producer_id > NO_PRODUCER_ID:
                if h.is_control:
                    yield from producer_batches(memoryview(data)[pos : pos + size])
                else:
                    yield ProducerBatch.from_header(h)
        if next_offset is None:
            return
        offset = next_offset
