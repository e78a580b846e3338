"""LeaderEpochFileCache: which leader epoch wrote which offsets of one partition's log.

Kafka's ``LeaderEpochFileCache`` (``storage/internals/epoch``): an ordered list of
:class:`~storage.checkpoints.EpochEntry` (epoch, start offset) -- the start offset being the first
offset written by the leader of that epoch -- persisted to the partition's
``leader-epoch-checkpoint`` (``0\\n<count>\\n<epoch> <startOffset>\\n...``, see
:mod:`storage.checkpoints`).

Invariants:

* Entries are strictly increasing in both epoch and start offset: :meth:`assign` first removes
  every trailing entry whose epoch or start offset is >= the new one's (Kafka's
  ``maybeTruncateNonMonotonicEntries``).
* Epochs and start offsets are >= 0; :meth:`assign` raises ValueError otherwise.
* The checkpoint file is rewritten (atomically, fsynced) after every change -- assign, either
  truncation, clear_and_flush -- except an ``assign(..., flush=False)`` from the append path on
  the event loop, which only marks the cache dirty: the log's flush (an executor) writes it with
  :meth:`flush_if_dirty` before the recovery point moves past the new entry, and recovery
  re-assigns epochs from the batches above the recovery point. Loading never writes the file.

Who may call: the owner of the partition's log (the task that appends to and truncates it), one
call at a time -- there is no lock. Methods that change the cache do blocking file I/O.

OffsetsForLeaderEpoch semantics (:meth:`end_offset_for`), per Kafka:

* requested UNDEFINED_EPOCH (-1): (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
* requested == latest epoch: (latest epoch, log end offset).
* no epoch above the requested one (including an empty cache): (-1, -1).
* requested below the first epoch: (requested epoch, start offset of the first epoch).
* otherwise: (largest epoch <= requested, start offset of the first epoch > requested).
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    CheckpointFormatError,
    EpochEntry,
    LeaderEpochCheckpointFile,
)

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochFileCache",
]

log = logging.getLogger("odradek.storage.leader_epoch")

UNDEFINED_EPOCH = -1  # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1  # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET


def _truncate_from_start(entries: list[EpochEntry], start_offset: int) -> list[EpochEntry]:
    """Drop leading entries with start offset <= start_offset, re-adding the last dropped one
    at start_offset. Returns the removed entries."""
    n = 0
    while n < len(entries) and entries[n].start_offset <= start_offset:
        n += 1
    removed = entries[:n]
    if removed:
        del entries[:n]
        entries.insert(0, EpochEntry(removed[-1].epoch, start_offset))
    return removed


def _truncate_from_end(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """Drop trailing entries with start offset >= end_offset (none when end_offset < 0)."""
    if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
        return []
    n = len(entries)
    while n > 0 and entries[n - 1].start_offset >= end_offset:
        n -= 1
    removed = entries[n:]
    del entries[n:]
    return removed


class LeaderEpochFileCache:
    """The (epoch -> start offset) history of one partition, backed by its checkpoint file.

    See the module docstring for invariants, persistence and who may call.
    """

    def __init__(
        self,
        checkpoint: LeaderEpochCheckpointFile | str | os.PathLike[str],
        *,
        topic_partition: str = "",
        sync: bool = True,
    ) -> None:
        """Load the entries from ``checkpoint`` (a missing file is created empty). ``sync=False``
        skips the fsyncs of later writes (for tests and throwaway caches; the writes stay
        atomic)."""
        if not isinstance(checkpoint, LeaderEpochCheckpointFile):
            checkpoint = LeaderEpochCheckpointFile(checkpoint)
        self.checkpoint = checkpoint
        self.topic_partition = topic_partition
        self.sync = sync
        self._entries: list[EpochEntry] = []
        self._dirty = False  # assigned but not yet written (see assign(flush=False))
        # True when the checkpoint could not be read: the log loader rebuilds the entries from
        # the batch headers (issue #12; Kafka takes the log dir offline instead)
        self.needs_rebuild = False
        try:
            entries = checkpoint.read()
            for entry in entries:
                self._assign(entry)
        except (CheckpointFormatError, ValueError) as e:
            log.warning("Ignoring an unreadable leader-epoch-checkpoint of %s: %s", topic_partition, e)
            self._entries.clear()
            self.needs_rebuild = True

    @classmethod
    def for_partition_dir(
        cls, partition_dir: str | os.PathLike[str], *, topic_partition: str = ""
    ) -> LeaderEpochFileCache:
        """The cache backed by ``<partition_dir>/leader-epoch-checkpoint``."""
        return cls(
            Path(partition_dir) / LEADER_EPOCH_CHECKPOINT_FILE, topic_partition=topic_partition
        )

    # -- updates ---------------------------------------------------------------------------

    def _is_update_needed(self, entry: EpochEntry) -> bool:
        latest = self.latest_entry
        return (
            latest is None
            or entry.epoch != latest.epoch
            or entry.start_offset < latest.start_offset
        )

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {entry}")
        if not self._is_update_needed(entry):
            return False
        entries = self._entries
        while entries and (
            entries[-1].epoch >= entry.epoch or entries[-1].start_offset >= entry.start_offset
        ):
            entries.pop()
        entries.append(entry)
        return True

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; flush and return True if that changed
        the cache. Re-assigning the latest epoch at the same or a later offset is a no-op;
        entries that would break monotonicity are removed first.

        ``flush=False`` (the append path, on the event loop) only marks the cache dirty: the
        log's flush writes it (:meth:`flush_if_dirty`, in an executor) before it moves the
        recovery point past the new entry, and recovery re-assigns epochs from the batches above
        the recovery point -- so a crash loses nothing that was not already to be recovered
        (Kafka too stopped fsyncing this file under the log's lock, KAFKA-15046)."""
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            if flush:
                self._flush()
            else:
                self._dirty = True
        return changed

    def assign_all(self, entries: Iterable[EpochEntry]) -> None:
        """Assign several entries, then flush once (when there were any)."""
        entries = list(entries)
        for entry in entries:
            self._assign(EpochEntry(*entry))
        if entries:
            self._flush()

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Remove entries whose start offset is >= ``end_offset`` (after the log was truncated to
        ``end_offset``); a negative offset removes nothing. Returns the removed entries."""
        removed = _truncate_from_end(self._entries, end_offset)
        if removed:
            self._flush()
        return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """Forget history below a new log start offset: entries starting at or before
        ``start_offset`` are removed and the last of them comes back starting at
        ``start_offset`` (so ``truncate_from_start(6)`` keeps an entry at 6). Returns the removed
        entries."""
        removed = _truncate_from_start(self._entries, start_offset)
        if removed:
            self._flush()
        return removed

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self._flush()

    def clear(self) -> None:
        """Empty the cache without touching the file."""
        self._entries.clear()

    def flush(self) -> None:
        self._flush()

    def flush_if_dirty(self) -> bool:
        """Write the checkpoint if an ``assign(..., flush=False)`` changed the cache since the
        last write (blocking: executor threads). Returns whether it wrote."""
        if not self._dirty:
            return False
        self._flush()
        return True

    def _flush(self) -> None:
        # dirty is cleared before the entries are copied: an assign on the loop meanwhile
        # marks it again, so the next flush writes that entry
        self._dirty = False
        try:
            self.checkpoint.write(list(self._entries), sync=self.sync)
        except BaseException:
            self._dirty = True  # the file is stale (a full disk): the next flush_if_dirty retries
            raise

    # -- queries ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def non_empty(self) -> bool:
        return bool(self._entries)

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The epoch of the latest entry (the current leader's, on a leader), or None."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def _index_above(self, epoch: int) -> int:
        """Index of the first entry with an epoch > ``epoch``."""
        return bisect.bisect_right(self._entries, epoch, key=lambda e: e.epoch)

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below ``epoch`` (default: below the latest epoch), or None."""
        entry = self.previous_entry(epoch)
        return entry.epoch if entry else None

    def previous_entry(self, epoch: int | None = None) -> EpochEntry | None:
        if epoch is None:
            if not self._entries:
                return None
            epoch = self._entries[-1].epoch
        i = bisect.bisect_left(self._entries, epoch, key=lambda e: e.epoch)
        return self._entries[i - 1] if i > 0 else None

    def next_epoch(self, epoch: int) -> int | None:
        i = self._index_above(epoch)
        return self._entries[i].epoch if i < len(self._entries) else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        i = bisect.bisect_left(self._entries, epoch, key=lambda e: e.epoch)
        if i < len(self._entries) and self._entries[i].epoch == epoch:
            return self._entries[i]
        return None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch; see the module docstring."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        latest = self.latest_epoch
        if latest is not None and latest == requested_epoch:
            return requested_epoch, log_end_offset
        i = self._index_above(requested_epoch)
        if i >= len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[i]
        if i == 0:
            return requested_epoch, higher.start_offset
        return self._entries[i - 1].epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset`` (largest entry starting at or before it), or None."""
        i = bisect.bisect_right(self._entries, offset, key=lambda e: e.start_offset)
        return self._entries[i - 1].epoch if i > 0 else None

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """The entries as they would be after truncating to [start_offset, end_offset); the
        cache is not changed. A negative start_offset means no start truncation."""
        entries = list(self._entries)
        if start_offset >= 0:
            _truncate_from_start(entries, start_offset)
        _truncate_from_end(entries, end_offset)
        return entries

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.topic_partition!r}, {self._entries})"
