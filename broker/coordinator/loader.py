"""Kafka's CoordinatorLoader: read a coordinator partition's records for replay.

Runs in an executor (blocking file reads); the runtime replays the result on the event loop in
one synchronous step, after checking the load was not superseded meanwhile.

Two readers, for the two kinds of shard:

* `read_key_values`: (key, value) of the committed-as-written data records only; control and
  transactional batches are skipped (`__transaction_state` never holds either).
* `read_records`: every batch in offset order, as Kafka's GroupMetadataManager.doLoadGroupsAndOffsets
  iterates it: data records with their batch's base offset and producer id (-1 unless the batch
  is transactional: a TxnOffsetCommit's offsets, pending until their marker), and each
  COMMIT/ABORT control batch as a `LoadedMarker`, so a shard can complete or drop a producer's
  pending records where the marker is in the log.

Both read up to the log end, not the high watermark, as Kafka's loaders do: a new leader's high
watermark is the one it had as a follower, which may not cover the last writes yet; they are the
leader's now and will be committed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    Record,
    RecordsError,
    decode_records,
    iter_batches,
    parse_control_record,
    read_header,
)

KeyValue = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class LoadedRecord:
    """A data record of a coordinator partition (Kafka's CoordinatorShard.replay arguments)."""

    key: bytes
    value: bytes | None
    batch_offset: int  # the base offset of its batch (Kafka's appendedBatchOffset)
    producer_id: int  # the batch's producer id when transactional, else -1


@dataclass(frozen=True, slots=True)
class LoadedMarker:
    """A COMMIT or ABORT control batch (Kafka's replayEndTransactionMarker)."""

    offset: int
    producer_id: int
    commit: bool


LoadedEntry = LoadedRecord | LoadedMarker


def _batches(lg: Any) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """(header, records) of every batch from the log start to the log end, in offset order; the
    records of a batch that straddles the log start are those at or after it."""
    offset = lg.log_start_offset
    end = lg.log_end_offset
    while offset < end:
        info = lg.read(offset, 1 << 20, max_offset_exclusive=end, min_one_message=True)
        data = info.records.read()
        if not data:
            break
        last = offset
        for pos, _size in iter_batches(data):
            header = read_header(data, pos)
            last = header.next_offset
            _, recs = decode_records(data, pos)
            yield header, [r for r in recs if r.offset is not None and r.offset >= offset]
        if last <= offset:
            break
        offset = last


def read_key_values(lg: Any) -> list[KeyValue]:
    """(key, value) of every non-transactional data record of a log up to its log end, in
    offset order (see the module docstring)."""
    out: list[KeyValue] = []
    for header, recs in _batches(lg):
        if header.is_control or header.is_transactional:
            continue
        out.extend((r.key, r.value) for r in recs if r.key is not None)
    return out


def read_records(lg: Any) -> list[LoadedEntry]:
    """Every data record and transaction marker of a log up to its log end, in offset order (see
    the module docstring). A control batch of another type (none is written to coordinator
    topics) is skipped, as Kafka's loader ignores it."""
    out: list[LoadedEntry] = []
    for header, recs in _batches(lg):
        if header.is_control:
            for r in recs[:1]:  # Kafka reads a control batch's first record only
                try:
                    ctype, _coordinator_epoch = parse_control_record(r)
                except RecordsError:
                    continue
                if ctype in (CONTROL_COMMIT, CONTROL_ABORT):
                    out.append(LoadedMarker(header.base_offset, header.producer_id, ctype == CONTROL_COMMIT))
            continue
        producer_id = header.producer_id if header.is_transactional else -1
        out.extend(LoadedRecord(r.key, r.value, header.base_offset, producer_id)
                   for r in recs if r.key is not None)
    return out
