"""TransactionIndex: the aborted transactions whose ABORT markers are in one log segment.

File: ``<20-digit segment base offset>.txnindex`` next to the segment's ``.log`` (see
:func:`transaction_index_file`). It is a plain concatenation of 34-byte big-endian entries
(Kafka's ``AbortedTxn``)::

    0  version             int16  0
    2  producer_id         int64
    10 first_offset        int64  first offset of the aborted transaction
    18 last_offset         int64  offset of its ABORT marker
    26 last_stable_offset  int64  the LSO when the marker was written

Unlike the offset and time indexes it is neither preallocated nor memory-mapped, and the file is
only created by the first :meth:`TransactionIndex.append`. READ_COMMITTED fetches use
:meth:`TransactionIndex.collect_aborted_txns` to list the aborted transactions overlapping the
fetched range.

Invariants:

* ``last_offset`` strictly increases from entry to entry; :meth:`TransactionIndex.append` raises
  ValueError otherwise. (Kafka only checks against entries appended since the index was opened;
  this class also checks against the entries already in the file.)
* Readers only look at whole entries; a torn trailing partial entry is ignored by reads and
  reported by :meth:`TransactionIndex.sanity_check`, which raises :class:`CorruptIndexError` so
  recovery rebuilds the index (STYLE #14) instead of appending after garbage.
* An entry whose version is above 0 raises CorruptIndexError when read.

Who may call: the segment's owner (the partition's log), one call at a time -- there is no lock.
All methods do blocking file I/O. Imports only the stdlib.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

__all__ = [
    "ABORTED_TXN_SIZE",
    "ABORTED_TXN_VERSION",
    "TXN_INDEX_SUFFIX",
    "AbortedTxn",
    "CorruptIndexError",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "transaction_index_file",
]

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34
assert ABORTED_TXN_SIZE == 34


class CorruptIndexError(Exception):
    """An index file that fails its sanity check (Kafka's ``CorruptIndexException``)."""


def transaction_index_file(
    directory: str | os.PathLike[str], base_offset: int, suffix: str = ""
) -> Path:
    """``<dir>/<base offset, 20 digits>.txnindex<suffix>`` (Kafka's LogFileUtils naming)."""
    return Path(directory) / f"{base_offset:020d}{TXN_INDEX_SUFFIX}{suffix}"


class _CompletedTxnLike(Protocol):
    producer_id: int
    first_offset: int
    last_offset: int


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` entry (always written with version 0)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    @classmethod
    def of(cls, completed_txn: _CompletedTxnLike, last_stable_offset: int) -> AbortedTxn:
        """From a completed (aborted) transaction and the LSO computed for it."""
        return cls(
            completed_txn.producer_id,
            completed_txn.first_offset,
            completed_txn.last_offset,
            last_stable_offset,
        )

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> AbortedTxn:
        """Decode the entry at ``pos``; CorruptIndexError for an unknown version, ValueError
        (struct.error) when fewer than 34 bytes remain."""
        version, *fields = _ENTRY.unpack_from(buf, pos)
        if version > ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {version}, current version is "
                f"{ABORTED_TXN_VERSION}"
            )
        return cls(*fields)


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a fetch range; ``is_complete`` is True when the search
    need not continue into the next segment."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` of the segment starting at ``start_offset``; see the module docstring."""

    def __init__(self, start_offset: int, path: str | os.PathLike[str]) -> None:
        self.start_offset = start_offset
        self._path = Path(path)
        self._fd: int | None = None
        self._end = 0  # bytes of the file this index considers written (Kafka's channel position)
        self._last_offset: int | None = None
        if self._path.exists():
            self._open()
            entries = list(self._iter())
            self._last_offset = entries[-1][1].last_offset if entries else None

    # -- file handling ---------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            self._end = os.fstat(self._fd).st_size
        return self._fd

    def _iter(self) -> Iterator[tuple[int, AbortedTxn]]:
        """(position, entry) for every whole entry."""
        if self._fd is None and not self._path.exists():
            return
        fd = self._open()
        end = self._end
        data = os.pread(fd, end, 0) if end else b""
        for pos in range(0, len(data) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
            try:
                txn = AbortedTxn.from_bytes(data, pos)
            except CorruptIndexError as e:
                raise CorruptIndexError(
                    f"{e} in transaction index {self._path.absolute()}"
                ) from None
            yield pos, txn

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the file; a later call reopens it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete_if_exists(self) -> bool:
        self.close()
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the file (if it exists) to ``path``, e.g. with a ``.deleted`` suffix."""
        new = Path(path)
        try:
            if self._path.exists():
                os.replace(self._path, new)
        finally:
            self._path = new

    def update_parent_dir(self, parent_dir: str | os.PathLike[str]) -> None:
        """Point at the same file name in ``parent_dir`` (after the directory was renamed)."""
        self._path = Path(parent_dir) / self._path.name

    @property
    def size_in_bytes(self) -> int:
        return (
            self._end
            if self._fd is not None
            else (self._path.stat().st_size if self._path.exists() else 0)
        )

    # -- updates ---------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise ValueError(
                "The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset {self._last_offset} "
                f"of index {self._path.absolute()}"
            )
        fd = self._open()
        data = txn.to_bytes()
        written = os.pwrite(fd, data, self._end)
        if written != len(data):  # pragma: no cover - regular files do not short-write
            raise OSError(f"short write to {self._path}: {written} of {len(data)} bytes")
        self._end += len(data)
        self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= ``offset`` (the log was truncated to it)."""
        new_last: int | None = None
        for pos, txn in self._iter():
            if txn.last_offset >= offset:
                os.ftruncate(self._open(), pos)
                self._end = pos
                self._last_offset = new_last
                return
            new_last = txn.last_offset

    def reset(self) -> None:
        """Remove all entries (truncate the file to 0 if it exists)."""
        if self._fd is not None or self._path.exists():
            os.ftruncate(self._open(), 0)
            self._end = 0
        self._last_offset = None

    # -- queries ---------------------------------------------------------------------------

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for _, txn in self._iter()]

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset): last_offset >=
        fetch_offset and first_offset < upper_bound_offset. Complete (no need to look at the next
        segment) as soon as an entry's LSO is >= upper_bound_offset."""
        if self._last_offset is None:
            # no entries (known since open: every change keeps _last_offset current); this is
            # every read_committed fetch of a log without aborted transactions, so no stat()
            return TxnIndexSearchResult([], False)
        found: list[AbortedTxn] = []
        for _, txn in self._iter():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an entry ends before this segment starts, an entry has an
        unknown version, or the file ends in a partial entry."""
        for _, txn in self._iter():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self._path.absolute()} "
                    f"is less than start offset {self.start_offset}"
                )
        size = self.size_in_bytes
        if size % ABORTED_TXN_SIZE:
            raise CorruptIndexError(
                f"Transaction index {self._path.absolute()} has size {size}, not a multiple of "
                f"the entry size {ABORTED_TXN_SIZE}"
            )

    def __repr__(self) -> str:
        return f"TransactionIndex(start_offset={self.start_offset}, path={str(self._path)!r})"
