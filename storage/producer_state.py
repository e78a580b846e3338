"""ProducerStateManager: idempotent/transactional producer state of one partition.

Kafka's ``ProducerStateManager``, ``ProducerStateEntry``, ``ProducerAppendInfo`` and
``BatchMetadata`` (``storage/internals/log``), with Kafka 3.x rules. For every producer id seen on
the partition the manager keeps a :class:`ProducerStateEntry`: the producer epoch, the metadata of
its last (up to 5) batches, the coordinator epoch of its last transaction marker, the timestamp of
its last write and the first offset of its ongoing transaction, if any.

Sequence and epoch rules (``ProducerAppendInfo.checkProducerEpoch`` / ``checkSequence``), for a
data batch with producer epoch ``e``, first sequence ``s``, against the producer's current epoch
``E`` and last sequence ``L``:

* ``e < E``: INVALID_PRODUCER_EPOCH (47). (Since Kafka 2.7 the produce path answers
  INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED; PRODUCER_FENCED (90) is the transaction
  coordinator's answer and never comes from here.) Replication only logs it.
* ``e > E`` (epoch bump): ``s`` must be 0 unless the producer is unknown (``E == -1``), else
  OUT_OF_ORDER_SEQUENCE_NUMBER (45).
* ``e == E``: ``s`` must follow ``L`` (``s == L + 1``, or ``s == 0`` after ``L == 2**31 - 1``:
  sequences wrap at Int.MAX), else OUT_OF_ORDER_SEQUENCE_NUMBER. When the producer has no
  batches left (only a marker), ``L`` is -1, so ``s`` must be 0.
* Unknown producer (no entry; e.g. expired or its data deleted by retention): any sequence is
  accepted. Kafka 3.x (since KIP-360, 2.5) no longer answers UNKNOWN_PRODUCER_ID (59) from the
  log; the error is defined here for completeness but not raised.
* Duplicates are detected before validation, only for client appends, by
  :meth:`ProducerStateEntry.find_duplicate_batch`: same epoch and exactly the (first, last)
  sequence range of one of the last 5 batches. The broker then answers with that batch's offsets
  and writes nothing. An older retry outside those 5 fails the sequence check with
  OUT_OF_ORDER_SEQUENCE_NUMBER; DUPLICATE_SEQUENCE_NUMBER (46) is not raised by Kafka 3.x either.
* A non-transactional batch while the producer has an ongoing transaction: INVALID_TXN_STATE (48).
* A transaction marker with a coordinator epoch below the last one seen:
  TRANSACTION_COORDINATOR_FENCED (52) (replication only logs it).

Origins (:class:`AppendOrigin`): CLIENT gets both checks, COORDINATOR (group coordinator writes,
transaction markers) only the epoch check, REPLICATION (followers, log recovery) no check at all.
Transaction verification (KIP-890 part 1, :mod:`storage.verification_guard`): a client or
coordinator append given a verification guard (the produce path passes one when
transaction.partition.verification.enable is on) refuses a transactional data batch with
INVALID_TXN_STATE ("Record was not part of an ongoing transaction") unless the producer has an
ongoing transaction on the partition or its verification entry holds that very guard. A
duplicate is answered before this check, as Kafka does. Appending a transactional batch or a
marker of the producer clears its verification entry; entries expire with the producers. While
an entry is pending, a client batch with a first sequence above the entry's lowest sequence is
OUT_OF_ORDER_SEQUENCE_NUMBER (a later pipelined batch must not overtake the first).

Snapshot file ``<dir>/<20-digit offset>.snapshot`` (the state as of that offset, exclusive),
big-endian, Kafka's ``PID_SNAPSHOT_MAP_SCHEMA``::

    0  version   int16   1
    2  crc       uint32  CRC-32C of every byte after this field (from offset 6 to the end)
    6  count     int32   number of entries, then per entry (46 bytes):
         producer_id               int64
         epoch                     int16
         last_sequence             int32   -1 when the producer has no batch metadata
         last_offset               int64   -1 when the producer has no batch metadata
         offset_delta              int32   last offset - first offset of the last batch
         timestamp                 int64   last timestamp of the producer
         coordinator_epoch         int32
         current_txn_first_offset  int64   -1 when no transaction is ongoing

Only the last batch of each producer is persisted (as in Kafka), so after a restart only that
batch is recognised as a duplicate. Entries are written in ascending producer id (Kafka writes
HashMap order; readers do not care). Snapshots are written to ``.tmp`` and renamed (Kafka writes
in place), so a crash never leaves a torn snapshot under the real name; a corrupt snapshot is
deleted on load and the next older one is tried (:class:`CorruptSnapshotError`).

Invariants:

* A ProducerAppendInfo never mutates the manager; only :meth:`ProducerStateManager.update`
  (and :meth:`~ProducerStateManager.apply_append`) commit it.
* ``map_end_offset`` is the offset up to which the state reflects the log (exclusive); a
  snapshot is written at it only when it moved past the last snapshot.
* Ongoing transactions are keyed by first offset; completed ones stay "unreplicated" until the
  high watermark passes their marker, and both bound :meth:`~ProducerStateManager.first_unstable_offset`.

Who may call: the partition's log (its single owner task), one call at a time -- no locks.
Snapshot, truncate and load methods do blocking file I/O. Times are passed in explicitly (ms).
Imports :mod:`protocol`, :mod:`storage.checkpoints` (atomic writes), the stdlib and ``crc32c``
(the project's CRC-32C dependency, as :mod:`protocol.records` uses).
"""

from __future__ import annotations

import bisect
import enum
import os
import struct
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from crc32c import crc32c as _crc32c

from protocol import records as _records
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RecordsError,
)
from storage.checkpoints import atomic_write
from storage.verification_guard import SENTINEL, VerificationGuard, VerificationStateEntry

__all__ = [
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "LATE_TRANSACTION_BUFFER_MS",
    "NUM_BATCHES_TO_RETAIN",
    "PRODUCER_SNAPSHOT_VERSION",
    "SNAPSHOT_SUFFIX",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "DuplicateSequenceError",
    "EndTransactionMarker",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "OutOfOrderSequenceError",
    "ProducerAppendInfo",
    "ProducerBatch",
    "ProducerFencedError",
    "ProducerStateAnalysis",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "TransactionCoordinatorFencedError",
    "TxnMetadata",
    "UnknownProducerIdError",
    "decode_snapshot",
    "decrement_sequence",
    "encode_snapshot",
    "increment_sequence",
    "producer_batches",
    "read_snapshot",
    "snapshot_file",
    "write_snapshot",
]

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000

_INT32_MAX = (1 << 31) - 1

_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_OFFSET = 2
_ENTRIES_OFFSET = 6  # the CRC covers from here (entry count included) to the end
assert _ENTRY.size == 46


# ---------------------------------------------------------------------------------------------
# errors


class ProducerStateError(KafkaProtocolError):
    """A produce the partition must refuse, carrying Kafka's error code (``.code``, class
    attribute ``CODE``) and name (``.error_name``); the broker copies the code into the
    partition's response. Same conventions as :mod:`storage.errors`."""

    CODE: int = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None) -> None:
        super().__init__(self.CODE, message)

    @property
    def error_name(self) -> str:
        """Kafka's name of the error, e.g. ``"OUT_OF_ORDER_SEQUENCE_NUMBER"``."""
        return self.info.name


class OutOfOrderSequenceError(ProducerStateError):
    CODE = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # 45


class DuplicateSequenceError(ProducerStateError):
    """Defined for completeness; Kafka 3.x does not raise it (see the module docstring)."""

    CODE = ErrorCode.DUPLICATE_SEQUENCE_NUMBER  # 46


class InvalidProducerEpochError(ProducerStateError):
    CODE = ErrorCode.INVALID_PRODUCER_EPOCH  # 47


class InvalidTxnStateError(ProducerStateError):
    CODE = ErrorCode.INVALID_TXN_STATE  # 48


class TransactionCoordinatorFencedError(ProducerStateError):
    CODE = ErrorCode.TRANSACTION_COORDINATOR_FENCED  # 52


class UnknownProducerIdError(ProducerStateError):
    """Defined for completeness; Kafka 3.x does not raise it (see the module docstring)."""

    CODE = ErrorCode.UNKNOWN_PRODUCER_ID  # 59


class ProducerFencedError(ProducerStateError):
    """The transaction coordinator's error; the log never raises it (see the module docstring)."""

    CODE = ErrorCode.PRODUCER_FENCED  # 90


class CorruptSnapshotError(Exception):
    """A producer snapshot file that cannot be trusted (Kafka's ``CorruptSnapshotException``)."""


# ---------------------------------------------------------------------------------------------
# value types


class AppendOrigin(enum.Enum):
    """Where an append comes from, which decides how much is validated (Kafka's AppendOrigin)."""

    CLIENT = "client"  # produce requests: epoch + sequence checks
    COORDINATOR = "coordinator"  # group coordinator writes, transaction markers: epoch check
    REPLICATION = "replication"  # followers and log recovery: no checks


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` wrapping below 0 to Int.MAX (Kafka's DefaultRecordBatch)."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past Int.MAX to 0 (Kafka's DefaultRecordBatch)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch (Kafka's ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class EndTransactionMarker(NamedTuple):
    """The content of a control batch's record: ``control_type`` 0 ABORT / 1 COMMIT."""

    control_type: int
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == CONTROL_ABORT


class CompletedTxn(NamedTuple):
    """A transaction ended by the marker at ``last_offset`` (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    """An ongoing (``last_offset`` None) or completed-but-unreplicated transaction."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


class ProducerBatch(NamedTuple):
    """What the producer state needs of a batch: the header fields plus, for a control batch,
    its transaction marker. Build one with :meth:`from_header` or :func:`producer_batches`."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    records_count: int
    marker: EndTransactionMarker | None = None

    @classmethod
    def from_header(cls, h: Any, marker: EndTransactionMarker | None = None) -> ProducerBatch:
        """From a :class:`protocol.records.BatchHeader` (or anything with the same fields)."""
        return cls(
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.last_sequence,
            h.base_offset,
            h.last_offset,
            h.max_timestamp,
            h.is_transactional,
            h.is_control,
            _records_count(h),
            marker,
        )


def _records_count(batch: Any) -> int:
    count = getattr(batch, "records_count", None)
    if count is None:
        count = getattr(batch, "record_count", 1)
    return int(count)


def producer_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[ProducerBatch]:
    """The batches with a producer id in concatenated v2 batches (e.g. a segment's bytes), with
    the transaction marker of control batches decoded. CRCs are not checked (log recovery has
    already validated what it keeps); RecordsError for a malformed batch or an unknown control
    record type in a transactional control batch. A truncated final batch is not yielded."""
    for p, _size in _records.iter_batches(buf, pos):
        h = _records.read_header(buf, p)
        if h.producer_id <= NO_PRODUCER_ID:
            continue
        marker = None
        if h.is_control and h.records_count > 0:
            _, recs = _records.decode_records(buf, p, check_crc=False)
            if recs:
                ctype, coordinator_epoch = _records.parse_control_record(recs[0])
                if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
                    raise RecordsError(
                        f"Invalid control record type {ctype} for an end transaction marker "
                        f"at offset {h.base_offset}"
                    )
                marker = EndTransactionMarker(ctype, coordinator_epoch)
        yield ProducerBatch.from_header(h, marker)


# ---------------------------------------------------------------------------------------------
# ProducerStateEntry


class ProducerStateEntry:
    """The state of one producer id (Kafka's ``ProducerStateEntry``).

    ``batch_metadata`` holds at most 5 batches, lowest sequence first; adding a sixth drops the
    oldest, and a change of producer epoch clears it.
    """

    __slots__ = (
        "batch_metadata",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int | None = None,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        return cls(producer_id)

    @property
    def is_empty(self) -> bool:
        """True when no batch metadata is retained (not: when the producer is unknown)."""
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def copy(
        self, producer_id: int | None = None, *, with_batches: bool = True
    ) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id if producer_id is None else producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            self.batch_metadata if with_batches else (),
        )

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch(
        self,
        producer_epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Merge the entry a ProducerAppendInfo built (its batches come after ours)."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.batch_metadata.extend(next_entry.batch_metadata)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def update_for_marker(
        self, producer_epoch: int, coordinator_epoch: int, timestamp: int
    ) -> None:
        """A transaction marker: maybe a new epoch, the transaction is over."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batch_metadata:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def find_duplicate_batch(self, batch: Any) -> BatchMetadata | None:
        """The retained batch that ``batch`` (producer_epoch, base_sequence, last_sequence)
        repeats, or None."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (
            self.producer_id == other.producer_id
            and self.producer_epoch == other.producer_epoch
            and self.coordinator_epoch == other.coordinator_epoch
            and self.last_timestamp == other.last_timestamp
            and self.current_txn_first_offset == other.current_txn_first_offset
            and list(self.batch_metadata) == list(other.batch_metadata)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, "
            f"current_txn_first_offset={self.current_txn_first_offset}, "
            f"coordinator_epoch={self.coordinator_epoch}, last_timestamp={self.last_timestamp}, "
            f"batch_metadata={list(self.batch_metadata)})"
        )


# ---------------------------------------------------------------------------------------------
# ProducerAppendInfo


class ProducerAppendInfo:
    """Validates the batches one producer appends in one log append and accumulates the
    resulting state, without touching the manager until :meth:`ProducerStateManager.update`.

    Raises :class:`ProducerStateError` subclasses (see the module docstring for the rules); after
    an error the instance must be discarded.
    """

    def __init__(
        self,
        producer_id: int,
        current_entry: ProducerStateEntry,
        origin: AppendOrigin,
        topic_partition: str = "",
        verification_state_entry: VerificationStateEntry | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.topic_partition = topic_partition
        # KIP-890: the producer's pending verification, whose lowest sequence bounds the first append
        self.verification_state_entry = verification_state_entry
        # Kafka: currentEntry.withProducerIdAndBatchMetadata(producerId, Optional.empty())
        self.updated_entry = current_entry.copy(producer_id, with_batches=False)
        self.started_transactions: list[TxnMetadata] = []
        self.transactional = False  # a transactional batch or a marker was appended

    # -- checks ----------------------------------------------------------------------------

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if producer_epoch < current:
            if self.origin is AppendOrigin.REPLICATION:
                return  # Kafka logs a warning and accepts
            raise InvalidProducerEpochError(
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {producer_epoch}, which is smaller than the last "
                f"seen epoch {current}"
            )

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        verifying = self.verification_state_entry
        if verifying is not None and first_seq > verifying.lowest_sequence:
            # a later batch of the producer must not overtake the one whose verification started
            # first (an unknown producer's sequence is otherwise free below)
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset} in "
                f"partition {self.topic_partition}: {first_seq} (incoming seq. number), "
                f"{verifying.lowest_sequence} (earliest seen sequence)"
            )
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.topic_partition}: {producer_epoch} "
                    f"(request epoch), {first_seq} (seq. number), {updated.producer_epoch} "
                    "(current producer epoch)"
                )
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_seq = self.current_entry.last_seq
        else:  # a marker in this same append bumped the epoch and cleared the batches
            current_last_seq = NO_SEQUENCE
        # With no current epoch (all the producer's data deleted by retention or DeleteRecords),
        # any sequence is accepted.
        if not (
            self.current_entry.producer_epoch == NO_PRODUCER_EPOCH
            or _in_sequence(current_last_seq, first_seq)
        ):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.topic_partition}: {first_seq} (incoming seq. "
                f"number), {current_last_seq} (current end sequence number)"
            )

    # -- appends ---------------------------------------------------------------------------

    def append(self, batch: Any) -> CompletedTxn | None:
        """Append a batch-like object (:class:`ProducerBatch`, or a
        :class:`protocol.records.BatchHeader` for data batches). A control batch needs its
        ``marker``; an empty control batch (its transaction cleaned away) changes nothing."""
        if batch.is_transactional:
            self.transactional = True
        if batch.is_control:
            marker = getattr(batch, "marker", None)
            if marker is None:
                if _records_count(batch) == 0:
                    return None
                raise TypeError(
                    "a control batch needs its EndTransactionMarker: pass a ProducerBatch "
                    "(see ProducerBatch.from_header and producer_batches)"
                )
            return self.append_end_txn_marker(
                marker, batch.producer_epoch, batch.base_offset, batch.max_timestamp
            )
        self.append_data_batch(
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.max_timestamp,
            batch.base_offset,
            batch.last_offset,
            batch.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self.updated_entry
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if updated.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.topic_partition}"
            )
        if updated.current_txn_first_offset is None and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, marker: EndTransactionMarker, producer_epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """A COMMIT/ABORT marker at ``offset``; the transaction it completes, if it had data."""
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated_entry
        if updated.coordinator_epoch > marker.coordinator_epoch:
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producerId {self.producer_id} at offset "
                    f"{offset} in partition {self.topic_partition}: {marker.coordinator_epoch} "
                    f"(zombie), {updated.coordinator_epoch} (current)"
                )
        completed = None
        if updated.current_txn_first_offset is not None:
            completed = CompletedTxn(
                self.producer_id, updated.current_txn_first_offset, offset, marker.is_abort
            )
        updated.update_for_marker(producer_epoch, marker.coordinator_epoch, timestamp)
        return completed

    def to_entry(self) -> ProducerStateEntry:
        return self.updated_entry

    def __repr__(self) -> str:
        u = self.updated_entry
        return (
            f"ProducerAppendInfo(producer_id={self.producer_id}, producer_epoch="
            f"{u.producer_epoch}, first_sequence={u.first_seq}, last_sequence={u.last_seq}, "
            f"current_txn_first_offset={u.current_txn_first_offset}, coordinator_epoch="
            f"{u.coordinator_epoch}, last_timestamp={u.last_timestamp}, started_transactions="
            f"{self.started_transactions})"
        )


class ProducerStateAnalysis(NamedTuple):
    """The result of :meth:`ProducerStateManager.analyze_and_validate`."""

    updated_producers: dict[int, ProducerAppendInfo]
    completed_txns: list[CompletedTxn]
    duplicate: BatchMetadata | None


# ---------------------------------------------------------------------------------------------
# snapshots


def snapshot_file(directory: str | os.PathLike[str], offset: int) -> Path:
    """``<dir>/<offset, 20 digits>.snapshot``."""
    return Path(directory) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _offset_from_snapshot_name(name: str) -> int | None:
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    prefix = name.split(".", 1)[0]
    return int(prefix) if prefix.isascii() and prefix.isdigit() else None


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot file bytes for ``entries`` (written in ascending producer id)."""
    ordered = sorted(entries, key=lambda e: e.producer_id)
    out = bytearray(_HEADER.size + _ENTRY.size * len(ordered))
    _HEADER.pack_into(out, 0, PRODUCER_SNAPSHOT_VERSION, 0, len(ordered))
    pos = _HEADER.size
    for e in ordered:
        txn = e.current_txn_first_offset
        _ENTRY.pack_into(
            out,
            pos,
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if txn is None else txn,
        )
        pos += _ENTRY.size
    struct.pack_into(">I", out, _CRC_OFFSET, _crc32c(memoryview(out)[_ENTRIES_OFFSET:]))
    return bytes(out)


def decode_snapshot(data: bytes | bytearray | memoryview) -> list[ProducerStateEntry]:
    """Parse snapshot bytes; CorruptSnapshotError for a wrong version, a CRC mismatch, or a size
    that does not match the entry count."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {len(data)} bytes, shorter than the "
            f"{_HEADER.size}-byte header"
        )
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = _crc32c(memoryview(data)[_ENTRIES_OFFSET:])
    if crc != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
            f"Computed crc: {computed}"
        )
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {count} entries declared, "
            f"{len(data) - _HEADER.size} bytes of entries present"
        )
    entries = []
    for pid, epoch, seq, offset, delta, ts, coord, txn in _ENTRY.iter_unpack(
        memoryview(data)[_HEADER.size :]
    ):
        batches = [BatchMetadata(seq, offset, delta, ts)] if offset >= 0 else []
        entries.append(
            ProducerStateEntry(pid, epoch, coord, ts, txn if txn >= 0 else None, batches)
        )
    return entries


def write_snapshot(
    path: str | os.PathLike[str], entries: Iterable[ProducerStateEntry], *, sync: bool = True
) -> None:
    atomic_write(path, encode_snapshot(entries), sync=sync)


def read_snapshot(path: str | os.PathLike[str]) -> list[ProducerStateEntry]:
    try:
        return decode_snapshot(Path(path).read_bytes())
    except CorruptSnapshotError as e:
        raise CorruptSnapshotError(f"{e} (file {path})") from None


# ---------------------------------------------------------------------------------------------
# ProducerStateManager


class _OffsetMap:
    """Transactions keyed by first offset, iterated in offset order (Kafka's TreeMap)."""

    __slots__ = ("_by_offset", "_keys")

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._by_offset: dict[int, TxnMetadata] = {}

    def put(self, offset: int, txn: TxnMetadata) -> None:
        if offset not in self._by_offset:
            bisect.insort(self._keys, offset)
        self._by_offset[offset] = txn

    def pop(self, offset: int) -> TxnMetadata | None:
        txn = self._by_offset.pop(offset, None)
        if txn is not None:
            del self._keys[bisect.bisect_left(self._keys, offset)]
        return txn

    def first(self) -> TxnMetadata | None:
        return self._by_offset[self._keys[0]] if self._keys else None

    def values(self) -> list[TxnMetadata]:
        return [self._by_offset[k] for k in self._keys]

    def clear(self) -> None:
        self._keys.clear()
        self._by_offset.clear()

    def __len__(self) -> int:
        return len(self._keys)


class ProducerStateManager:
    """Producer id -> :class:`ProducerStateEntry` for one partition, its ongoing transactions,
    and its snapshot files in ``log_dir``. See the module docstring.

    Typical produce path (Kafka's ``UnifiedLog.append``)::

        analysis = psm.analyze_and_validate(batches, AppendOrigin.CLIENT)  # may raise
        if analysis.duplicate: answer with its offsets, write nothing
        else: write the batches, then
              for txn, lso in psm.apply_append(analysis, next_offset):
                  if txn.is_aborted: txn_index.append(AbortedTxn.of(txn, lso))
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        topic_partition: str = "",
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.topic_partition = topic_partition
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._verification_states: dict[int, VerificationStateEntry] = {}
        self._ongoing = _OffsetMap()
        self._unreplicated = _OffsetMap()
        self._oldest_txn_last_timestamp = -1
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._snapshots: dict[int, Path] = self._load_snapshots()

    # -- snapshot files --------------------------------------------------------------------

    def _load_snapshots(self) -> dict[int, Path]:
        """Scan ``log_dir`` for ``*.snapshot`` files; stale ``*.snapshot.tmp`` are removed."""
        found: dict[int, Path] = {}
        if not self.log_dir.is_dir():
            return found
        for entry in os.scandir(self.log_dir):
            if entry.name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass
                continue
            offset = _offset_from_snapshot_name(entry.name)
            if offset is not None and entry.is_file():
                found[offset] = Path(entry.path)
        return dict(sorted(found.items()))

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    @property
    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def fetch_snapshot(self, offset: int) -> Path | None:
        """The snapshot file at exactly ``offset``, if any."""
        return self._snapshots.get(offset)

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True) -> Path | None:
        """Write ``<map_end_offset>.snapshot`` unless a snapshot at that offset or later exists
        (Kafka's ``takeSnapshot``). With ``offset``, first ``update_map_end_offset(offset)``
        (what a segment roll does). Returns the file written, or None."""
        if offset is not None:
            self.update_map_end_offset(offset)
        if self._last_map_offset <= self._last_snap_offset:
            return None
        path = snapshot_file(self.log_dir, self._last_map_offset)
        write_snapshot(path, self._producers.values(), sync=sync)
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshot files below ``offset`` (e.g. below a new log start offset)."""
        for off in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(off)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` and rename it with ``.deleted`` (for asynchronous
        deletion with its segment); None when there is none or it is already gone."""
        path = self._snapshots.pop(offset, None)
        if path is None:
            return None
        target = path.with_name(path.name + DELETED_SUFFIX)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        return target

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots with no segment at their offset, except the largest one when it is
        above every segment base offset (written at clean shutdown)."""
        bases = set(segment_base_offsets)
        snapshots = self._load_snapshots()
        stray: int | None = None
        for off in sorted(snapshots):
            if off not in bases:
                if stray is not None:
                    snapshots.pop(stray).unlink(missing_ok=True)
                stray = off
        if stray is not None and bases and stray < max(bases):
            snapshots.pop(stray).unlink(missing_ok=True)
        self._snapshots = snapshots

    def update_parent_dir(self, parent_dir: str | os.PathLike[str]) -> None:
        """The partition directory was renamed (e.g. for deletion); follow it."""
        self.log_dir = Path(parent_dir)
        self._snapshots = {o: self.log_dir / p.name for o, p in self._snapshots.items()}

    # -- loading and truncation ------------------------------------------------------------

    def _is_expired(
        self, now_ms: int, entry: ProducerStateEntry, expiration_ms: int | None = None
    ) -> bool:
        if expiration_ms is None:
            expiration_ms = self.producer_id_expiration_ms
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= expiration_ms
        )

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        pid = entry.producer_id
        self._producers[pid] = entry
        if entry.current_txn_first_offset is not None:
            first = entry.current_txn_first_offset
            self._ongoing.put(first, TxnMetadata(pid, first))

    def load_from_snapshot(self, log_start_offset: int, now_ms: int | None = None) -> None:
        """Load the latest readable snapshot (deleting corrupt ones on the way) into this
        manager, which should be empty; unexpired producers only (``now_ms`` defaults to the
        wall clock). Without any snapshot the state starts empty at ``log_start_offset``."""
        if now_ms is None:
            now_ms = _now_ms()
        while self._snapshots:
            offset = max(self._snapshots)
            try:
                entries = read_snapshot(self._snapshots[offset])
            except (CorruptSnapshotError, FileNotFoundError):
                self._remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            self._update_oldest_txn_timestamp()
            return
        self._last_snap_offset = self._last_map_offset = log_start_offset

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> None:
        """Delete snapshots outside (log_start_offset, log_end_offset] and, when the state is not
        already at ``log_end_offset``, reload it from the latest remaining snapshot (the caller
        then replays the log from :attr:`map_end_offset`). ``log_end_offset`` must not exceed the
        high watermark. ``now_ms`` (default: wall clock) decides which producers expired."""
        for off in list(self._snapshots):
            if off > log_end_offset or off <= log_start_offset:
                self._remove_and_delete_snapshot(off)
        if log_end_offset != self._last_map_offset:
            self._producers.clear()
            self._ongoing.clear()
            self._unreplicated.clear()
            self._update_oldest_txn_timestamp()
            self.load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, delete all snapshots, and start at ``offset``."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for off in list(self._snapshots):
            self._remove_and_delete_snapshot(off)
        self._last_snap_offset = 0
        self._last_map_offset = offset
        self._update_oldest_txn_timestamp()

    def truncate_fully_and_reload_snapshots(self) -> None:
        self.truncate_fully_and_start_at(0)
        self._snapshots = self._load_snapshots()

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_transactions(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self._last_snap_offset = latest if latest is not None else log_start_offset

    def remove_expired_producers(
        self, now_ms: int, producer_id_expiration_ms: int | None = None
    ) -> None:
        """Forget producers idle for at least ``producer_id_expiration_ms`` (default: the
        manager's producer.id.expiration.ms, 86400000) that have no ongoing transaction, and
        verification entries as old (Kafka's removeExpiredProducers)."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if self._is_expired(now_ms, entry, producer_id_expiration_ms)
        ]
        for pid in expired:
            del self._producers[pid]
        # verifications never answered (the produce failed or its client went away) expire too
        expiration = self.producer_id_expiration_ms if producer_id_expiration_ms is None else producer_id_expiration_ms
        stale = [pid for pid, v in self._verification_states.items() if now_ms - v.timestamp >= expiration]
        for pid in stale:
            del self._verification_states[pid]

    # -- transaction verification (KIP-890) --------------------------------------------------

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """Kafka's UnifiedLog.hasOngoingTransaction: the producer's transaction has data here."""
        entry = self._producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def maybe_create_verification_state_entry(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int | None = None
    ) -> VerificationStateEntry:
        """The producer's verification entry, created with a fresh guard if it has none (a
        retry while a verification is pending reuses the guard)."""
        entry = self._verification_states.get(producer_id)
        if entry is None:
            entry = self._verification_states[producer_id] = VerificationStateEntry(
                _now_ms() if now_ms is None else now_ms, sequence, epoch)
        else:
            entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self._verification_states.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self._verification_states.pop(producer_id, None)

    # -- appends ---------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def prepare_update(
        self, producer_id: int, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> ProducerAppendInfo:
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self.topic_partition,
                                  self._verification_states.get(producer_id))

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Commit a ProducerAppendInfo (after its batches were written)."""
        pid = append_info.producer_id
        if pid == NO_PRODUCER_ID:
            raise ValueError(
                f"Invalid producer id {pid} passed to update for partition {self.topic_partition}"
            )
        updated = append_info.to_entry()
        current = self._producers.get(pid)
        if current is not None:
            current.update(updated)
        else:
            self._producers[pid] = updated
        for txn in append_info.started_transactions:
            self._ongoing.put(txn.first_offset, txn)
        self._update_oldest_txn_timestamp()

    def update_map_end_offset(self, last_offset: int) -> None:
        """The state now reflects the log up to ``last_offset`` (exclusive)."""
        self._last_map_offset = last_offset

    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    def analyze_and_validate(
        self, batches: Iterable[Any], origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> ProducerStateAnalysis:
        """Validate the batches of one append (offsets already assigned) against the producer
        state, without changing it (Kafka's ``UnifiedLog.analyzeAndValidateProducerState``).

        Batches without a producer id are skipped. For client appends, a batch that repeats one
        of its producer's last 5 batches stops the analysis with ``duplicate`` set: the append
        must not be written and is answered with the duplicate's offsets. With a
        ``verification_guard`` (None: the caller does not verify), a client's or coordinator's
        transactional data batch of a producer without an ongoing transaction here needs its
        entry to hold that guard (Kafka's batchMissingRequiredVerification), else
        InvalidTxnStateError. Raises ProducerStateError subclasses."""
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            pid = batch.producer_id
            if pid <= NO_PRODUCER_ID:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self._producers.get(pid)
                if entry is not None:
                    duplicate = entry.find_duplicate_batch(batch)
                    if duplicate is not None:
                        return ProducerStateAnalysis(updated, completed, duplicate)
            if (verification_guard is not None and batch.is_transactional and not batch.is_control
                    and origin is not AppendOrigin.REPLICATION
                    and not self.has_ongoing_transaction(pid)):
                pending = self._verification_states.get(pid)
                guard = pending.verification_guard if pending is not None else SENTINEL
                if not guard.verify(verification_guard):
                    raise InvalidTxnStateError("Record was not part of an ongoing transaction")
            info = updated.get(pid)
            if info is None:
                info = updated[pid] = self.prepare_update(pid, origin)
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        return ProducerStateAnalysis(updated, completed, None)

    def completed_transactions(self, analysis: ProducerStateAnalysis) -> list[tuple[CompletedTxn, int]]:
        """What :meth:`apply_append` of ``analysis`` will return -- each transaction it completes
        with the last stable offset to record for it -- without changing anything. Why: the log
        writes the aborted ones to ``.txnindex`` first, so a failed write leaves the producer
        state as it was (an append is all-or-nothing)."""
        if not analysis.completed_txns:
            return []
        ongoing = _OffsetMap()  # the ongoing transactions as apply_append will see them
        for txn in self._ongoing.values():
            ongoing.put(txn.first_offset, txn)
        for info in analysis.updated_producers.values():
            for txn in info.started_transactions:
                ongoing.put(txn.first_offset, txn)
        done = []
        for completed in analysis.completed_txns:
            done.append((completed, self.last_stable_offset(completed, ongoing)))
            ongoing.pop(completed.first_offset)
        return done

    def apply_append(
        self, analysis: ProducerStateAnalysis, next_offset: int
    ) -> list[tuple[CompletedTxn, int]]:
        """Commit an analysis whose batches were written, ending at ``next_offset`` (last offset
        + 1). Returns each completed transaction with the last stable offset to record for it
        in the transaction index (aborted ones go to ``.txnindex``): see
        :meth:`completed_transactions`. Changes memory only; raises nothing for a valid
        analysis."""
        if analysis.duplicate is not None:
            raise ValueError("a duplicate append is not written, so it cannot be applied")
        done = self.completed_transactions(analysis)
        for info in analysis.updated_producers.values():
            self.update(info)
            if info.transactional:  # the ongoing transaction (or its end) is the proof now
                self._verification_states.pop(info.producer_id, None)
        for txn, _lso in done:
            self.complete_txn(txn)
        self.update_map_end_offset(next_offset)
        return done

    def rebuild_from_batches(self, batches: Iterable[Any]) -> list[tuple[CompletedTxn, int]]:
        """Replay batches read from the log (recovery; Kafka's ``LogSegment.recover`` /
        ``rebuildProducerState``) with REPLICATION origin: no validation. Batches ending below
        :attr:`map_end_offset` are already reflected and skipped; the map end offset follows
        each batch. Control batches need their marker (use :func:`producer_batches` or
        :class:`ProducerBatch`). Returns completed transactions with their last stable offsets,
        for rebuilding transaction indexes."""
        done: list[tuple[CompletedTxn, int]] = []
        for batch in batches:
            if batch.last_offset < self._last_map_offset:
                continue
            pid = batch.producer_id
            if pid > NO_PRODUCER_ID:
                info = self.prepare_update(pid, AppendOrigin.REPLICATION)
                txn = info.append(batch)
                self.update(info)
                if txn is not None:
                    done.append((txn, self.last_stable_offset(txn)))
                    self.complete_txn(txn)
            self.update_map_end_offset(batch.last_offset + 1)
        return done

    # -- transactions ----------------------------------------------------------------------

    def _update_oldest_txn_timestamp(self) -> None:
        first = self._ongoing.first()
        if first is None:
            self._oldest_txn_last_timestamp = -1
        else:
            entry = self._producers.get(first.producer_id)
            self._oldest_txn_last_timestamp = entry.last_timestamp if entry else -1

    def has_late_transaction(self, now_ms: int) -> bool:
        """Whether the oldest ongoing transaction is older than the max transaction timeout
        plus 5 minutes (a hanging transaction)."""
        ts = self._oldest_txn_last_timestamp
        return ts > 0 and now_ms - ts > self.max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest transaction with no marker yet."""
        first = self._ongoing.first()
        return first.first_offset if first else None

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction that is undecided, or decided with its
        marker not yet below the high watermark; None when there is none (LSO = HW)."""
        candidates = [
            t.first_offset for t in (self._ongoing.first(), self._unreplicated.first()) if t
        ]
        return min(candidates) if candidates else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_transactions(high_watermark)

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        for txn in self._unreplicated.values():
            if txn.last_offset is not None and txn.last_offset < offset:
                self._unreplicated.pop(txn.first_offset)

    def last_stable_offset(self, completed_txn: CompletedTxn, ongoing: _OffsetMap | None = None) -> int:
        """The LSO to record with ``completed_txn`` in the transaction index: the first offset
        of the earliest ongoing transaction of another producer, else its marker offset + 1.
        Call before :meth:`complete_txn` (``ongoing``: instead of the manager's own)."""
        for txn in (self._ongoing if ongoing is None else ongoing).values():
            if txn.producer_id != completed_txn.producer_id:
                return txn.first_offset
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        txn = self._ongoing.pop(completed_txn.first_offset)
        if txn is None:
            raise ValueError(
                f"Attempted to complete transaction {completed_txn} on partition "
                f"{self.topic_partition} which was not started"
            )
        txn.last_offset = completed_txn.last_offset
        self._unreplicated.put(completed_txn.first_offset, txn)
        self._update_oldest_txn_timestamp()

    # -- views -----------------------------------------------------------------------------

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    @property
    def is_empty(self) -> bool:
        return not self._producers and not len(self._unreplicated)

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return self._ongoing.values()

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager({self.topic_partition!r}, producers={len(self._producers)}, "
            f"map_end_offset={self._last_map_offset})"
        )
