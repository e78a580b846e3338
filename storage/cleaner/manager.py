"""LogCleanerManager: which compacted log to clean next, where its dirty section starts, and
which logs are being cleaned or must not be (Kafka's ``LogCleanerManager``).

* The first dirty offset of a log is its entry in the log dir's ``cleaner-offset-checkpoint``
  (storage.log_manager keeps the entries; the checkpoint is rewritten after every cleaning,
  after the swap), or its log start offset when there is none or the entry is out of range.
* The dirty section ends at the first uncleanable offset: the lowest of the last stable offset,
  the active segment's base offset, and the base of the first segment whose largest timestamp
  is within min.compaction.lag.ms of now -- rounded down to a segment base.
* Cleanable ratio = dirty bytes / (clean bytes + dirty bytes). The cleaner takes the log with
  the largest ratio among those above their min.cleanable.dirty.ratio, or with dirty bytes
  whose first batch is older than max.compaction.lag.ms (those must be cleaned now).
* A log is cleaned by one cleaner at a time (``in_progress``); :meth:`abort_and_pause` stops
  and holds off cleaning of a log that is about to be truncated or deleted, :meth:`resume`
  lets it go again. A log whose cleaning failed is left alone until the broker restarts
  (Kafka's uncleanable partitions), with the error logged -- unless the error was an I/O
  error: that takes the log's dir offline (storage.cleaner.log_cleaner), and no log of an
  offline dir is chosen again.

Who may call: the cleaner threads and, for pausing, whoever truncates or deletes a log; every
method takes the manager's lock. Reading segment metadata (time index, first batch) is
blocking: call from a cleaner thread or an executor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from storage.log import Log

__all__ = ["LogCleanerManager", "LogToClean", "cleanable_offsets", "max_compaction_delay"]

log = logging.getLogger("odradek.storage.cleaner")

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class LogToClean:
    """A compacted log and its sections (Kafka's ``LogToClean``)."""

    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base: the dirty section is [first dirty, this)
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_offsets(lg: Log, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint must be
    rewritten because its entry was out of range), Kafka's ``cleanableOffsets``."""
    start = lg.log_start_offset
    dirty = start if last_clean_offset is None else last_clean_offset
    force = False
    if dirty < start:
        if not lg.config.delete:
            log.warning(
                "Resetting first dirty offset of %s to log start offset %d since the checkpointed "
                "offset %d is invalid.", lg.name, start, dirty,
            )
        dirty, force = start, True
    elif dirty > lg.log_end_offset:
        log.warning(
            "The last checkpoint dirty offset for partition %s is %d, which is larger than the log "
            "end offset %d. Resetting to the log start offset %d.", lg.name, dirty, lg.log_end_offset, start,
        )
        dirty, force = start, True
    segs = lg.segments
    candidates = [lg.last_stable_offset, segs[-1].base_offset]
    lag = max(lg.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in lg.log_segments(dirty, segs[-1].base_offset):
            if seg.largest_timestamp > now_ms - lag:
                candidates.append(seg.base_offset)
                break
    return dirty, max(dirty, min(candidates)), force


def max_compaction_delay(lg: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty record is (0: not overdue)."""
    segs = lg.segments
    stamps = [
        ts
        for s in lg.log_segments(first_dirty_offset, segs[-1].base_offset)
        if 0 < (ts := s.first_batch_timestamp) < 2**63 - 1
    ]
    if not stamps:
        return 0
    until = now_ms - max(lg.config.max_compaction_lag_ms, 0)
    earliest = min(stamps)
    return until - earliest if earliest < until else 0


def log_to_clean(tp: TopicPartition, lg: Log, first_dirty: int, uncleanable: int, overdue: bool) -> LogToClean:
    active = lg.segments[-1]
    clean_bytes = sum(s.size for s in lg.log_segments(-1, first_dirty))
    # the segment holding the uncleanable offset (Kafka's nonActiveLogSegmentsFrom(..).head),
    # or the active one
    holder = lg.segment_for(uncleanable)
    first_unclean = holder.base_offset if holder is not None and holder is not active else active.base_offset
    cleanable = sum(s.size for s in lg.log_segments(max(first_dirty, lg.log_start_offset), first_unclean))
    return LogToClean(tp, lg, first_dirty, first_unclean, clean_bytes, cleanable, overdue)


class LogCleanerManager:
    """See the module docstring. ``logs`` lists the broker's logs; ``checkpoints`` is the
    LogManager's cleaner-offset map (tp -> first dirty offset) and ``write_checkpoint(log)``
    rewrites the checkpoint file of that log's dir."""

    def __init__(
        self,
        logs: Callable[[], Iterable[tuple[TopicPartition, Log]]],
        checkpoints: dict[TopicPartition, int],
        write_checkpoint: Callable[[TopicPartition], None],
    ) -> None:
        self._logs = logs
        self._checkpoints = checkpoints
        self._write_checkpoint = write_checkpoint
        self._lock = threading.Condition()
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._paused: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self.dirtiest_ratio = 0.0  # of the last selection, for metrics and tests

    def grab_filthiest_compacted_log(self, now_ms: int) -> LogToClean | None:
        """The log to clean next (marked in progress), or None."""
        with self._lock:
            candidates: list[LogToClean] = []
            for tp, lg in list(self._logs()):
                if (
                    not lg.config.compact
                    or tp in self._in_progress
                    or tp in self._paused
                    or tp in self._uncleanable
                    or lg.dir_offline  # until the failure handler removes the dir's logs
                ):
                    continue
                try:
                    dirty, uncleanable, force = cleanable_offsets(lg, self._checkpoints.get(tp), now_ms)
                    if force:
                        self._checkpoints[tp] = dirty
                        self._write_checkpoint(tp)
                    overdue = max_compaction_delay(lg, dirty, now_ms) > 0
                    ltc = log_to_clean(tp, lg, dirty, uncleanable, overdue)
                except (OSError, ValueError) as e:  # a log closed or deleted meanwhile
                    log.debug("Skipping %s while choosing a log to clean: %s", lg.name, e)
                    continue
                if ltc.total_bytes > 0:
                    candidates.append(ltc)
            self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            cleanable = [
                c
                for c in candidates
                if (c.needs_compaction_now and c.cleanable_bytes > 0)
                or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
            ]
            if not cleanable:
                return None
            best = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._in_progress.add(best.tp)
            return best

    def is_aborted(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._aborted

    def done_cleaning(self, tp: TopicPartition, end_offset: int | None) -> None:
        """The cleaning of ``tp`` ended; with ``end_offset`` it completed and the checkpoint
        moves there (written now, after the swaps)."""
        with self._lock:
            self._in_progress.discard(tp)
            aborted = tp in self._aborted
            self._aborted.discard(tp)
            if end_offset is not None and not aborted:
                self._checkpoints[tp] = end_offset
                self._write_checkpoint(tp)
            self._lock.notify_all()

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        with self._lock:
            self._uncleanable.add(tp)

    @property
    def uncleanable(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable)

    def abort_and_pause(
        self, tp: TopicPartition, timeout_s: float = 60.0, on_abort: Callable[[], None] | None = None
    ) -> None:
        """Stop a cleaning of ``tp`` and hold off new ones until :meth:`resume`; waits until no
        cleaning of it is running (Kafka's ``abortAndPauseCleaning``). ``on_abort`` is called
        when a cleaning was running (the LogCleaner kills its worker so nobody waits for a
        group to finish)."""
        with self._lock:
            self._paused[tp] = self._paused.get(tp, 0) + 1
            if tp in self._in_progress:
                self._aborted.add(tp)
                if on_abort is not None:
                    on_abort()
                if not self._lock.wait_for(lambda: tp not in self._in_progress, timeout_s):
                    log.warning("The cleaning of %s did not stop within %.0f s", tp, timeout_s)

    def resume(self, tp: TopicPartition) -> None:
        with self._lock:
            n = self._paused.get(tp, 0) - 1
            if n > 0:
                self._paused[tp] = n
            else:
                self._paused.pop(tp, None)

    def forget(self, tp: TopicPartition) -> None:
        """``tp`` was deleted: drop its state (the LogManager drops its checkpoint entry)."""
        with self._lock:
            self._uncleanable.discard(tp)
            self._paused.pop(tp, None)
